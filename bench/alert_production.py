"""The default regression rule on production-shaped streams, through `rag-monitor backtest`.

    python bench/alert_production.py [--days 365] [--fast-days 150] [--trials 8]
        [--warmup-days 28] [--evidence-days 90] [--jobs 2] [--seed 1]
        [--only healthy|steps|changes|changeovers|evidence-healthy|evidence-steps|operations]
        [--stream TEXT]
        [--write-docs]
        [--topic-wander-hours 0]

Every stream comes from `harness/production_streams.py` (conversations, a daily cycle of the
defect rate and of traffic, changes) and goes through `monitor.alerts.backtest.Backtest`,
the code behind `rag-monitor backtest`, with the default rule (`baseline: {}`: window 30m,
baseline 24h with a weekly season, `min_increase` 0.03, one false page per 90 days) and
evaluations every 60 s (the sequential test's bound does not depend on the interval).

1. **Healthy streams**: defect rate 0.20 with a daily cycle of amplitude `min_increase`
   and traffic ten times higher by day than by night, in conversations of intraclass
   correlation 0.05, 0.17 and 0.3, with their ids and without (rows of 15 verdicts on
   average, 15 s at 1 a second), and with ids where a few conversations fail on every turn
   (not the beta distribution the test's prediction assumes), at 1 verdict a second
   (`--days` of service time each) and
   at 10 (`--fast-days`); and
   independent verdicts at a flat rate. False pages per budget period with a 95 % upper
   bound (Poisson): the promise is at most one, and the bound at most two.
2. **A x1.5 step** (0.20 to 0.30) after `--warmup-days` of history, at a random hour, `--trials`
   services: hours to page against the **information limit at the stream's effective
   sample size**: the time until the verdicts after the step carry `ln(r T)` nats, at
   `r(t) KL(t) / D` a second (`r` verdicts a second on average, `r(t)` at that hour, `T`
   the budget, `KL(t)` the divergence per verdict of the risen rate from that hour's
   healthy one, `D` the conversations' design effect), and each step's page over its own
   limit. Also a x2 step on independent verdicts (the streams of earlier releases).
3. **Changes that are not regressions**: a return to 0.20 after twelve hours at 0.10 (a
   good spell), an evaluator revision whose verdicts run at 0.35, and 200 services past the
   label cap of 50 (folded into `other`): pages (the promise: none).
4. **Evaluator changeovers**: a revision whose verdicts run at 0.30 where the old read 0.20,
   at once or rolled out 10 -> 50 -> 100 % over six hours, then a x1.5 or x2 step three
   hours after (and one three hours into the rollout, while both revisions score half the
   turns each; after a change at once, also a quarter hour after it; each with and without
   the previous revision scoring a fifth of the turns again, `evaluators[].previous`, and
   x1.5 with it scoring every turn again):
   hours to page against the information limit of the new revision's rate, and pages
   between the change and the step (the promise: none).
5. **What apps send besides one conversation per id** (`--evidence-days` each, their own
   docs blocks): a client bursting 2,000 near-identical requests in ten minutes once a day
   (no ids), verdicts correlated by topic (20 topics, a mix that follows the day and
   wanders by the hour; `--topic-wander-hours`: a wander that lasts that many hours) at 10
   and 1 a second, and conversation ids that are none (one constant id, the pod, a
   recycled pool of 1,000, the user's id): false pages; and x1.5 / x2 steps against the
   information limit on those with ids at 1 a second.
6. **Changes of what is scored** (`--evidence-days` each, their own docs block): a judge
   outage a day (30 % of evaluations err for two hours, failing records' twice as often),
   the sampling rate falling from 1.0 to 0.1, and a judge change (+0.05) read from the fleet
   as counts by revision, rolled out over six hours: false pages; and x1.5 / x2 steps a day
   after the sampling rate fell, against the limit of the verdicts still scored.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.stats import chi2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import bench_docs, bench_smoke
from harness.production_streams import (
    DAY_S,
    MAX_TURNS,
    MIN_TURNS,
    START,
    Change,
    StreamSpec,
    defect_rate,
    stream,
    topic_design_effect,
    topic_mix,
    traffic,
)
from monitor.alerts.backtest import Backtest, Event
from monitor.config import Config

BUDGET_DAYS = 90.0
INTERVAL_S = 60.0
MIN_INCREASE = 0.03
RULE = "regression"
# Service time replayed after a step: a step not paged by then reads "not paged".
STEP_DAYS = 1.5
CHANGE_AT_DAY = 8.0
AFTER_CHANGE_DAYS = 3.0
CROWD_DAYS = 7.0
CROWD_SERVICES = 200
# How many hours the topic streams' wander lasts (0: independent each hour).
TOPIC_WANDER_HOURS = 0.0


def config(*, max_services: int = 50) -> Config:
    return Config.model_validate(
        {
            "pipeline": {"max_services": max_services},
            "alerts": {
                "evaluation_interval_s": INTERVAL_S,
                "rules": [{"name": RULE, "evaluator": "local_groundedness", "baseline": {}}],
            },
        }
    )


def replay(spec: StreamSpec, **kwargs: int) -> list[Event]:
    return list(Backtest(config(**kwargs)).run(stream(spec)))


def page_times(spec: StreamSpec, max_services: int = 50) -> list[tuple[float, str]]:
    """(time, service) of every page on one stream: what a worker process sends back."""
    return [(e.time, e.alert.service) for e in pages(replay(spec, max_services=max_services))]


def pages(events: Iterable[Event], after: float = 0.0) -> list[Event]:
    return [e for e in events if e.status == "firing" and e.time >= after]


def upper_bound(count: int, exposure: float) -> float:
    """The 95 % upper bound of a Poisson rate seen `count` times over `exposure`."""
    return float(chi2.ppf(0.95, 2 * (count + 1)) / 2 / exposure)


def healthy(pool: Executor, days: float, fast_days: float, seed: int) -> str:
    runs = []
    shapes = [(icc, ids, "beta") for icc in (0.05, 0.17, 0.3) for ids in (True, False)]
    shapes += [(icc, True, "failing") for icc in (0.17, 0.3)]
    for rate, span in ((1.0, days), (10.0, fast_days)):
        for icc, ids, mixing in [*shapes, (0.0, False, "beta")]:
            seasonal = icc > 0
            spec = StreamSpec(
                rate=rate,
                days=span,
                icc=icc,
                ids=ids,
                mixing=mixing,
                cycle=MIN_INCREASE if seasonal else 0.0,
                traffic_ratio=10.0 if seasonal else 1.0,
                seed=seed,
            )
            runs.append((spec, pool.submit(page_times, spec)))
    rows = []
    for spec, future in runs:
        counts = _false_pages(spec, future)
        rows.append([f"{spec.rate:g}", _shape(spec), *counts])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    return bench_docs.table(
        [
            "verdicts/s",
            "stream",
            "days",
            "false pages",
            "per budget period",
            "95 % upper bound",
        ],
        rows,
    )


def information_limit_h(
    spec: StreamSpec,
    start_day: float,
    factor: float,
    before: tuple[Change, ...] = (),
    sampled: float = 1.0,
) -> float:
    """Hours after `start_day` until the verdicts that follow carry `ln(r T)` nats at the
    stream's effective sample size: the evidence a test that knew the step's size and hour
    would need. It integrates the traffic and the seasonal rate that follow the step, so a
    step at night, when a tenth of the day's verdicts arrive, is given the time its few
    verdicts need. `before`: the changes the healthy rate has by then (an evaluator's);
    `sampled`: the share of turns scored by then."""
    step_s = 10.0
    t = start_day * DAY_S + np.arange(0.0, STEP_DAYS * DAY_S, step_s)
    p0, _ = defect_rate(replace(spec, changes=before), t)
    p1 = np.clip(p0 * factor, 0.001, 0.999)
    design = spec.design_effect if sampled == 1.0 else sampled_design_effect(spec, sampled)
    if spec.topics:
        p0 = topic_mix(spec).rate(t)
        p1 = np.clip(p0 * factor, 0.001, 0.999)
        design = topic_design_effect(spec)
    kl = p1 * np.log(p1 / p0) + (1 - p1) * np.log((1 - p1) / (1 - p0))
    nats = np.cumsum(spec.rate * sampled * traffic(spec, t) * kl / design * step_s)
    reached = np.flatnonzero(nats >= math.log(spec.rate * BUDGET_DAYS * DAY_S))
    return float((reached[0] + 1) * step_s / 3600) if reached.size else math.inf


def steps(pool: Executor, trials: int, warmup: float, seed: int) -> str:
    cases = [
        (1.0, 0.17, True, 1.5),
        (1.0, 0.17, False, 1.5),
        (10.0, 0.17, True, 1.5),
        (10.0, 0.17, False, 1.5),
        (1.0, 0.0, False, 2.0),
        (10.0, 0.0, False, 2.0),
    ]
    runs = []
    for rate, icc, ids, factor in cases:
        spec = StreamSpec(
            rate=rate,
            days=0.0,
            icc=icc,
            ids=ids,
            cycle=MIN_INCREASE if icc else 0.0,
            traffic_ratio=10.0 if icc else 1.0,
        )
        runs.append((spec, factor, _step_trials(pool, spec, factor, trials, warmup, seed)))
    rows = []
    for spec, factor, trial_runs in runs:
        waits, limits, ratios = _step_outcome(trial_runs)
        rows.append(
            [
                f"{spec.rate:g}",
                _shape(spec),
                f"x{factor:g}",
                _hours(_median(sorted(waits))),
                _hours(max(waits)),
                f"{_median(sorted(limits)):.2f}",
                _times(_median(ratios)),
                _times(ratios[-1]),
            ]
        )
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    return bench_docs.table(
        [
            "verdicts/s",
            "stream",
            "rise",
            f"hours to page, median of {trials}",
            "worst (h)",
            "information limit (h), median",
            "page / limit, median",
            "page / limit, worst",
        ],
        rows,
    )


def changes(pool: Executor, trials: int, seed: int) -> str:
    base = StreamSpec(
        rate=1.0,
        days=CHANGE_AT_DAY + AFTER_CHANGE_DAYS,
        icc=0.17,
        cycle=MIN_INCREASE,
        traffic_ratio=10.0,
        seed=seed,
    )
    cases = {
        "a return to 0.20 after 12 h at 0.10": (Change("spell", CHANGE_AT_DAY, 0.10, 0.5),),
        "evaluator revision, its verdicts at 0.35": (Change("revision", CHANGE_AT_DAY, 0.35),),
    }
    runs = {
        name: [
            pool.submit(page_times, replace(base, changes=change, seed=seed + trial))
            for trial in range(trials)
        ]
        for name, change in cases.items()
    }
    # The folding is what this row tests, not conversations: id-less rows keep it cheap.
    crowd = replace(
        base,
        rate=0.2,
        services=CROWD_SERVICES,
        days=CROWD_DAYS,
        ids=False,
        service_prefix="crowd",
    )
    crowded = pool.submit(page_times, crowd, 50)
    rows = []
    after = START + CHANGE_AT_DAY * DAY_S
    for name, futures in runs.items():
        found = sum(t >= after for future in futures for t, _ in future.result())
        rows.append([name, f"{trials} x {AFTER_CHANGE_DAYS:g} days", str(found)])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    crowd_pages = crowded.result()
    folded = [service for _, service in crowd_pages if service == "other"]
    rows.append(
        [
            f"{CROWD_SERVICES} healthy services past a cap of 50 (`other` folded)",
            f"{CROWD_SERVICES} x {CROWD_DAYS:g} days",
            f"{len(crowd_pages)} ({len(folded)} for other)",
        ]
    )
    print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    return bench_docs.table(["stream", "service time", "pages"], rows)


def changeovers(pool: Executor, trials: int, warmup: float, seed: int) -> str:
    """An evaluator change (a new revision whose verdicts run at 0.30 where the old read
    0.20), at once or rolled out 10 -> 50 -> 100 % over six hours, at a different hour each
    trial, then a x1.5 or x2 step three hours after it is complete (or sooner): hours to
    page against the information limit (of the new revision's rate), and pages before the
    step."""
    rollout_days = 0.25
    revision, rollout = Change("revision", 0.0, 0.30), Change("rollout", 0.0, 0.30, rollout_days)
    again = ", the previous revision scoring 0.2 of the turns again"
    every = ", the previous revision scoring every turn again"
    # Each case: the change, the step's factor and hours after the change started (None:
    # three hours after it is complete), and the share of turns its previous revision
    # scores too.
    cases: dict[str, tuple[Change, float, float | None, float]] = {
        "evaluator revision, x1.5 three hours later": (revision, 1.5, None, 0.0),
        f"evaluator revision, x1.5 three hours later{again}": (revision, 1.5, None, 0.2),
        f"evaluator revision, x1.5 three hours later{every}": (revision, 1.5, None, 1.0),
        "evaluator revision, x2 three hours later": (revision, 2.0, None, 0.0),
        f"evaluator revision, x2 three hours later{again}": (revision, 2.0, None, 0.2),
        "evaluator revision, x2 a quarter hour later": (revision, 2.0, 0.25, 0.0),
        f"evaluator revision, x2 a quarter hour later{again}": (revision, 2.0, 0.25, 0.2),
        "revision rolled out over 6 h, x2 three hours after": (rollout, 2.0, None, 0.0),
        "revision rolled out over 6 h, x2 three hours into it (half on each)": (
            rollout,
            2.0,
            3.0,
            0.0,
        ),
    }
    base = StreamSpec(rate=1.0, days=0.0, icc=0.17, cycle=MIN_INCREASE, traffic_ratio=10.0)
    runs = []
    for name, (template, factor, into_h, previous_share) in cases.items():
        trial_runs = []
        for trial in range(trials):
            at = warmup + (trial * 24 / trials + 0.5) / 24
            change = replace(template, at_day=at)
            step = at + (change.days + 3 / 24 if into_h is None else into_h / 24)
            spec = replace(
                base,
                days=step + STEP_DAYS,
                changes=(change, Change("step", step, factor)),
                seed=seed + trial,
                previous_share=previous_share,
            )
            limit = information_limit_h(spec, step, factor, before=(change,))
            trial_runs.append(
                (START + at * DAY_S, START + step * DAY_S, limit, pool.submit(page_times, spec))
            )
        runs.append((name, trial_runs))
    rows = []
    for name, trial_runs in runs:
        waits, ratios, early = [], [], 0
        for changed, start, limit, future in trial_runs:
            times = [t for t, _ in future.result()]
            early += sum(changed <= t < start for t in times)
            after = [t for t in times if t >= start]
            waits.append((after[0] - start) / 3600 if after else math.inf)
            ratios.append(waits[-1] / limit)
        rows.append(
            [
                name,
                _hours(_median(sorted(waits))),
                _times(_median(sorted(ratios))),
                _times(max(ratios)),
                str(early),
            ]
        )
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    return bench_docs.table(
        [
            "stream (1 verdict/s, ICC 0.17 with ids, daily cycle, traffic x10)",
            f"hours to page, median of {trials}",
            "page / limit, median",
            "page / limit, worst",
            "pages between the change and the step",
        ],
        rows,
    )


# What apps send that is not one conversation per id, and traffic that is not independent
# requests (`evidence`): each with a daily cycle of `min_increase` and traffic x10 by day.
WRONG_IDS = {
    "constant": "one constant conversation id for all traffic",
    "pods": "`session.id` = the pod that served the request (8 values)",
    "pool": "ids from a recycled pool of 1,000",
    "user": "id = user id (sessions over days)",
}


def seasonal(days: float, seed: int) -> StreamSpec:
    """1 verdict a second in conversations of ICC 0.17, with a daily cycle of
    `min_increase` and traffic ten times higher by day: the base of the `evidence` and
    `operations` rows."""
    return StreamSpec(
        rate=1.0, days=days, icc=0.17, cycle=MIN_INCREASE, traffic_ratio=10.0, seed=seed
    )


def evidence_specs(days: float, seed: int) -> list[tuple[str, StreamSpec]]:
    """The healthy streams of the `evidence` rows: (name, spec)."""
    base = seasonal(days, seed)
    out = [
        (
            "a client bursting 2,000 near-identical requests in 10 min (identical verdicts) "
            "once a day, no conversation id",
            replace(base, ids=False, bursts_per_day=1.0),
        ),
        (
            "the same bursts, each request with a fresh session id of its own, beside "
            "conversations with ids",
            replace(base, bursts_per_day=1.0, burst_ids=True),
        ),
        (
            "verdicts correlated by topic (20 topics, defect rates 0.05-0.6, mix following "
            f"the day{_wander()}), 10/s",
            replace(
                base,
                rate=10.0,
                icc=0.0,
                cycle=0.0,
                topics=20,
                topic_wander_hours=TOPIC_WANDER_HOURS,
            ),
        ),
        (
            "the same at 1/s",
            replace(base, icc=0.0, cycle=0.0, topics=20, topic_wander_hours=TOPIC_WANDER_HOURS),
        ),
    ]
    out += [(name, replace(base, id_kind=kind)) for kind, name in WRONG_IDS.items()]
    return out


def _wander() -> str:
    """What a topic row's name says of a wander that lasts hours."""
    return f", a wander lasting {TOPIC_WANDER_HOURS:g} h" if TOPIC_WANDER_HOURS else ""


def evidence_healthy(pool: Executor, days: float, seed: int, match: str = "") -> str:
    """False pages on the `evidence` streams (those whose name holds `match`)."""
    healthy_runs = [
        (name, spec, pool.submit(page_times, spec))
        for name, spec in evidence_specs(days, seed)
        if match in name
    ]
    rows = []
    for name, spec, future in healthy_runs:
        rows.append([name, f"{spec.rate:g}", *_false_pages(spec, future)])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    return bench_docs.table(
        ["stream", "verdicts/s", "days", "false pages", "per budget period", "95 % upper bound"],
        rows,
    )


def operations_specs(days: float, seed: int) -> list[tuple[str, StreamSpec]]:
    """The healthy streams of the `operations` rows, where what is scored changes, not the
    service: (name, spec). Changes come at half the stream."""
    base = seasonal(days, seed)
    return [
        (
            "a judge outage once a day: 30 % of evaluations err for 2 h, failing records' twice "
            "as often (the verdicts left lean to pass)",
            replace(base, services=4, outages_per_day=1.0),
        ),
        (
            "sampling rate 1.0 -> 0.1 at half the stream",
            replace(base, services=4, changes=(Change("sampling", days / 2, 0.1),)),
        ),
        (
            "a judge change, its verdicts +0.05, read from the fleet (counts every 15 s by "
            "revision), rolled out over 6 h at half the stream",
            replace(
                base, ids=False, services=8, changes=(Change("rollout", days / 2, 0.25, 0.25),)
            ),
        ),
    ]


def sampled_design_effect(spec: StreamSpec, share: float) -> float:
    """The design effect of `spec`'s conversations when each turn is scored with chance
    `share`: a conversation of `s` turns gives Binomial(s, share) verdicts, size-weighted
    as `StreamSpec.design_effect` weighs them."""
    sizes = np.arange(MIN_TURNS, MAX_TURNS + 1)
    mean = share * np.mean(sizes)
    square = share * share * np.mean(sizes**2) + share * (1 - share) * np.mean(sizes)
    return float(1 + (square / mean - 1) * spec.icc)


def operations(pool: Executor, days: float, trials: int, warmup: float, seed: int) -> str:
    """False pages where what is scored changes (judge outages, a lower sampling rate, a
    judge change read from the fleet); and x1.5 / x2 steps a day after the sampling rate
    fell to a tenth, against the information limit of the verdicts still scored."""
    runs = [
        (name, spec, pool.submit(page_times, spec)) for name, spec in operations_specs(days, seed)
    ]
    share = 0.1
    step_runs = []
    for factor in (1.5, 2.0):
        trial_runs = []
        for trial in range(trials):
            at = warmup + 1 + (trial * 24 / trials + 0.5) / 24
            sampling = Change("sampling", warmup, share)
            spec = replace(
                seasonal(at + STEP_DAYS, seed + trial),
                changes=(sampling, Change("step", at, factor)),
            )
            limit = information_limit_h(spec, at, factor, sampled=share)
            trial_runs.append((START + at * DAY_S, limit, pool.submit(page_times, spec)))
        step_runs.append((factor, trial_runs))
    rows = []
    for name, spec, future in runs:
        rows.append([name, f"{spec.services} x {spec.days:g}", *_false_pages(spec, future)[1:]])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    name = "ICC 0.17 with ids, daily cycle, traffic x10, sampling rate 1.0 -> 0.1 a day before"
    healthy_table = bench_docs.table(
        ["stream", "service-days", "false pages", "per budget period", "95 % upper bound"],
        rows,
    )
    steps_table = _steps_table(
        "stream (1 verdict/s before sampling)",
        trials,
        [(name, factor, trial_runs) for factor, trial_runs in step_runs],
    )
    return f"{healthy_table}\n\n{steps_table}"


def evidence_steps(pool: Executor, trials: int, warmup: float, seed: int) -> str:
    """x1.5 / x2 steps on the `evidence` streams with ids at 1 verdict a second (at 10 a
    step costs ten times the replay)."""
    step_runs = []
    for name, spec in evidence_specs(0.0, seed):
        if not spec.ids or spec.bursts_per_day or spec.rate > 1:
            continue
        for factor in (1.5, 2.0):
            step_runs.append((name, factor, _step_trials(pool, spec, factor, trials, warmup, seed)))
    return _steps_table("stream", trials, step_runs)


StepRun = tuple[float, float, "Future[list[tuple[float, str]]]"]


def _steps_table(
    stream: str, trials: int, step_runs: list[tuple[str, float, list[StepRun]]]
) -> str:
    """The table of steps by factor: (row name, factor, its trials) each, each row printed as
    it is done."""
    rows = []
    for name, factor, trial_runs in step_runs:
        waits, limits, ratios = _step_outcome(trial_runs)
        rows.append(
            [
                name,
                f"x{factor:g}",
                _hours(_median(sorted(waits))),
                f"{_median(sorted(limits)):.2f}",
                _times(_median(ratios)),
                _times(ratios[-1]),
            ]
        )
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    return bench_docs.table(
        [
            stream,
            "rise",
            f"hours to page, median of {trials}",
            "information limit (h), median",
            "page / limit, median",
            "page / limit, worst",
        ],
        rows,
    )


def _false_pages(spec: StreamSpec, future: Future[list[tuple[float, str]]]) -> list[str]:
    """A healthy stream's days, pages, pages per budget period and its 95 % upper bound."""
    found = len(future.result())
    budgets = spec.services * spec.days / BUDGET_DAYS
    return [
        f"{spec.days:g}",
        str(found),
        f"{found / budgets:.2f}",
        f"{upper_bound(found, budgets):.2f}",
    ]


def _step_trials(
    pool: Executor, spec: StreamSpec, factor: float, trials: int, warmup: float, seed: int
) -> list[StepRun]:
    """`trials` runs of `spec` with a step by `factor` after `warmup` days, at a different
    hour of the day each: (when it stepped, its information limit, its pages)."""
    out = []
    for trial in range(trials):
        at = warmup + (trial * 24 / trials + 0.5) / 24
        stepped = replace(
            spec, days=at + STEP_DAYS, changes=(Change("step", at, factor),), seed=seed + trial
        )
        limit = information_limit_h(stepped, at, factor)
        out.append((START + at * DAY_S, limit, pool.submit(page_times, stepped)))
    return out


def _step_outcome(trial_runs: list[StepRun]) -> tuple[list[float], list[float], list[float]]:
    """Hours from each step to its first page (inf: none), each step's information limit,
    and their ratios, sorted."""
    waits, limits = [], []
    for start, limit, future in trial_runs:
        after = [t for t, _ in future.result() if t >= start]
        waits.append((after[0] - start) / 3600 if after else math.inf)
        limits.append(limit)
    return waits, limits, sorted(w / lim for w, lim in zip(waits, limits, strict=True))


def _shape(spec: StreamSpec) -> str:
    """A stream's row name: conversations come with a daily cycle, independent verdicts flat."""
    if spec.icc > 0:
        ids = "with" if spec.ids else "without"
        failing = ", a few failing every turn" if spec.mixing == "failing" else ""
        return f"ICC {spec.icc:g}{failing}, {ids} ids, daily cycle, traffic x10"
    return "independent verdicts, flat rate"


def _median(sorted_values: list[float]) -> float:
    n = len(sorted_values)
    return (sorted_values[(n - 1) // 2] + sorted_values[n // 2]) / 2


def _times(ratio: float) -> str:
    return f"{ratio:.2f}x" if math.isfinite(ratio) else "not paged"


def _hours(h: float) -> str:
    return f"{h:.2f}" if math.isfinite(h) else "not paged"


def main(argv: list[str] | None = None) -> int:
    global STEP_DAYS, CHANGE_AT_DAY, AFTER_CHANGE_DAYS, CROWD_SERVICES, CROWD_DAYS
    global TOPIC_WANDER_HOURS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=float, default=365.0, help="healthy days at 1/s")
    parser.add_argument("--fast-days", type=float, default=150.0, help="healthy days at 10/s")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--warmup-days", type=float, default=28.0, help="history before a step")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--only",
        choices=(
            "healthy",
            "steps",
            "changes",
            "changeovers",
            "evidence-healthy",
            "evidence-steps",
            "operations",
        ),
    )
    parser.add_argument(
        "--evidence-days", type=float, default=90.0, help="healthy days of each evidence row"
    )
    parser.add_argument(
        "--stream",
        default="",
        help="evidence-healthy: only the streams whose name holds this text (more days or "
        "seeds of one row; printed, never written to the docs)",
    )
    bench_docs.add_flag(parser)
    parser.add_argument(
        "--step-days", type=float, default=STEP_DAYS, help="service time replayed after a step"
    )
    parser.add_argument(
        "--change-day", type=float, default=CHANGE_AT_DAY, help="the day of changes (part 3)"
    )
    parser.add_argument(
        "--after-change-days", type=float, default=AFTER_CHANGE_DAYS, help="days after it"
    )
    parser.add_argument("--crowd-services", type=int, default=CROWD_SERVICES)
    parser.add_argument("--crowd-days", type=float, default=CROWD_DAYS)
    parser.add_argument(
        "--topic-wander-hours",
        type=float,
        default=TOPIC_WANDER_HOURS,
        help="how many hours the topic streams' wander lasts (0: independent each hour)",
    )
    args = bench_smoke.parse_args(
        parser,
        argv,
        days=0.01,
        fast_days=0.002,
        trials=1,
        warmup_days=0.02,
        evidence_days=0.01,
        step_days=0.01,
        change_day=0.02,
        after_change_days=0.01,
        crowd_services=4,
        crowd_days=0.01,
        jobs=1,
    )
    # The rows' fixed sizes, as given (smaller in a smoke run).
    STEP_DAYS, CHANGE_AT_DAY, AFTER_CHANGE_DAYS = (
        args.step_days,
        args.change_day,
        args.after_change_days,
    )
    if args.stream and args.write_docs:
        parser.error("--stream prints a subset of the evidence-healthy rows; drop --write-docs")
    CROWD_SERVICES, CROWD_DAYS = args.crowd_services, args.crowd_days
    TOPIC_WANDER_HOURS = args.topic_wander_hours
    parts = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        if args.only in (None, "healthy"):
            parts.append(healthy(pool, args.days, args.fast_days, args.seed))
        if args.only in (None, "steps"):
            parts.append(steps(pool, args.trials, args.warmup_days, args.seed))
        if args.only in (None, "changes"):
            parts.append(changes(pool, args.trials, args.seed))
        # Changeovers, and streams of what apps send that the rows above do not
        # (docs/quality.md, "Alert evidence"): their own blocks.
        evidence = {}
        if args.only in (None, "changeovers"):
            evidence["alert-changeovers"] = changeovers(
                pool, args.trials, args.warmup_days, args.seed
            )
        if args.only in (None, "evidence-healthy"):
            evidence["alert-evidence-healthy"] = evidence_healthy(
                pool, args.evidence_days, args.seed, args.stream
            )
        if args.only in (None, "evidence-steps"):
            evidence["alert-evidence-steps"] = evidence_steps(
                pool, args.trials, args.warmup_days, args.seed
            )
        if args.only in (None, "operations"):
            evidence["alert-operations"] = operations(
                pool, args.evidence_days, args.trials, args.warmup_days, args.seed
            )
    out = "\n\n".join(parts)
    print("\n\n".join([out, *evidence.values()]))
    if args.write_docs and args.only is None:
        bench_docs.write_block("docs/quality.md", "alert-production", out)
    if args.write_docs:
        for block, table in evidence.items():
            bench_docs.write_block("docs/quality.md", block, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
