"""An evaluator changeover with no verdicts of the old revision (no `evaluators[].previous`,
or it ended): until the new revision's offset is measured the regression rule judges on
its interim level (`monitor.alerts.kinds.regression_expectation.Expecting._interim`), so a
rise soon after the change pages instead of being taken for the evaluator's offset.
Streams from `harness/production_streams.py` through `rag-monitor backtest`'s engine on
their own simulated time."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.production_streams import DAY_S, START, Change, StreamSpec
from tests.alerts.test_alerts_changeover import information_limit_s, started
from tests.alerts.test_alerts_production import config, pages, replay

# Days of simulated traffic each: the slow tier.
pytestmark = pytest.mark.slow

# A new detector reads 0.30 where the old one read 0.20; the service's defect rate doubles
# a quarter hour later.
LIMIT_S = information_limit_s(0.30, 0.60, 1.0, 90 * DAY_S)


@pytest.mark.parametrize("hour", [10, 18])
def test_a_doubling_a_quarter_hour_after_an_evaluator_change_pages(hour: int) -> None:
    change_day = 4 + hour / 24
    step_day = change_day + 0.25 / 24
    changes = (Change("revision", change_day, 0.30), Change("step", step_day, 2.0))
    spec = StreamSpec(rate=1, days=step_day + 0.25, icc=0.05, cycle=0.03, ids=False)
    events, backtest = replay(replace(spec, changes=changes), config(season="day"))
    first = pages(events)[0]
    assert 0 <= first.time - (START + step_day * DAY_S) <= 5 * LIMIT_S
    said = first.alert.annotations["description"]
    assert "the new evaluator revision's level since its change" in said
    assert started(backtest) == 1
