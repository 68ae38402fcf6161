"""Regression alerts on the detector's real verdicts, through the alert engine: time to page
and boosts.

    python bench/alert_regression.py DATA.jsonl [DATA.jsonl ...] [--rates 0.2 1 10 100]
        [--trials 25] [--boost-p 0.01 0.05 0.2] [--boost-weeks 4] [--validity-weeks 6]
        [--jobs 2] [--seed 1] [--write-docs]

Every record of the data files (the project's record shape with `label.hallucinated`) is
scored once by the embedded `local_groundedness` evaluator; its verdicts are cached under
`/tmp/rag-monitor-alert-bench/` (keyed by the file's content), never in the repository. A
stream draws, for each evaluation, a hallucinated record with probability `share` and a
faithful one otherwise, and the evaluator's verdict on it is what the rule sees.

Every number comes from `AlertEngine` itself, driven by an injected clock (`Replay`), with
evaluations every 15 s and at once when a test reaches its budget. Each run starts as a
long-running service: **four weeks of healthy history** (what a seasonal baseline keeps)
fed as hourly counts (`AlertEngine.add_counts`, a Poisson number of verdicts, binomial
defects) and judged once a day (the history's hourly buckets, from which the level, the
weekly season and the dispersion are learned, hold what hourly judging would put there, at
a 24th of the cost), then the last 30 minutes (one current window) verdict by verdict.
Runs that compare settings share that warm-up through the state file's path
(`AlertEngine.snapshot` / `restore`).

1. **Time to page.** The default regression rule (`baseline: {}`: the sequential test, a
   24h baseline with a weekly season) and the same rule with `test: window`, at the
   default budget (`alerts.false_page_every`); verdicts arrive as a Poisson process at each
   rate of `--rates`; after the warm-up the hallucinated share rises by 1.25, 1.5, 2 and 3:
   the minutes from the rise to the first page, median (worst) of `--trials` runs, beside
   the **information limit**: the minutes a test that knew both rates exactly would need at
   that budget (`ln(rate x budget)` nats, over the Kullback-Leibler divergence per verdict
   of the risen stream from the healthy one), and the median's ratio to it with a 95 %
   interval of that ratio. A second table holds the acceptance (x2 within 1.5 times the
   limit at 1 and 10 evaluations/s) and the dispersion the test tempered by at its pages.
2. **Boosts** (evidence-driven sampling): a service of `--requests` requests/s whose
   evaluator samples `--sample-rate` of them, without a boost and with `boost: {sample_rate:
   --boost-rate, while_p_below: L}` for each L of `--boost-p`: time to page x1.5 and x2 and
   the speed-up (the arms of a run share its warm-up and its verdicts until a boost
   differs), against what false suspicions cost on a healthy stream at the default budget
   (`--boost-weeks` service-weeks per arm): evaluations per second, the share of time
   boosted, false pages.
3. **Boosts add no false page**: the same arms at a short budget (`--validity-budget`, one
   an hour) on healthy streams, `--validity-weeks` service-weeks per arm, so that hundreds
   of budget periods pass; pages per budget period with a 95 % interval.
4. **Compressed windows** (`tests/alerts/test_alerts_compressed.py`): `window: 30s`,
   baseline `3m`, `min_increase: 0.05`, one false page an hour, 8 verdicts/s, defect rate
   0.35 rising to 0.46 after ten healthy minutes: the seconds to page over `--trials` x 4
   runs.

Healthy streams in 2 and 3 run a service-week each after their own warm-up, stepped per
second: the base rate's verdicts (a Poisson count, binomial defects at the healthy defect
rate) and, while a boost is on, the boosted rate's extra ones, fed as counts; every arm of
a stream draws the same base verdicts.

False pages at the default budget are measured by `bench/alert_production.py`, on
independent and production-shaped streams over service-years through the engine of
`rag-monitor backtest`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import multiprocessing
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from scipy.stats import chi2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import bench_docs, bench_smoke
from harness.production_streams import DAY_S, START
from harness.simulated_alerts import information_limit_s
from harness.simulated_alerts import run_seed as _seed

if TYPE_CHECKING:
    from monitor.alerts import AlertEngine
    from monitor.boosts import SamplingBoosts

CACHE = Path("/tmp/rag-monitor-alert-bench")
INTERVAL_S = 15.0
HOUR_S = 3600.0
# Verdict by verdict before a rise: one current window of the default rule.
LAST_S = 1800.0
RISES = (1.25, 1.5, 2.0, 3.0)
BOOST_RISES = (1.5, 2.0)
# A boosted run that has not paged after this long is counted as not paged.
BOOST_MAX_S = 6 * HOUR_S
WEEK_S = 7 * DAY_S
EVALUATOR = "local_groundedness"
SERVICE = "svc"
# Rule names are label values (the config refuses spaces); the tables show `SHOWN`.
RULES: dict[str, dict[str, Any]] = {
    "sequential": {"evaluator": EVALUATOR, "baseline": {}},
    "window": {"evaluator": EVALUATOR, "baseline": {}, "test": "window"},
}
SHOWN = {"sequential": "sequential test (default)", "window": "window test"}
SEQUENTIAL = "sequential"
# The acceptance of time to page on independent verdicts: x2 within this many times the
# information limit at these rates.
TARGET_RISE, TARGET_RATIO, TARGET_RATES = 2.0, 1.5, (1.0, 10.0)


@dataclass(frozen=True)
class Verdicts:
    """The evaluator's verdicts (True = failed), split by the record's label."""

    faithful: list[bool]
    hallucinated: list[bool]

    @property
    def share(self) -> float:
        return len(self.hallucinated) / (len(self.faithful) + len(self.hallucinated))

    def defect_rate(self, share: float) -> float:
        f0 = sum(self.faithful) / len(self.faithful)
        f1 = sum(self.hallucinated) / len(self.hallucinated)
        return (1 - share) * f0 + share * f1

    def draw(self, rng: random.Random, share: float) -> Callable[[], bool]:
        """Verdicts of a stream whose hallucinated share is `share`."""

        def one() -> bool:
            pool = self.hallucinated if rng.random() < share else self.faithful
            return pool[rng.randrange(len(pool))]

        return one


def score_file(path: Path) -> list[tuple[bool, bool]]:
    """(hallucinated, evaluator failed) for each record of `path`, cached in /tmp."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    cached = CACHE / f"{path.stem}-{digest}-verdicts.json"
    if cached.exists():
        return [(bool(h), bool(f)) for h, f in json.loads(cached.read_text())]
    from monitor.config import EvaluatorConfig
    from monitor.evaluators.local import LocalGroundedness
    from monitor.records import parse_record

    evaluator = LocalGroundedness(EvaluatorConfig(name=EVALUATOR))
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        label = raw.pop("label")
        result = evaluator.score(parse_record(raw))
        assert result.outcome != "error", result.error
        out.append((bool(label["hallucinated"]), result.outcome == "fail"))
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(out))
    return out


def load(paths: list[Path]) -> dict[str, Verdicts]:
    out = {}
    for path in paths:
        rows = score_file(path)
        out[path.stem] = Verdicts(
            faithful=[f for h, f in rows if not h], hallucinated=[f for h, f in rows if h]
        )
    return out


def engine(
    rules: list[dict[str, Any]],
    clock: Callable[[], float],
    false_page_every: str | None = None,
    boosts: SamplingBoosts | None = None,
    sample_rate: float | None = None,
) -> AlertEngine:
    """The sidecar's engine (`AlertEngine.from_config`) with `rules` (`alerts.rules`
    entries) on `EVALUATOR`'s verdicts (which samples `sample_rate` of the requests),
    evaluating every `INTERVAL_S` on `clock`."""
    from monitor.alerts import AlertEngine
    from monitor.config import Config
    from monitor.telemetry import create_telemetry

    alerts: dict[str, Any] = {"evaluation_interval_s": INTERVAL_S, "rules": rules}
    if false_page_every is not None:
        alerts["false_page_every"] = false_page_every
    evaluators = [{"name": EVALUATOR, "sample_rate": sample_rate}]
    config = Config.model_validate({"evaluators": evaluators, "alerts": alerts})
    return AlertEngine.from_config(config, create_telemetry(), clock=clock, boosts=boosts)


class Replay:
    """One engine with `rules` (name -> `AlertRule` fields) on simulated time, for one
    service receiving `requests` a second, of which the evaluator samples `sample_rate`, or
    the rate a rule's boost asks for while it is on (`SamplingBoosts`)."""

    def __init__(
        self,
        rules: dict[str, dict[str, Any]],
        budget: str,
        requests: float,
        sample_rate: float,
        seed: int,
        start: float = START,
    ) -> None:
        from monitor.boosts import SamplingBoosts
        from monitor.component import Evaluated
        from monitor.records import RagRecord
        from monitor.results import EvalResult

        self.now = start
        self.boosts = SamplingBoosts()
        self.engine = engine(
            [{"name": name, **rule} for name, rule in rules.items()],
            lambda: self.now,
            false_page_every=budget,
            boosts=self.boosts,
            sample_rate=sample_rate,
        )
        self.rules, self.budget = rules, budget
        self.requests, self.sample_rate = requests, sample_rate
        self.rng = random.Random(seed)
        self.counts = np.random.default_rng([seed % 2**63, 0])
        # Verdicts only a boost samples: drawn apart, so arms share the base verdicts.
        self.extra = np.random.default_rng([seed % 2**63, 1])
        self.record = RagRecord(request_id="r", service=SERVICE, response="x")
        self.evaluated = [
            Evaluated(
                self.record,
                {EVALUATOR: EvalResult(name=EVALUATOR, score=s, normalized=s, passed=s > 0)},
            )
            for s in (0.0, 1.0)
        ]
        self.pages: dict[str, list[float]] = {name: [] for name in rules}
        # The dispersion each page's test tempered verdicts by (its annotation).
        self.dispersion: dict[str, list[float]] = {name: [] for name in rules}
        self.evaluations = 0.0
        self.boosted_s = 0.0
        self._firing: set[str] = set()
        self._next_tick = start + INTERVAL_S

    @property
    def base_rate(self) -> float:
        return self.requests * self.sample_rate

    @property
    def rate(self) -> float:
        """Evaluations a second now: the base rate, or a boost's."""
        return self.requests * self.boosts.active().get((EVALUATOR, SERVICE), self.sample_rate)

    def warm(self, p: float, days: float = 28.0) -> None:
        """`days` of healthy history at the base rate, defect rate `p`, as hourly counts
        (the history's buckets are hours), judged once a day and whenever a test asks."""
        names = list(self.rules)
        for hour in range(round(days * 24)):
            n = int(self.counts.poisson(self.base_rate * HOUR_S))
            k = int(self.counts.binomial(n, p))
            for name in names:
                self.engine.add_counts(name, SERVICE, "", [float(n - k), float(k)])
            if self.engine.evaluation_due:
                self._evaluate()
            self.now += HOUR_S
            if (hour + 1) % 24 == 0:
                self._evaluate()
        self._next_tick = self.now + INTERVAL_S

    def run(
        self, seconds: float, draw: Callable[[], bool], stop: Callable[[], bool] = lambda: False
    ) -> None:
        """Verdict by verdict for `seconds` (arrivals at `rate`), judging every interval and
        whenever a test asks."""
        end = self.now + seconds
        while self.now < end and not stop():
            self.now += self.rng.expovariate(self.rate)
            self._tick()
            self.evaluations += 1
            self.engine.emit([self.evaluated[0 if draw() else 1]])
            if self.engine.evaluation_due:
                self._evaluate()

    def steps(self, seconds: float, p: float) -> None:
        """Second by second for `seconds`: the base rate's verdicts and, while a boost is
        on, the boosted rate's extra ones (Poisson counts, binomial defects at `p`)."""
        base = self.base_rate
        names = list(self.rules)
        left = round(seconds)
        while left > 0:
            chunk = min(left, round(HOUR_S))
            left -= chunk
            ns = self.counts.poisson(base, chunk)
            ks = self.counts.binomial(ns, p)
            for n, k in zip(ns.tolist(), ks.tolist(), strict=True):
                self.now += 1.0
                self._tick()
                extra = self.rate - base
                if extra > 0:
                    self.boosted_s += 1.0
                    more = int(self.extra.poisson(extra))
                    n += more
                    k += int(self.extra.binomial(more, p))
                if not n:
                    continue
                self.evaluations += n
                for name in names:
                    self.engine.add_counts(name, SERVICE, "", [float(n - k), float(k)])
                if self.engine.evaluation_due:
                    self._evaluate()

    def branch(self, rules: dict[str, dict[str, Any]], seed: int) -> Replay:
        """A replay that goes on from this one's state now, through the state file's path
        (`snapshot`, `restore`), with `rules` of the same names and windows (a boost may
        differ); its own verdicts from `seed`."""
        self._evaluate()  # the pending units reach the test before it is saved
        other = Replay(rules, self.budget, self.requests, self.sample_rate, seed, self.now)
        other.engine.restore(self.engine.snapshot())
        other._evaluate()  # bets against the restored history, as a restarted sidecar's
        return other

    def _tick(self) -> None:
        while self.now >= self._next_tick:
            saved, self.now = self.now, self._next_tick
            self._evaluate()
            self.now = saved
            self._next_tick += INTERVAL_S

    def _evaluate(self) -> None:
        for alert in self.engine.evaluate():
            if alert.status == "resolved":
                self._firing.discard(alert.rule)
            elif alert.rule not in self._firing:
                self._firing.add(alert.rule)
                self.pages[alert.rule].append(self.now)
                self.dispersion[alert.rule].append(float(alert.annotations["dispersion"]))


# -- 1. time to page ---------------------------------------------------------------------


@dataclass(frozen=True)
class Paged:
    """One run's seconds from the rise to each rule's first page (inf: none within six
    times the information limit; nan: paged before the rise), and the dispersion the
    sequential test tempered by at its page (nan: no page)."""

    seconds: dict[str, float]
    dispersion: float


def pages_trial(verdicts: Verdicts, rate: float, seed: int, budget: str) -> dict[float, Paged]:
    """One warm-up at `rate` evaluations/s, then each rise of `RISES` from it."""
    from monitor.config import parse_duration

    budget_s = parse_duration(budget)
    healthy = verdicts.share
    p0 = verdicts.defect_rate(healthy)
    replay = Replay(RULES, budget, rate, 1.0, seed)
    replay.warm(p0)
    replay.run(LAST_S, verdicts.draw(replay.rng, healthy))
    early = {name for name, pages in replay.pages.items() if pages}
    out = {}
    for factor in RISES:
        risen = min(1.0, healthy * factor)
        limit = information_limit_s(p0, verdicts.defect_rate(risen), rate, budget_s)
        rise = replay.branch(RULES, _seed(seed, factor))
        start = rise.now
        rise.run(
            6 * limit,
            verdicts.draw(rise.rng, risen),
            stop=lambda r=rise: all(r.pages.values()),  # type: ignore[misc]
        )
        seconds = {
            name: math.nan if name in early else (pages[0] - start if pages else math.inf)
            for name, pages in rise.pages.items()
        }
        kappa = rise.dispersion[SEQUENTIAL]
        out[factor] = Paged(seconds, kappa[0] if kappa else math.nan)
    return out


def _minutes(seconds: float) -> str:
    return "-" if math.isinf(seconds) else f"{seconds / 60:.1f}"


def _median_worst(times: list[float]) -> str:
    if any(math.isnan(t) for t in times):
        return f"paged before the rise ({sum(math.isnan(t) for t in times)})"
    ordered = sorted(times)
    return f"{_minutes(ordered[len(ordered) // 2])} ({_minutes(ordered[-1])})"


def median_interval(times: list[float]) -> tuple[float, float, float]:
    """The median of `times` and a 95 % interval of it (order statistics: the ranks
    n/2 -+ 1.96 sqrt(n)/2)."""
    ordered = sorted(times)
    n = len(ordered)
    half = 1.96 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half))
    high = min(n - 1, math.ceil(n / 2 + half) - 1)
    return ordered[n // 2], ordered[low], ordered[high]


def _ratio(times: list[float], limit: float) -> str:
    """The median's ratio to `limit`, with its 95 % interval."""
    median, low, high = median_interval(times)
    if math.isinf(median) or math.isnan(median):
        return ""
    top = "-" if math.isinf(high) else f"{high / limit:.2f}"
    return f", {median / limit:.2f}x [{low / limit:.2f}-{top}]"


T = TypeVar("T")


def _map(jobs: int, fn: Callable[..., T], tasks: Sequence[tuple[Any, ...]]) -> list[T]:
    """`fn(*task)` for every task, in order; in `jobs` processes when more than one."""
    if jobs <= 1 or len(tasks) <= 1:
        return [fn(*task) for task in tasks]
    # spawn, not fork: nothing of this process's state is shared by accident.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_quiet) as pool:
        return list(pool.map(fn, *zip(*tasks, strict=True)))


def _quiet() -> None:
    logging.basicConfig(level=logging.ERROR)


def pages_tables(
    verdicts: Verdicts, rates: list[float], trials: int, seed: int, budget: str, jobs: int
) -> str:
    """Minutes to page per rate, rule and rise, against the information limit; then the
    acceptance and the dispersion at the pages."""
    from monitor.config import parse_duration

    budget_s = parse_duration(budget)
    p0 = verdicts.defect_rate(verdicts.share)
    tasks = [
        (verdicts, rate, _seed(seed, rate, t), budget) for rate in rates for t in range(trials)
    ]
    runs = _map(jobs, pages_trial, tasks)
    rows, checks = [], []
    for i, rate in enumerate(rates):
        mine = runs[i * trials : (i + 1) * trials]
        limits = {
            k: information_limit_s(
                p0, verdicts.defect_rate(min(1.0, verdicts.share * k)), rate, budget_s
            )
            for k in RISES
        }
        for name in RULES:
            cells = []
            for k in RISES:
                times = [run[k].seconds[name] for run in mine]
                cells.append(_median_worst(times) + _ratio(times, limits[k]))
            rows.append([f"{rate:g}", SHOWN[name], *cells])
        rows.append([f"{rate:g}", "information limit", *(_minutes(limits[k]) for k in RISES)])
        times = [run[TARGET_RISE].seconds[SEQUENTIAL] for run in mine]
        median = median_interval(times)[0]
        ratio = median / limits[TARGET_RISE]
        kappas = sorted(
            run[k].dispersion for run in mine for k in RISES if not math.isnan(run[k].dispersion)
        )
        target = ("met" if ratio <= TARGET_RATIO else "not met") if rate in TARGET_RATES else ""
        checks.append(
            [
                f"{rate:g}",
                f"{ratio:.2f}x" + (f" ({target})" if target else ""),
                f"{statistics.median(kappas):.2f} ({kappas[0]:.2f}-{kappas[-1]:.2f})"
                if kappas
                else "-",
            ]
        )
    header = [
        "evals/s",
        "rule",
        *(f"x{k}: min to page, median (worst of {trials}), vs limit [95 %]" for k in RISES),
    ]
    check_header = [
        "evals/s",
        f"sequential test, x{TARGET_RISE:g}: median / limit (target: within {TARGET_RATIO:g}x "
        f"at {' and '.join(f'{r:g}' for r in TARGET_RATES)} evals/s)",
        "dispersion the test tempered by at its pages: median (range)",
    ]
    return bench_docs.table(header, rows) + "\n\n" + bench_docs.table(check_header, checks)


# -- 2. and 3. boosts --------------------------------------------------------------------


@dataclass(frozen=True)
class BoostSettings:
    """A service of `requests` requests/s whose evaluator samples `sample_rate` of them,
    boosted to `boost_rate` while the rule's p-value is below each of `levels`."""

    requests: float
    sample_rate: float
    boost_rate: float
    levels: tuple[float, ...]

    def arms(self) -> tuple[float | None, ...]:
        return (None, *self.levels)

    def rules(self, level: float | None) -> dict[str, dict[str, Any]]:
        rule: dict[str, Any] = {"evaluator": EVALUATOR, "baseline": {}}
        if level is not None:
            rule["boost"] = {"sample_rate": self.boost_rate, "while_p_below": level}
        return {"r": rule}

    @staticmethod
    def name(level: float | None) -> str:
        return "without boost" if level is None else f"boost at p < {level:g}"


def boost_trial(
    verdicts: Verdicts, b: BoostSettings, seed: int, budget: str
) -> dict[tuple[float | None, float], float]:
    """Seconds from a rise by each factor of `BOOST_RISES` to the page, per arm (inf: none
    within `BOOST_MAX_S`; nan: paged before the rise), every arm from one warm-up."""
    healthy = verdicts.share
    replay = Replay(b.rules(None), budget, b.requests, b.sample_rate, seed)
    replay.warm(verdicts.defect_rate(healthy))
    replay.run(LAST_S, verdicts.draw(replay.rng, healthy))
    early = bool(replay.pages["r"])
    out = {}
    for factor in BOOST_RISES:
        risen = min(1.0, healthy * factor)
        for level in b.arms():
            # The same seed for every arm: the same verdicts until a boost differs.
            rise = replay.branch(b.rules(level), _seed(seed, factor))
            start = rise.now
            rise.run(
                BOOST_MAX_S,
                verdicts.draw(rise.rng, risen),
                stop=lambda r=rise: bool(r.pages["r"]),  # type: ignore[misc]
            )
            pages = rise.pages["r"]
            out[(level, factor)] = math.nan if early else (pages[0] - start if pages else math.inf)
    return out


@dataclass(frozen=True)
class Tally:
    """Healthy service time: seconds, evaluations, seconds boosted, pages."""

    seconds: float = 0.0
    evaluations: float = 0.0
    boosted_s: float = 0.0
    pages: int = 0

    def plus(self, other: Tally) -> Tally:
        return Tally(
            self.seconds + other.seconds,
            self.evaluations + other.evaluations,
            self.boosted_s + other.boosted_s,
            self.pages + other.pages,
        )

    def per_budget(self, budget_s: float) -> str:
        """Pages, and per budget period with a 95 % interval (Poisson)."""
        budgets = self.seconds / budget_s
        k = self.pages
        low = float(chi2.ppf(0.025, 2 * k)) / 2 if k else 0.0
        high = float(chi2.ppf(0.975, 2 * (k + 1))) / 2
        return f"{k} ({k / budgets:.2f} [{low / budgets:.2f}-{high / budgets:.2f}])"


def healthy_stream(
    p: float, b: BoostSettings, level: float | None, seed: int, budget: str, span_s: float
) -> Tally:
    """`span_s` of a healthy service after its warm-up, with one arm's rule at `budget`;
    every arm of a stream (its `seed`) draws the same base verdicts."""
    replay = Replay(b.rules(level), budget, b.requests, b.sample_rate, seed)
    replay.warm(p)
    before = len(replay.pages["r"])
    replay.steps(span_s, p)
    return Tally(span_s, replay.evaluations, replay.boosted_s, len(replay.pages["r"]) - before)


def healthy_tallies(
    p: float, b: BoostSettings, weeks: float, seed: int, budget: str, jobs: int
) -> dict[float | None, Tally]:
    """Each arm over `weeks` service-weeks (one stream a week, the last one what remains)."""
    spans = [WEEK_S] * int(weeks) + ([(weeks % 1) * WEEK_S] if weeks % 1 else [])
    tasks = [
        (p, b, level, _seed(seed, week), budget, span)
        for level in b.arms()
        for week, span in enumerate(spans)
    ]
    runs = _map(jobs, healthy_stream, tasks)
    out = {}
    for i, level in enumerate(b.arms()):
        total = Tally()
        for tally in runs[i * len(spans) : (i + 1) * len(spans)]:
            total = total.plus(tally)
        out[level] = total
    return out


def boost_table(
    verdicts: Verdicts, b: BoostSettings, trials: int, weeks: float, seed: int, jobs: int
) -> str:
    """With and without a boost at each trigger level: time to page x1.5 and x2, the
    speed-up, and what it costs on a healthy stream at the default budget."""
    from monitor.config import FALSE_PAGE_EVERY

    tasks = [(verdicts, b, _seed(seed, "boost", t), FALSE_PAGE_EVERY) for t in range(trials)]
    runs = _map(jobs, boost_trial, tasks)
    p0 = verdicts.defect_rate(verdicts.share)
    healthy = healthy_tallies(p0, b, weeks, _seed(seed, "healthy"), FALSE_PAGE_EVERY, jobs)
    base_rate = b.requests * b.sample_rate
    rows = []
    unboosted: list[float] = []
    for level in b.arms():
        cells, medians = [], []
        for factor in BOOST_RISES:
            times = [run[(level, factor)] for run in runs]
            cells.append(_median_worst(times))
            medians.append(median_interval(times)[0])
        if level is None:
            unboosted = medians
        speed = [f"{u / m:.1f}x" if m > 0 else "-" for u, m in zip(unboosted, medians, strict=True)]
        tally = healthy[level]
        rate = tally.evaluations / tally.seconds
        rows.append(
            [
                b.name(level),
                *cells,
                " / ".join(speed),
                f"{rate:.3f} ({rate / base_rate - 1:+.1%})",
                f"{tally.boosted_s / tally.seconds:.2%}",
                str(tally.pages),
            ]
        )
    header = [
        f"{b.requests:g} requests/s, {b.sample_rate:g} sampled, boost to {b.boost_rate:g}",
        f"x1.5: min to page, median (worst of {trials})",
        "x2: min to page",
        "speed-up x1.5 / x2",
        f"healthy, {weeks:g} service-weeks each: evaluations/s (cost)",
        "time boosted",
        "false pages",
    ]
    return bench_docs.table(header, rows)


def boost_validity_table(
    verdicts: Verdicts, b: BoostSettings, weeks: float, seed: int, budget: str, jobs: int
) -> str:
    """False pages with and without a boost at a short budget (hundreds of budget periods,
    so that the rates can be compared) on healthy streams."""
    from monitor.config import parse_duration

    p0 = verdicts.defect_rate(verdicts.share)
    tallies = healthy_tallies(p0, b, weeks, _seed(seed, "validity"), budget, jobs)
    budget_s = parse_duration(budget)
    rows = []
    for level in b.arms():
        tally = tallies[level]
        rate = tally.evaluations / tally.seconds
        rows.append(
            [
                b.name(level),
                tally.per_budget(budget_s),
                f"{tally.boosted_s / tally.seconds:.1%}",
                f"{rate:.3f}",
            ]
        )
    header = [
        f"one false page per {budget}, {weeks:g} service-weeks each ({weeks * 168:g} budgets)",
        "healthy: pages (per budget [95 %])",
        "time boosted",
        "evaluations/s",
    ]
    return bench_docs.table(header, rows)


# -- 4. compressed windows ---------------------------------------------------------------


class _Clock(list[float]):
    def __init__(self) -> None:
        super().__init__([1_000_000.0])

    def __call__(self) -> float:
        return self[0]


def compressed(trials: int, seed: int) -> str:
    """The compressed-window scenario, seconds to page over `trials` runs."""
    from monitor.component import Evaluated
    from monitor.records import RagRecord
    from monitor.results import EvalResult

    rows = []
    for test in ("sequential", "window"):
        times, early = [], 0
        for t in range(trials):
            now = _Clock()
            rule = {
                "name": "r",
                "evaluator": EVALUATOR,
                "baseline": {"window": "3m"},
                "window": "30s",
                "min_increase": 0.05,
                "test": test,
                "false_page_every": "1h",
            }
            alerts = engine([rule], now)
            rng = random.Random(seed + t)
            record = RagRecord(request_id="r", service="svc", response="x")
            fail = {EVALUATOR: EvalResult(name=EVALUATOR, score=0.0, normalized=0.0, passed=False)}
            ok = {EVALUATOR: EvalResult(name=EVALUATOR, score=1.0, normalized=1.0, passed=True)}
            # The baseline fills in its first 3m 30s; ten healthy minutes follow (the test).
            start, tick, paged = now[0] + 810, now[0] + INTERVAL_S, math.inf
            while now[0] < start + 600 and math.isinf(paged):
                now[0] += rng.expovariate(8.0)
                while now[0] >= tick:
                    saved, now[0] = now[0], tick
                    alerts.evaluate()
                    now[0], tick = saved, tick + INTERVAL_S
                p = 0.35 if now[0] < start else 0.46
                alerts.emit([Evaluated(record, fail if rng.random() < p else ok)])
                if alerts.evaluation_due:
                    alerts.evaluate()
                if alerts.firing():
                    if now[0] < start:
                        early += 1
                        break
                    paged = now[0] - start
            times.append(paged)
        ordered = sorted(times)
        rows.append(
            [
                test,
                _seconds(statistics.median(ordered)),
                _seconds(ordered[int(0.9 * len(ordered))]),
                f"{sum(t <= 90 for t in times) / len(times):.0%}",
                str(early),
            ]
        )
    rows.append(window_as_before(trials, seed))
    header = [
        "test",
        "s to page, median",
        "90th percentile",
        "paged within 90 s",
        "paged before the rise",
    ]
    return bench_docs.table(header, rows)


def _seconds(value: float) -> str:
    return "not paged" if math.isinf(value) else f"{value:.0f}"


def window_as_before(trials: int, seed: int) -> list[str]:
    """The compressed scenario's row for the window test as users configured it before the
    budget in time: `confidence: 0.999` per look every 15 s, and risen slices entering the
    baseline 30 s after they arrived (no hold-out). A whole risen window is barely past the
    threshold, and the baseline learns the rise meanwhile: some runs page quickly, some
    never, so one run per release tells little."""
    z_needed = NormalDist().inv_cdf(0.999)
    times, early = [], 0
    for t in range(trials):
        rng = random.Random(seed + t)
        counts = [[0, 0] for _ in range(1200)]  # per second: verdicts, defects
        clock, start = 0.0, 600
        while clock < len(counts):
            counts[int(clock)][0] += 1
            counts[int(clock)][1] += rng.random() < (0.35 if clock < start else 0.46)
            clock += rng.expovariate(8.0)
        paged = math.inf
        look = rng.uniform(240, 240 + INTERVAL_S)
        while look < len(counts) and math.isinf(paged):
            now = int(look)
            n, d = map(sum, zip(*counts[now - 30 : now], strict=True))
            nb, db = map(sum, zip(*counts[now - 210 : now - 30], strict=True))
            pooled = (d + db) / (n + nb)
            se = math.sqrt(pooled * (1 - pooled) * (1 / n + 1 / nb)) if n and nb else 0.0
            increase = d / n - db / nb if n and nb else 0.0
            if se > 0 and increase >= 0.05 and increase / se >= z_needed:
                if look < start:
                    early += 1
                    break
                paged = look - start
            look += INTERVAL_S
        times.append(paged)
    ordered = sorted(times)
    return [
        "window test as before (confidence 0.999 per look, the rise learned by the baseline)",
        _seconds(statistics.median(ordered)),
        _seconds(ordered[int(0.9 * len(ordered))]),
        f"{sum(t <= 90 for t in times) / len(times):.0%}",
        str(early),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("data", nargs="+", type=Path)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.2, 1.0, 10.0, 100.0])
    parser.add_argument("--trials", type=int, default=25, help="independent runs per rise")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--requests", type=float, default=100.0, help="boosts: requests/s")
    parser.add_argument("--sample-rate", type=float, default=0.01, help="boosts: base rate")
    parser.add_argument("--boost-rate", type=float, default=0.2)
    parser.add_argument(
        "--boost-p", type=float, nargs="+", default=[0.01, 0.05, 0.2], help="trigger levels"
    )
    parser.add_argument(
        "--boost-weeks", type=float, default=4, help="boosts: healthy service-weeks per arm"
    )
    parser.add_argument(
        "--validity-budget",
        default="1h",
        help="boosts: the short budget false pages are compared at",
    )
    parser.add_argument(
        "--validity-weeks", type=float, default=6, help="boosts: service-weeks per arm"
    )
    parser.add_argument("--jobs", type=int, default=2, help="processes")
    parser.add_argument("--only", choices=["pages", "boost", "validity", "compressed"], nargs="*")
    parser.add_argument(
        "--compressed-trials", type=int, help="runs of the compressed windows (4 x --trials)"
    )
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(
        parser,
        argv,
        rates=[10.0],
        trials=1,
        boost_p=[0.05],
        boost_weeks=0.02,
        validity_weeks=0.02,
        jobs=1,
        compressed_trials=1,
    )
    _quiet()
    from monitor.config import FALSE_PAGE_EVERY

    parts = set(args.only or ["pages", "boost", "validity", "compressed"])
    boosts = BoostSettings(args.requests, args.sample_rate, args.boost_rate, tuple(args.boost_p))
    out: list[str] = []

    def emit(text: str) -> None:
        print(text, flush=True)
        out.append(text)

    for name, v in load(args.data).items():
        seed = _seed(args.seed, name)
        f0 = sum(v.faithful) / len(v.faithful)
        f1 = sum(v.hallucinated) / len(v.hallucinated)
        emit(
            f"\n**{name}**: hallucinated share {v.share:.3f}; the evaluator fails {f0:.1%} of "
            f"faithful and {f1:.1%} of hallucinated answers (defect rate "
            f"{v.defect_rate(v.share):.3f}); budget one false page per {FALSE_PAGE_EVERY}\n"
        )
        if "pages" in parts:
            emit(pages_tables(v, args.rates, args.trials, seed, FALSE_PAGE_EVERY, args.jobs))
        if "boost" in parts:
            emit("\n" + boost_table(v, boosts, args.trials, args.boost_weeks, seed, args.jobs))
        if "validity" in parts:
            emit(
                "\n"
                + boost_validity_table(
                    v, boosts, args.validity_weeks, seed, args.validity_budget, args.jobs
                )
            )
    if "compressed" in parts:
        emit("\nCompressed windows, one false page an hour, 0.35 -> 0.46 at 8 verdicts/s:\n")
        emit(compressed(args.compressed_trials or args.trials * 4, args.seed))
    if args.write_docs:
        bench_docs.write_block("docs/quality.md", "alert-regression", "\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
