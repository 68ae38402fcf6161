"""Evaluator changeovers on simulated time, for the scorecard's `changeover` row: the
default regression rule of a service whose verdicts came from revision "a" for four weeks
switches to revision "b", with a day of "b" in shadow before it (`evaluators[].next`),
with "a" scoring a share after it (`evaluators[].previous`), or with neither (a monitor
release); then the service's defect rate doubles.

The two revisions read the same records differently (`tests/alerts/test_alerts_shadow.py`'s
model): each reads the record's own draw half of the time and a draw of its own the other
half, "a" at 0.20 and "b" at 0.15 on the healthy service, so they disagree on about a sixth
of the records. Records come one at a time, `RATE` a second, through the engine's own
entry points (`count_results`, `count_shadow`), judged every 15 s on a clock that follows
them.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.production_streams import DAY_S, EVALUATOR, START, StreamSpec
from harness.simulated_alerts import (
    BUDGET,
    DEFAULT_RULE,
    INTERVAL_S,
    RULE,
    SERVICE,
    WARM_DAYS,
    config,
    counted,
    information_limit_s,
)
from monitor.config import parse_duration

if TYPE_CHECKING:
    from monitor.alerts import AlertEngine
    from monitor.alerts.rule import Origin

OLD, NEW = 0.20, 0.15  # what each revision reads of the healthy service
RATE = 1  # records a second
SHADOW_S = DAY_S  # the shadow's time before the switch (every run starts this long before)
BUDGET_S = parse_duration(BUDGET)
LIMIT_S = information_limit_s(NEW, 2 * NEW, RATE, BUDGET_S)
# How long a run goes on after the rise without a page (not paged): an interim level read
# high by chance leaves a x2 far slower than the median. Where nothing rises, how long it
# goes on after the switch (its false pages).
AFTER_RISE_LIMITS = 20
HEALTHY_AFTER_S = 6 * 3600.0


@dataclass(frozen=True)
class Changeover:
    """What a run's switch carries: `shadow`, the share of records "b" scores in shadow
    over the day before it; `previous`, the share "a" scores after it; `switch` False for
    the control (revision "b" of record all along). The defect rate doubles `rise_s`
    after the switch (inf: never)."""

    shadow: float = 0.0
    previous: float = 0.0
    switch: bool = True
    rise_s: float = math.inf


@functools.cache
def _history(revision: str, mean: float) -> dict[str, Any]:
    """The engine's state after four weeks of `revision` reading `mean`, as hourly counts,
    ending where a run starts."""
    spec = StreamSpec(rate=float(RATE), days=1.0, mean=mean, ids=False, revision=revision)
    return counted(spec, 1, WARM_DAYS * DAY_S - SHADOW_S, end=START - SHADOW_S)


def verdict(failed: bool, revision: str) -> dict[str, Any]:
    """One record's verdict of `EVALUATOR`, as `revision` gave it."""
    from monitor.results import EvalResult

    return {EVALUATOR: EvalResult(EVALUATOR, passed=not failed, revision=revision)}


def count_record(
    engine: AlertEngine,
    origin: Origin,
    now: float,
    *,
    switched: bool,
    old: tuple[bool, str],
    new: tuple[bool, str],
    shadow: Callable[[], bool],
    previous: Callable[[], bool],
) -> None:
    """One record's verdicts counted as the sidecar counts them around a switch from the
    `old` revision to the `new` one (each: whether it read the record as failed, its name):
    before the switch the old one is of record and the new one scores in shadow when
    `shadow()` says so; after it the new one is of record and the old one scores beside it
    (a results file's `previous`, as `backtest` replays it) when `previous()` says so. The
    draws are made only in their branch, so that a run's random stream is its own."""
    if not switched:
        own = verdict(*old)
        engine.count_results(origin, own, now)
        if shadow():
            engine.count_shadow(origin, verdict(*new), now, own)
        return
    own = verdict(*new)
    engine.count_results(origin, own, now)
    if previous():
        engine.count_results(origin, verdict(*old), now, paired=own)


def reads(rng: random.Random, factor: float) -> tuple[bool, bool]:
    """Whether revisions "a" and "b" read one record as failed, the service's defect rate
    `factor` times the healthy one: each reads the record's own draw half of the time and
    a draw of its own the other half."""
    u = rng.random()
    old = (u if rng.random() < 0.5 else rng.random()) < OLD * factor
    new = (u if rng.random() < 0.5 else rng.random()) < NEW * factor
    return old, new


def changeover_run(change: Changeover, seed: int) -> list[tuple[float, dict[str, str]]]:
    """One run: its pages, each at its seconds since the switch with its annotations."""
    from monitor.alerts import AlertEngine
    from monitor.alerts.rule import Origin
    from monitor.telemetry import create_telemetry

    clock = [START - SHADOW_S]
    engine = AlertEngine.from_config(
        config(DEFAULT_RULE), create_telemetry(), clock=lambda: clock[0]
    )
    engine.restore(_history("a", OLD) if change.switch else _history("b", NEW))
    end_s = (
        change.rise_s + AFTER_RISE_LIMITS * LIMIT_S
        if math.isfinite(change.rise_s)
        else HEALTHY_AFTER_S
    )
    rng = random.Random(seed)
    origin = Origin(SERVICE)
    pages: list[tuple[float, dict[str, str]]] = []
    step = int(INTERVAL_S)
    t = -SHADOW_S
    while t < end_s:
        factor = 2.0 if t >= change.rise_s else 1.0
        for _ in range(RATE * step):
            old, new = reads(rng, factor)
            now = clock[0]
            count_record(
                engine,
                origin,
                now,
                switched=not (t < 0 and change.switch),
                old=(old, "a"),
                new=(new, "b"),
                shadow=lambda: rng.random() < change.shadow,
                previous=lambda: change.switch and rng.random() < change.previous,
            )
        t += step
        clock[0] = START + t
        for alert in engine.evaluate():
            if alert.status == "firing" and alert.rule == RULE:
                pages.append((t, dict(alert.annotations)))
        if pages and math.isfinite(change.rise_s):
            break
    return pages


def changeover_trial(change: Changeover, seed: int) -> dict[str, float]:
    """A run with a rise: its page's time after the rise over the limit (inf: none within
    `AFTER_RISE_LIMITS` of it), whether it paged before the rise, the expectation it
    stated and whether it said it judged on an interim level."""
    pages = changeover_run(change, seed)
    if not pages:
        return {"ratio": math.inf, "early": 0.0, "expected": math.nan, "interim": 0.0}
    at, annotations = pages[0]
    expected = float(annotations["baseline_defect_rate"])
    interim = float("an interim level" in annotations["description"])
    if at < change.rise_s:
        return {"ratio": math.nan, "early": 1.0, "expected": expected, "interim": interim}
    ratio = (at - change.rise_s) / LIMIT_S
    return {"ratio": ratio, "early": 0.0, "expected": expected, "interim": interim}


def changeover_healthy(change: Changeover, seed: int) -> dict[str, float]:
    """A run without a rise: its false pages from the start of the shadow's day to
    `HEALTHY_AFTER_S` after the switch."""
    return {"pages": float(len(changeover_run(change, seed))), "switches": 1.0}
