"""Alert rules replayed on real per-record verdicts with a simulated clock.

    python bench/alert_regression.py DATA.jsonl [DATA.jsonl ...] [--weeks 1] [--seed 1]

Every record of the data files (the project's record shape with `label.hallucinated`) is
scored once by the embedded `local_groundedness` evaluator; the verdicts are cached under
`/tmp/rag-monitor-alert-bench/` (keyed by the file's content), never in the repository.

Streams are then drawn from those verdicts: each simulated evaluation picks a hallucinated
record with probability `share` and a faithful one otherwise, and the evaluator's verdict
for it is what the alert engine sees. A **healthy** phase uses the data's own hallucinated
share for `--weeks` simulated weeks (false pages per week); each **rise** (x1.25, x1.5, x2
the share) follows a healthy warm-up long enough to fill the baseline, and the time from
the rise to the first page is reported as the median and the worst of `--trials`
independent runs (`-` = not paged within `--max-rise`). This is done
at 0.2, 1 and 10 evaluations/s, for the absolute rule at `max_defect_rate: 0.1` and for
the regression rule at its defaults. The engine runs unchanged, driven by an injected clock
and its own `evaluate()` every `evaluation_interval_s` (15 s).
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


@dataclass(frozen=True)
class Verdicts:
    """`fail` flags of the evaluator, split by the record's label."""

    faithful: list[bool]
    hallucinated: list[bool]

    @property
    def share(self) -> float:
        return len(self.hallucinated) / (len(self.faithful) + len(self.hallucinated))


def score_file(path: Path) -> list[tuple[bool, bool]]:
    """(hallucinated, evaluator failed) for each record of `path`, cached in /tmp."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    cached = CACHE / f"{path.stem}-{digest}.json"
    if cached.exists():
        return [(bool(h), bool(f)) for h, f in json.loads(cached.read_text())]
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
        record = parse_record(raw)
        out.append((bool(label["hallucinated"]), evaluator.score(record).outcome == "fail"))
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(out))
    return out


def load(paths: list[Path]) -> dict[str, Verdicts]:
    out = {}
    for path in paths:
        pairs = score_file(path)
        out[path.stem] = Verdicts(
            faithful=[f for h, f in pairs if not h], hallucinated=[f for h, f in pairs if h]
        )
    return out


RULES: dict[str, dict[str, Any]] = {
    "absolute 0.1": {"evaluator": "local_groundedness", "max_defect_rate": 0.1},
    "regression (defaults)": {"evaluator": "local_groundedness", "baseline": {}},
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
            fail: {"local_groundedness": EvalResult(name="local_groundedness", passed=not fail)}
            for fail in (False, True)
        }
        self.pages: dict[str, list[float]] = {name: [] for name in rules}
        self.firing_s: dict[str, float] = dict.fromkeys(rules, 0.0)

    def run(self, seconds: float, share: float) -> None:
        """Feeds `seconds` of traffic whose hallucinated share is `share`, judging every
        `INTERVAL_S`; records each page (a transition to firing) and time spent firing."""
        faithful, hallucinated = self.verdicts.faithful, self.verdicts.hallucinated
        rng, emit, results = self.rng, self.engine.emit, self.results
        end = self.now + seconds
        next_tick = self.now + INTERVAL_S
        while self.now < end:
            pool = hallucinated if rng.random() < share else faithful
            emit(self.record, results[pool[rng.randrange(len(pool))]])
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
                replay.run(max_rise_s, min(1.0, share * k))
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
    RULES["regression (defaults)"].update(args.regression)
    for name, v in load(args.data).items():
        fpr = sum(v.faithful) / len(v.faithful)
        tpr = sum(v.hallucinated) / len(v.hallucinated)
        print(
            f"\n{name}: hallucinated share {v.share:.3f}; the evaluator fails "
            f"{fpr:.1%} of faithful and {tpr:.1%} of hallucinated answers\n"
        )
        bench(v, args.rates, args.weeks, args.max_rise, args.seed, args.trials)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
