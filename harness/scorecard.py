"""The regression rule's scorecard on simulated time (`bench/scorecard.py` prints it,
`tests/alerts/test_scorecard.py` recomputes cells of it): its rows, cells and trials."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness import bench_docs
from harness.production_streams import DAY_S, EVALUATOR, START, Change, StreamSpec, stream
from harness.simulated_alerts import (
    DEFAULT_RULE,
    HOUR_S,
    independent,
    information_limit_s,
    replay,
    run_seed,
    shaped,
    summed,
    until,
    warmed,
)
from harness.simulated_changeover import Changeover, changeover_healthy, changeover_trial
from harness.simulated_sidecar_tests import CELLS as SIDECAR_TESTS
from harness.simulated_sidecar_tests import cell_trial as sidecar_test_trial
from harness.simulated_upgrade import Switch, switch_healthy, switch_trial

GOLDEN = Path(__file__).resolve().parent.parent / "bench" / "scorecard.json"
BUDGET_S = 90 * DAY_S
HEALTHY_S = 1800.0
# A rule compressed to minutes (`harness/simulated_sidecar_tests.py` runs it too): a fresh
# start in minutes.
COMPRESSED_RULE: dict[str, Any] = {
    "evaluator": EVALUATOR,
    "window": "30s",
    "baseline": {"window": "3m", "min_samples": 240},
    "false_page_every": "1h",
}
FRESH_RISE_S = 120.0
FRESH_MAX_S = 4 * HOUR_S
FRESH_STARTS = 20
# 2 a second: the slowest whose two minutes before the rise are a level the default rule
# can judge a x3 against (docs/quality.md).
FRESH_RATES = (1.0, 2.0, 10.0)
SLOW_MAX_S = DAY_S
# A young history's rows: the days of history (the scorecard's others have four weeks), and
# how many limits a run waits for its page (a x1.5 at the slowest rate: a day).
YOUNG_DAYS = (4, 14)
YOUNG_LIMITS = 6
# Above this a rise of 0.10 that did not page was learned into the level.
YOUNG_LEARNED = 0.12


# -- the rows -----------------------------------------------------------------------------


def plain_trial(p0: float, rate: float, factor: float, ids: bool, seed: int) -> dict[str, float]:
    """One run: its page's time after the rise over the limit (inf: none within six times
    it), and whether it paged before the rise."""
    limit = information_limit_s(p0, p0 * factor, rate, BUDGET_S)
    span = HEALTHY_S + 6 * limit
    base = shaped(StreamSpec(rate=rate, days=span / DAY_S, mean=p0, ids=ids))
    saved = warmed(base)
    spec = replace(base, seed=seed % 2**32)
    if ids:
        stepped = replace(spec, changes=(Change("step", HEALTHY_S / DAY_S, factor),))
        rows: Iterator[tuple[str, dict[str, Any]]] = until(stream(stepped), span)
    else:
        rows = independent(p0, rate, seed, HEALTHY_S, factor, span)
    run = replay(rows, saved)
    if not run.pages:
        return {"ratio": math.inf, "early": 0.0}
    at = run.pages[0][0] - START
    if at < HEALTHY_S:
        return {"ratio": math.nan, "early": 1.0}
    return {"ratio": (at - HEALTHY_S) / limit, "early": 0.0}


def slow_trial(seed: int) -> dict[str, float]:
    """0.10 -> 0.15 at 0.2/s: hours to page (inf: none in a day) over the limit, and the
    expectation at the page (or the expectation of the day's last judgment)."""
    p0, rate, factor = 0.10, 0.2, 1.5
    limit = information_limit_s(p0, p0 * factor, rate, BUDGET_S)
    run = replay(
        independent(p0, rate, seed, HEALTHY_S, factor, HEALTHY_S + SLOW_MAX_S),
        warmed(shaped(StreamSpec(rate=rate, days=1.0, mean=p0, ids=False))),
        stop_at_page=False,
    )
    if not run.pages:
        return {"ratio": math.inf, "expected": math.nan}
    at, annotations = run.pages[0]
    return {
        "ratio": (at - START - HEALTHY_S) / limit,
        "expected": float(annotations["baseline_defect_rate"]),
    }


def young_trial(days: int, rate: float, factor: float, seed: int) -> dict[str, float]:
    """0.10 rising by `factor` at `rate` after `days` of history, the run's own (each run
    warms up from its seed: a young history's dispersion is as much its own as its
    verdicts): page / limit (inf: none within `YOUNG_LIMITS` limits, or a day at the
    slowest), whether it paged before the rise, and the expectation at the page or at the
    run's end (a rise learned into the level reads above 0.10)."""
    p0 = 0.10
    limit = information_limit_s(p0, p0 * factor, rate, BUDGET_S)
    span = HEALTHY_S + max(YOUNG_LIMITS * limit, SLOW_MAX_S if factor < 2 else 0.0)
    spec = shaped(StreamSpec(rate=rate, days=span / DAY_S, mean=p0, ids=False))
    saved = warmed(replace(spec, seed=seed % 2**31), days)
    run = replay(independent(p0, rate, seed, HEALTHY_S, factor, span), saved)
    if not run.pages:
        return {"ratio": math.inf, "early": 0.0, "expected": round(run.expected, 4)}
    at, annotations = run.pages[0]
    expected = round(float(annotations["baseline_defect_rate"]), 4)
    if at - START < HEALTHY_S:
        return {"ratio": math.nan, "early": 1.0, "expected": expected}
    return {"ratio": (at - START - HEALTHY_S) / limit, "early": 0.0, "expected": expected}


def healthy_pages(name: str, days: float, seed: int) -> dict[str, float]:
    """False pages on `days` of one healthy stream (`HEALTHY_STREAMS`)."""
    span = days * DAY_S
    kind, arg = HEALTHY_STREAMS[name]
    if kind == "plain":
        p0, rate = arg
        spec = shaped(StreamSpec(rate=rate, days=days, mean=p0, ids=False))
        rows = summed(p0, rate, seed, span)
    else:
        spec = shaped(replace(arg, days=days))
        rows = stream(replace(spec, seed=seed % 2**32))
    run = replay(rows, warmed(spec), stop_at_page=False)
    return {"pages": float(len(run.pages)), "days": days}


def corner_trial(kind: str, seed: int) -> dict[str, float]:
    """x2 at 1/s on a stream whose ids are `kind`: page / limit (design effect counted)."""
    base = StreamSpec(rate=1.0, days=1.0, icc=0.17, mean=0.2, id_kind=kind)
    limit = information_limit_s(0.2, 0.4, 1.0, BUDGET_S) * base.design_effect
    span = HEALTHY_S + 6 * limit
    spec = shaped(replace(base, days=span / DAY_S))
    stepped = replace(spec, changes=(Change("step", HEALTHY_S / DAY_S, 2.0),), seed=seed % 2**32)
    run = replay(until(stream(stepped), span), warmed(spec))
    if not run.pages:
        return {"ratio": math.inf, "early": 0.0}
    at = run.pages[0][0] - START
    if at < HEALTHY_S:
        return {"ratio": math.nan, "early": 1.0}
    return {"ratio": (at - HEALTHY_S) / limit, "early": 0.0}


def fresh_trial(compressed: bool, rate: float, seed: int) -> dict[str, float]:
    """A rule with no history, 0.10 rising x3 from its 3rd minute: minutes from the rise to
    the page (inf: none within `FRESH_MAX_S`) and the expectation it states."""
    rule = COMPRESSED_RULE if compressed else DEFAULT_RULE
    run = replay(independent(0.10, rate, seed, FRESH_RISE_S, 3.0, FRESH_MAX_S), None, rule)
    if not run.pages:
        return {"minutes": math.inf, "expected": math.nan}
    at, annotations = run.pages[0]
    return {
        "minutes": (at - START - FRESH_RISE_S) / 60,
        "expected": float(annotations["baseline_defect_rate"]),
    }


def fresh_healthy(rate: float, seed: int) -> dict[str, float]:
    """`FRESH_STARTS` rules with no history on a healthy clustered stream (`FRESH_CLUSTERED`):
    their false pages within `FRESH_MAX_S` each."""
    spec = shaped(replace(FRESH_CLUSTERED, rate=rate, days=FRESH_MAX_S / DAY_S))
    pages = 0
    for start in range(FRESH_STARTS):
        rows = stream(replace(spec, seed=run_seed(seed, start) % 2**32))
        pages += len(replay(until(rows, FRESH_MAX_S), None, stop_at_page=False).pages)
    return {"pages": float(pages), "starts": float(FRESH_STARTS)}


# Bursts a day on the burst streams: several in a short healthy span.
BURSTS_PER_DAY = 8.0
_SEASONAL = StreamSpec(rate=1.0, days=1.0, icc=0.17, cycle=0.03, traffic_ratio=10.0)
# What a flat first level read low pages on (the conversations' design effect near 5).
FRESH_CLUSTERED = replace(_SEASONAL, icc=0.3, ids=False)
HEALTHY_STREAMS: dict[str, tuple[str, Any]] = {
    "independent 0.10 at 1/s": ("plain", (0.10, 1.0)),
    "independent 0.10 at 10/s": ("plain", (0.10, 10.0)),
    "independent 0.35 at 1/s": ("plain", (0.35, 1.0)),
    "independent 0.35 at 10/s": ("plain", (0.35, 10.0)),
    "one constant id": ("shaped", replace(_SEASONAL, id_kind="constant")),
    "the pod as id (8)": ("shaped", replace(_SEASONAL, id_kind="pods")),
    "a recycled pool of 1,000 ids": ("shaped", replace(_SEASONAL, id_kind="pool")),
    "the user as id (2,000)": ("shaped", replace(_SEASONAL, id_kind="user")),
    "bursts of 2,000 identical requests, no ids": (
        "shaped",
        replace(_SEASONAL, ids=False, bursts_per_day=BURSTS_PER_DAY),
    ),
    "bursts, a fresh session id per request": (
        "shaped",
        replace(_SEASONAL, bursts_per_day=BURSTS_PER_DAY, burst_ids=True),
    ),
}


# The changeover row (`harness/simulated_changeover.py`): x2 at a base of 0.15 at 1/s after
# an evaluator's switch, with what the switch carries; its healthy cells run 6 h past it.
CHANGEOVERS: dict[str, Changeover] = {
    "a day of shadow at 0.2, x2 a quarter hour after the switch": Changeover(
        shadow=0.2, rise_s=900.0
    ),
    "a day of shadow at 0.5, x2 a quarter hour after": Changeover(shadow=0.5, rise_s=900.0),
    "neither shadow nor previous, x2 20 min after": Changeover(rise_s=1200.0),
    "no change (b throughout), x2 a quarter hour in": Changeover(switch=False, rise_s=900.0),
    "healthy: a switch after a day of shadow at 0.2": Changeover(shadow=0.2),
    "healthy: a switch with neither": Changeover(),
}

# The upgrade row (`harness/simulated_upgrade.py`): a monitor release whose evaluator's
# verdicts changed, at 02:00 (night) and 14:00 (day): a day of the previous revision of
# record with the new one in shadow, as the release does on its own, then x2 of the true
# rate a quarter hour after the switch; beside it, the release without the previous
# revision, and switches without a rise (false pages).
UPGRADE_PAIRS = (
    ("detector", "judge"),
    ("judge", "detector"),
    ("detector", "moved threshold"),
    ("moved threshold", "detector"),
)
UPGRADE_HOURS = {"night": 2.0, "day": 14.0}
UPGRADES: dict[str, Switch] = {
    **{
        f"{old} -> {new} at {when}, x2 a quarter hour after": Switch(old, new, hour, rise_s=900.0)
        for old, new in UPGRADE_PAIRS
        for when, hour in UPGRADE_HOURS.items()
    },
    "without the previous revision: detector -> judge at night, x2 a quarter hour after": Switch(
        "detector", "judge", 2.0, mode="neither", rise_s=900.0
    ),
    "without the previous revision: judge -> detector at night, x2 a quarter hour after": Switch(
        "judge", "detector", 2.0, mode="neither", rise_s=900.0
    ),
    "healthy: detector -> judge at night": Switch("detector", "judge", 2.0),
    "healthy: moved threshold -> detector at day": Switch("moved threshold", "detector", 14.0),
}
# The night switch row: a switch at 02:00 after a day in shadow to a revision that reads
# the day's swing with another slope, x2 of the true rate 3 h after.
NIGHT_SWITCHES: dict[str, Switch] = {
    f"{old} -> {new}, x2 3 h after": Switch(old, new, 2.0, rise_s=3 * HOUR_S)
    for old, new in (("detector", "judge"), ("judge", "detector"), ("moved threshold", "judge"))
}


@dataclass(frozen=True)
class Cell:
    """One row's case: its name, the function of one run and its arguments (the seed
    is appended per run)."""

    row: str
    name: str
    fn: Callable[..., dict[str, float]]
    args: tuple[Any, ...]
    timed: bool = True  # runs over `--trials` (else one run)


def cells(healthy_days: float) -> list[Cell]:
    out = []
    for p0 in (0.10, 0.35):
        for rate in (1.0, 10.0):
            for factor in (1.5, 2.0):
                for ids in (False, True) if p0 < 0.2 else (False,):
                    how = "conversations" if ids else "no id"
                    name = f"{p0:.2f} x{factor:g} at {rate:g}/s, {how}"
                    out.append(Cell("plain", name, plain_trial, (p0, rate, factor, ids)))
    out.append(Cell("slow", "0.10 -> 0.15 at 0.2/s", slow_trial, ()))
    for days in YOUNG_DAYS:
        for rate, factor in ((0.2, 2.0), (1.0, 2.0), (10.0, 2.0), (0.2, 1.5), (1.0, 1.5)):
            name = f"{days} days, x{factor:g} at {rate:g}/s"
            out.append(Cell("young", name, young_trial, (days, rate, factor)))
    for name in HEALTHY_STREAMS:
        out.append(Cell("healthy", name, healthy_pages, (name, healthy_days), timed=False))
    for kind in ("constant", "user"):
        out.append(Cell("corners", f"x2 at 1/s, ids: {kind}", corner_trial, (kind,)))
    for compressed in (False, True):
        for rate in FRESH_RATES:
            what = "compressed rule" if compressed else "default rule"
            out.append(Cell("fresh", f"{what} at {rate:g}/s", fresh_trial, (compressed, rate)))
    for rate in (1.0, 10.0):
        name = f"healthy, ICC 0.3, no ids, daily cycle, at {rate:g}/s"
        out.append(Cell("fresh", name, fresh_healthy, (rate,), timed=False))
    for name, change in CHANGEOVERS.items():
        fn = changeover_trial if math.isfinite(change.rise_s) else changeover_healthy
        out.append(Cell("changeover", name, fn, (change,)))
    for row, switches in (("upgrade", UPGRADES), ("night", NIGHT_SWITCHES)):
        for name, switch in switches.items():
            timed = math.isfinite(switch.rise_s)
            out.append(Cell(row, name, switch_trial if timed else switch_healthy, (switch,)))
    for name in SIDECAR_TESTS:
        out.append(Cell("sidecar tests", name, sidecar_test_trial, (name,)))
    return out


def run_cell(cell: Cell, trials: int, seed: int, first: int = 0) -> list[dict[str, float]]:
    """The cell's runs `first` to `trials` (one where it is not timed), each on its seed."""
    count = trials if cell.timed else 1
    return [
        cell.fn(*cell.args, run_seed(seed, cell.row, cell.name, t)) for t in range(first, count)
    ]


# -- tables -------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    ordered = sorted(values, key=lambda v: (math.isnan(v), v))
    return ordered[len(ordered) // 2]


def _x(value: float) -> str:
    if math.isnan(value):
        return "-"
    return "not paged" if math.isinf(value) else f"{value:.2f}x"


def shown(cell: Cell, runs: list[dict[str, float]]) -> list[str]:
    """A cell's table row: its name and what its runs say."""
    if cell.row == "healthy":
        pages = sum(r["pages"] for r in runs)
        days = sum(r["days"] for r in runs)
        return [cell.name, f"{pages:g} in {days:g} service-days", f"{pages / days:.2f}"]
    if cell.row in ("changeover", "upgrade") and runs and "pages" in runs[0]:
        pages = sum(r["pages"] for r in runs)
        return [cell.name, f"{pages:g} false pages in {len(runs)} switches", "-"]
    if cell.row == "sidecar tests" and runs and "pages" in runs[0]:
        pages = sum(r["pages"] for r in runs)
        return [cell.name, f"{pages:g} false pages in {len(runs)} starts", "-"]
    if cell.row == "fresh" and runs and "pages" in runs[0]:
        pages = sum(r["pages"] for r in runs)
        starts = sum(r["starts"] for r in runs)
        return [cell.name, f"{pages:g} false pages in {starts:g} starts", "-"]
    if cell.row == "fresh":
        minutes = [r["minutes"] for r in runs]
        expected = [r["expected"] for r in runs if not math.isnan(r["expected"])]
        worst = max(minutes)
        return [
            cell.name,
            f"{_median(minutes):.1f} ({worst:.1f})"
            if not math.isinf(worst)
            else f"{sum(not math.isinf(m) for m in minutes)} of {len(minutes)} paged",
            f"{_median(expected):.3f}" if expected else "-",
        ]
    ratios = [r["ratio"] for r in runs]
    early = sum(1 for r in ratios if math.isnan(r))
    timed = [r for r in ratios if not math.isnan(r)]
    out = [cell.name, f"{_x(_median(timed))} ({_x(max(timed))})" if timed else "-"]
    if cell.row == "young":
        paged = sum(1 for r in timed if math.isfinite(r))
        risen = sum(1 for r in runs if math.isinf(r["ratio"]) and r["expected"] > YOUNG_LEARNED)
        out[1] += f", {paged} of {len(runs)} paged"
        out.append(f"{early} / {risen}")
    elif cell.row == "slow":
        expected = [r["expected"] for r in runs if not math.isnan(r["expected"])]
        out.append(f"{_median(expected):.3f}" if expected else "-")
    else:
        out.append(str(early))
    return out


HEADERS = {
    "plain": [
        "independent verdicts, base, rise, rate",
        "page / limit: median (worst)",
        "paged before the rise",
    ],
    "slow": [
        "a slow service's small rise",
        "page / limit: median (worst), a day at most",
        "expectation at the page",
    ],
    "young": [
        "0.10 on independent verdicts, history, rise, rate",
        "page / limit: median (worst)",
        "paged before the rise / not paged and learned",
    ],
    "healthy": ["healthy stream", "false pages", "per service-day"],
    "corners": [
        "ids that are no conversations",
        "page / limit: median (worst)",
        "paged before the rise",
    ],
    "fresh": [
        "fresh start, 0.10 then x3 from the 3rd minute (or healthy, 4 h)",
        "min to page: median (worst)",
        "expectation the page states, median",
    ],
    "changeover": [
        "an evaluator's switch (0.20 read as 0.15), 1/s, then x2",
        "page / limit: median (worst)",
        "paged before the rise",
    ],
    "upgrade": [
        "a monitor upgrade that changed the evaluator, a day shadowing itself, then x2 of the truth",
        "page / limit: median (worst)",
        "paged before the rise",
    ],
    "night": [
        "a switch at 02:00 after a day in shadow, to a revision of another slope",
        "page / limit: median (worst)",
        "paged before the rise",
    ],
    "sidecar tests": [
        "the alerting end-to-end tests' rules and streams, each from a fresh start",
        "page / limit: median (worst)",
        "paged before the rise",
    ],
}


def tables(results: dict[str, list[dict[str, float]]], all_cells: list[Cell]) -> str:
    out = []
    for row, header in HEADERS.items():
        lines = [shown(c, results[key(c)]) for c in all_cells if c.row == row and key(c) in results]
        if lines:
            out.append(bench_docs.table(header, lines))
    return "\n\n".join(out)


def key(cell: Cell) -> str:
    return f"{cell.row}: {cell.name}"
