"""Alert rules replayed on real per-record verdicts with a simulated clock.

    python bench/alert_regression.py DATA.jsonl [DATA.jsonl ...] [--weeks 1] [--seed 1]

Every record of the data files (the project's record shape with `label.hallucinated`) is
scored once by the embedded `local_groundedness` evaluator; its verdicts and normalised
scores are cached under `/tmp/rag-monitor-alert-bench/` (keyed by the file's content), never
in the repository.

Streams are then drawn from those results: each simulated evaluation picks a hallucinated
record with probability `share` and a faithful one otherwise, and the evaluator's result
for it (verdict and score) is what the alert engine sees. A **healthy** phase uses the data's own hallucinated
share for `--weeks` simulated weeks (false pages per week); each **rise** (x1.25, x1.5, x2
the share) follows a healthy warm-up long enough to fill the baseline, and the time from
the rise to the first page is reported as the median and the worst of `--trials`
independent runs (`-` = not paged within `--max-rise`). This is done
at 0.2, 1 and 10 evaluations/s, for the absolute rule at `max_defect_rate: 0.1` and for
the regression rule at its defaults with each `test` (`window`, `sequential`) and `measure`
(`verdicts`, `scores`). The engine runs unchanged, driven by an injected clock and its own
`evaluate()` every `evaluation_interval_s` (15 s).

Beside each rise the **information limit** is printed: the minutes a test that knew the
risen rate exactly would need, at one false page a week, to gather the evidence (`ln` of
the evaluations in a week, over the Kullback-Leibler divergence per evaluation between the
risen and the healthy stream: of the verdicts, and a normal approximation for the scores).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CACHE = Path("/tmp/rag-monitor-alert-bench")


Scored = tuple[bool, float]  # (evaluator failed, normalised score)


@dataclass(frozen=True)
class Verdicts:
    """The evaluator's results, split by the record's label."""

    faithful: list[Scored]
    hallucinated: list[Scored]

    @property
    def share(self) -> float:
        return len(self.hallucinated) / (len(self.faithful) + len(self.hallucinated))


def score_file(path: Path) -> list[tuple[bool, bool, float]]:
    """(hallucinated, evaluator failed, normalised score) for each record of `path`,
    cached in /tmp."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    cached = CACHE / f"{path.stem}-{digest}-scores.json"
    if cached.exists():
        return [(bool(h), bool(f), float(s)) for h, f, s in json.loads(cached.read_text())]
    from monitor.config import EvaluatorConfig
    from monitor.evaluators.local import LocalGroundedness
    from monitor.records import parse_record

    evaluator = LocalGroundedness(EvaluatorConfig(name="local_groundedness"))
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        label = raw.pop("label")
        result = evaluator.score(parse_record(raw))
        assert result.normalized is not None, result.error
        out.append((bool(label["hallucinated"]), result.outcome == "fail", result.normalized))
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(out))
    return out


def load(paths: list[Path]) -> dict[str, Verdicts]:
    out = {}
    for path in paths:
        rows = score_file(path)
        out[path.stem] = Verdicts(
            faithful=[(f, s) for h, f, s in rows if not h],
            hallucinated=[(f, s) for h, f, s in rows if h],
        )
    return out


RULES: dict[str, dict[str, Any]] = {
    "absolute 0.1": {"evaluator": "local_groundedness", "max_defect_rate": 0.1},
    "regression, window test": {
        "evaluator": "local_groundedness",
        "baseline": {},
        "test": "window",
    },
    "regression, sequential test": {
        "evaluator": "local_groundedness",
        "baseline": {},
        "test": "sequential",
    },
    "regression, scores, window test": {
        "evaluator": "local_groundedness",
        "baseline": {},
        "test": "window",
        "measure": "scores",
    },
    "regression, scores, sequential test": {
        "evaluator": "local_groundedness",
        "baseline": {},
        "test": "sequential",
        "measure": "scores",
    },
}
INTERVAL_S = 15.0
WEEK_S = 7 * 86_400.0
RISES = (1.25, 1.5, 2.0)


class Replay:
    """One engine with every rule of `RULES`, fed at `rate` evaluations/s of simulated time."""

    def __init__(self, verdicts: Verdicts, rate: float, seed: int, rules: dict[str, Any]) -> None:
        from monitor.alerts import AlertEngine
        from monitor.config import AlertRule
        from monitor.records import RagRecord
        from monitor.results import EvalResult
        from monitor.telemetry import create_telemetry

        self.now = 1_000_000.0
        self.engine = AlertEngine(
            [AlertRule(name=name, **rule) for name, rule in rules.items()],
            create_telemetry(),
            evaluation_interval_s=INTERVAL_S,
            clock=lambda: self.now,
        )
        self.verdicts, self.step, self.rng = verdicts, 1.0 / rate, random.Random(seed)
        self.record = RagRecord(request_id="r", service="svc", response="x")
        self.results = {
            pool: [
                {
                    "local_groundedness": EvalResult(
                        name="local_groundedness", score=score, normalized=score, passed=not fail
                    )
                }
                for fail, score in items
            ]
            for pool, items in (
                ("faithful", verdicts.faithful),
                ("hallucinated", verdicts.hallucinated),
            )
        }
        self.pages: dict[str, list[float]] = {name: [] for name in rules}
        self.firing_s: dict[str, float] = dict.fromkeys(rules, 0.0)

    def run(self, seconds: float, share: float) -> None:
        """Feeds `seconds` of traffic whose hallucinated share is `share`, judging every
        `INTERVAL_S`; records each page (a transition to firing) and time spent firing."""
        faithful, hallucinated = self.results["faithful"], self.results["hallucinated"]
        rng, emit, record = self.rng, self.engine.emit, self.record
        end = self.now + seconds
        next_tick = self.now + INTERVAL_S
        while self.now < end:
            pool = hallucinated if rng.random() < share else faithful
            emit(record, pool[rng.randrange(len(pool))])
            self.now += self.step
            while self.now >= next_tick:
                saved, self.now = self.now, next_tick
                before = set(self.engine.firing())
                self.engine.evaluate()
                for rule, service in self.engine.firing():
                    self.firing_s[rule] += INTERVAL_S
                    if (rule, service) not in before:
                        self.pages[rule].append(next_tick)
                self.now = saved
                next_tick += INTERVAL_S


def _minutes(seconds: float) -> str:
    return "-" if math.isinf(seconds) else f"{seconds / 60:.1f}"


def bench(
    verdicts: Verdicts,
    rates: list[float],
    weeks: float,
    max_rise_s: float,
    seed: int,
    trials: int,
) -> None:
    from monitor.config import AlertBaseline, AlertRule, parse_duration

    share = verdicts.share
    regression = AlertRule(name="r", evaluator="e", baseline=AlertBaseline())
    assert regression.baseline is not None

    warm_up = parse_duration(regression.baseline.window) + parse_duration(regression.window)
    header = [
        "evals/s",
        "rule",
        "false pages/week",
        "healthy time firing",
        *(f"x{k}: min to page, median (worst of {trials})" for k in RISES),
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for rate in rates:
        healthy = Replay(verdicts, rate, seed, RULES)
        healthy.run(warm_up, share)
        for name in RULES:
            # A rule firing as the week starts counts as paged on healthy traffic.
            firing_now = {rule for rule, _ in healthy.engine.firing()}
            healthy.pages[name] = [healthy.now] if name in firing_now else []
            healthy.firing_s[name] = 0.0
        healthy.run(weeks * WEEK_S, share)
        rises: dict[str, list[str]] = {name: [] for name in RULES}
        for k in RISES:
            times: dict[str, list[float]] = {name: [] for name in RULES}
            before: set[str] = set()
            for trial in range(trials):
                replay = Replay(verdicts, rate, seed + 1000 * trial + int(k * 100), RULES)
                replay.run(warm_up, share)
                start = replay.now
                before |= {name for name, _ in replay.engine.firing()}
                risen = min(1.0, share * k)
                while replay.now - start < max_rise_s and not all(
                    any(t >= start for t in replay.pages[name]) for name in RULES
                ):
                    replay.run(min(300.0, start + max_rise_s - replay.now), risen)
                for name in RULES:
                    after = [t - start for t in replay.pages[name] if t >= start]
                    times[name].append(after[0] if after else math.inf)
            for name in RULES:
                if name in before:
                    rises[name].append("firing before")
                else:
                    ordered = sorted(times[name])
                    median, worst = ordered[len(ordered) // 2], ordered[-1]
                    rises[name].append(f"{_minutes(median)} ({_minutes(worst)})")
        for name in RULES:
            pages = len(healthy.pages[name]) / weeks
            firing = healthy.firing_s[name] / (weeks * WEEK_S)
            print(
                f"| {rate:g} | {name} | {pages:.1f} | {firing:.0%} | "
                + " | ".join(rises[name])
                + " |"
            )
        for measure in ("verdicts", "scores"):
            limits = [f"{information_limit(verdicts, k, rate, measure):.1f}" for k in RISES]
            print(f"| {rate:g} | information limit, {measure} | | | " + " | ".join(limits) + " |")


def information_limit(verdicts: Verdicts, rise: float, rate: float, measure: str) -> float:
    """Minutes to gather ln(evaluations a week) nats of evidence that the hallucinated share
    rose `rise`-fold: the Kullback-Leibler divergence per evaluation of the verdicts (exact)
    or of the defect scores (normal approximation, with the healthy variance)."""
    share = verdicts.share
    risen = min(1.0, share * rise)

    def mixture(k: float, value: Any) -> tuple[float, float]:
        """Mean and variance of `value(result)` over a stream of hallucinated share `k`."""
        pools = ((1 - k, verdicts.faithful), (k, verdicts.hallucinated))
        mean = sum(w * sum(map(value, p)) / len(p) for w, p in pools)
        second = sum(w * sum(value(r) ** 2 for r in p) / len(p) for w, p in pools)
        return mean, second - mean * mean

    if measure == "verdicts":
        p0, _ = mixture(share, lambda r: float(r[0]))
        p1, _ = mixture(risen, lambda r: float(r[0]))
        kl = p1 * math.log(p1 / p0) + (1 - p1) * math.log((1 - p1) / (1 - p0))
    else:
        m0, v0 = mixture(share, lambda r: 1.0 - r[1])
        m1, _ = mixture(risen, lambda r: 1.0 - r[1])
        kl = (m1 - m0) ** 2 / (2 * v0)
    return math.log(rate * WEEK_S) / kl / rate / 60


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", type=Path)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.2, 1.0, 10.0])
    parser.add_argument("--weeks", type=float, default=1.0)
    parser.add_argument("--max-rise", type=float, default=2 * 3600.0, help="seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--trials", type=int, default=5, help="independent runs per rise")
    parser.add_argument(
        "--regression",
        type=json.loads,
        default={},
        help="keys over the regression rule's defaults, as JSON: '{\"confidence\": 0.9999}'",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    for name, rule in RULES.items():
        if name.startswith("regression"):
            rule.update(args.regression)
    for name, v in load(args.data).items():
        fpr = sum(f for f, _ in v.faithful) / len(v.faithful)
        tpr = sum(f for f, _ in v.hallucinated) / len(v.hallucinated)
        print(
            f"\n{name}: hallucinated share {v.share:.3f}; the evaluator fails "
            f"{fpr:.1%} of faithful and {tpr:.1%} of hallucinated answers\n"
        )
        bench(v, args.rates, args.weeks, args.max_rise, args.seed, args.trials)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
