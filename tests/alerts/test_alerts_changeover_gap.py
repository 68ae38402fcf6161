"""An evaluator changeover with no verdicts of the old revision (no `evaluators[].previous`,
or it ended): until the new revision's offset is measured the regression rule judges on
its interim level (`monitor.alerts.kinds.regression_expectation.Expecting._interim`), so a
rise soon after the change pages instead of being taken for the evaluator's offset.
Streams from `harness/production_streams.py` through `rag-monitor backtest`'s engine on
their own simulated time."""

from __future__ import annotations

import pytest

from harness.production_streams import DAY_S, START, Change, StreamSpec
from tests.alerts.test_alerts_changeover import information_limit_s, started
from tests.alerts.test_alerts_production import config, pages, replay

# Days of simulated traffic each: the slow tier.
pytestmark = pytest.mark.slow

# A new detector reads 0.30 where the old one read 0.20 from 10:00 of day 4; the service's
# defect rate doubles a quarter hour later.
CHANGE_DAY = 4 + 10 / 24
STEP_DAY = CHANGE_DAY + 0.25 / 24
LIMIT_S = information_limit_s(0.30, 0.60, 1.0, 90 * DAY_S)


def test_a_doubling_a_quarter_hour_after_an_evaluator_change_pages() -> None:
    spec = StreamSpec(
        rate=1,
        days=STEP_DAY + 0.25,
        icc=0.05,
        cycle=0.03,
        ids=False,
        changes=(Change("revision", CHANGE_DAY, 0.30), Change("step", STEP_DAY, 2.0)),
    )
    events, backtest = replay(spec, config(season="day"))
    (page, *_) = pages(events)
    assert page.time >= START + STEP_DAY * DAY_S
    assert page.time - (START + STEP_DAY * DAY_S) <= 5 * LIMIT_S
    assert (
        "the new evaluator revision's level since its change"
        in (page.alert.annotations["description"])
    )
    assert started(backtest) == 1
