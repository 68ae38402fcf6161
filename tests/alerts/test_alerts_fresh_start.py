"""A fresh start (`monitor.evidence.history.History.expectation` before the first complete
day): a seasonal regression rule pages a rise well above what the day has shown from its
first hours, and stays quiet on a daily cycle it has not learned yet. Streams from
`harness/production_streams.py` through `rag-monitor backtest`'s engine, on their own
simulated time."""

from __future__ import annotations

import math
import random

import pytest

from harness.production_streams import DAY_S, START, Change, StreamSpec
from monitor.alerts import AlertEngine
from monitor.component import Evaluated
from monitor.config import AlertBaseline, RegressionRule
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock, record, verdict
from tests.alerts.test_alerts_production import config, pages, replay

# Hours to days of simulated traffic each: the slow tier.
pytestmark = pytest.mark.e2e


def test_a_doubling_on_the_first_morning_pages_before_the_first_day_is_learned() -> None:
    spec = StreamSpec(
        rate=1, days=0.5, icc=0.05, cycle=0.03, ids=False, changes=(Change("step", 0.25, 2.0),)
    )
    events, backtest = replay(spec, config(season="day"))
    (page, *_) = pages(events)
    step = START + 0.25 * DAY_S
    # Within a window of the default rule: the expectation before the season is learned is
    # the highest hour seen (and its steepest rise), above this morning's rate.
    assert step <= page.time <= step + 1800
    assert (
        "(season not learned yet: the highest hour seen)" in (page.alert.annotations["description"])
    )
    history = next(iter(backtest.engine._entries.values())).state.baseline.history
    assert history.learning()  # the season is not learned yet: the page did not wait for it


def test_a_daily_cycle_not_yet_learned_is_not_paged_on_the_first_day() -> None:
    """Cycles of ±0.03 and ±0.06 (traffic ten times higher by day), a budget of a week."""
    for seed, (cycle, ratio, rate) in enumerate(((0.03, 1, 1.0), (0.06, 10, 0.5)) * 2):
        spec = StreamSpec(
            rate=rate, days=1.0, icc=0.05, cycle=cycle, traffic_ratio=ratio, ids=False, seed=seed
        )
        events, _ = replay(spec, config(season="day", budget="7d"))
        assert pages(events) == [], (cycle, seed)


def minutes_to_first_page(started_s: float, per_s: float, rise_at_min: float) -> float:
    """Minutes from a fresh start to the first page of a regression rule at its defaults,
    on a service sending `per_s` verdicts a second whose defect rate rises from 0.1 to 0.5
    at `rise_at_min` minutes; started `started_s` seconds into a clock hour. Judged every
    15 s and whenever the test asks, on an injected clock."""
    clock = Clock()
    clock.now = START + started_s
    start = clock.now
    rule = RegressionRule(name="fresh", evaluator="local_groundedness", baseline=AlertBaseline())
    engine = AlertEngine([rule], create_telemetry(), evaluation_interval_s=15, clock=clock)
    rng = random.Random(7)
    tick, n = start + 15, 0
    while clock.now < start + 3 * 3600:
        clock.now += 1 / per_s
        while clock.now >= tick:
            saved, clock.now = clock.now, tick
            engine.evaluate()
            clock.now, tick = saved, tick + 15
        n += 1
        rate = 0.5 if clock.now - start >= rise_at_min * 60 else 0.1
        passed = rng.random() >= rate
        engine.emit(
            [
                Evaluated(
                    record("shop", n), {"local_groundedness": verdict("local_groundedness", passed)}
                )
            ]
        )
        if engine.evaluation_due:
            engine.evaluate()
        if engine.firing():
            return (clock.now - start) / 60
    return math.inf


def test_how_soon_after_a_start_a_default_rule_can_page_as_the_readme_says() -> None:
    """README, "When a rule can first page": in its first hour, until its history expects
    anything, a rule judges against its first verdicts (`FirstLevel`: `baseline.min_samples`,
    500, in four 30 s units at least), so a rise after them pages within minutes: 500
    verdicts take 8.3 minutes at one a second, four units 90 s at ten. Past its first hour
    a rise pages once the history holds two clock hours of 100 verdicts: about 90 minutes
    after a start on the hour at one a second. A rise while the first verdicts come in
    (x5 from the 3rd minute at one a second) cuts the level where it began: judged
    against the two minutes before it, it pages within minutes."""
    assert 20 <= minutes_to_first_page(3540, 10.0, rise_at_min=20) <= 22
    assert 10 <= minutes_to_first_page(3540, 1.0, rise_at_min=10) <= 15
    assert 90 <= minutes_to_first_page(0, 1.0, rise_at_min=75) <= 95
    assert 2 < minutes_to_first_page(0, 1.0, rise_at_min=2) <= 10
