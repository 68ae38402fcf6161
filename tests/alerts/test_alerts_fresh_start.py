"""A fresh start (`monitor.alerts.evidence.history.History.expectation` before the first complete
day): a seasonal regression rule pages a rise well above what the day has shown from its
first hours, and stays quiet on a daily cycle it has not learned yet. Streams from
`harness/production_streams.py` through `rag-monitor backtest`'s engine, on their own
simulated time."""

from __future__ import annotations

import pytest

from harness.production_streams import DAY_S, START, Change, StreamSpec
from tests.alerts.test_alerts_production import config, pages, replay

# Hours to days of simulated traffic each: the slow tier.
pytestmark = pytest.mark.slow


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
    history = next(iter(backtest.engine._entries.values())).state.history
    assert history.learning()  # the season is not learned yet: the page did not wait for it


def test_a_daily_cycle_not_yet_learned_is_not_paged_on_the_first_day() -> None:
    """Cycles of ±0.03 and ±0.06 (traffic ten times higher by day), a budget of a week."""
    for seed, (cycle, ratio, rate) in enumerate(((0.03, 1, 1.0), (0.06, 10, 0.5)) * 2):
        spec = StreamSpec(
            rate=rate, days=1.0, icc=0.05, cycle=cycle, traffic_ratio=ratio, ids=False, seed=seed
        )
        events, _ = replay(spec, config(season="day", budget="7d"))
        assert pages(events) == [], (cycle, seed)
