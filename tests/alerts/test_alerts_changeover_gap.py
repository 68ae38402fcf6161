"""An evaluator changeover with no verdicts of the old revision (no `evaluators[].previous`,
or it ended): until the new revision's offset is measured the regression rule judges on
its interim level (`monitor.alerts.kinds.regression_expectation.Expecting._interim`), so a
rise soon after the change pages instead of being taken for the evaluator's offset.
Streams from `harness/production_streams.py` through `rag-monitor backtest`'s engine on
their own simulated time."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

import pytest

from harness.production_streams import DAY_S, START, Change, StreamSpec
from monitor.alerts.backtest import Backtest
from monitor.config import Config
from tests.alerts.test_alerts_changeover import information_limit_s, started
from tests.alerts.test_alerts_production import RULE, config, pages, replay

# Days of simulated traffic each: the slow tier.
pytestmark = pytest.mark.e2e

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


# The compressed windows of the young changeover the scorecard's `sidecar tests` row judges
# (`harness/simulated_sidecar_tests.py`): 8 verdicts a second, `window: 30s`,
# `baseline: {window: 3m, min_samples: 240}`, one false page an hour, a look every second.
COMPRESSED = {
    "alerts": {
        "evaluation_interval_s": 1,
        "rules": [
            {
                "name": RULE,
                "evaluator": "local_groundedness",
                "window": "30s",
                "baseline": {"window": "3m", "min_samples": 240},
                "false_page_every": "1h",
            }
        ],
    }
}


def _rows(
    rng: random.Random, clock: list[float], n: int, rate: float, revision: str
) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for _ in range(n):
        clock[0] += 1 / 8
        failed = int(rng.random() < rate)
        row = {
            "time": clock[0],
            "service": "svc",
            "evaluator": "local_groundedness",
            "revision": revision,
            "passes": 1 - failed,
            "fails": failed,
        }
        rows.append((f"row at {clock[0]}", row))
    return rows


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_rise_after_the_interim_level_is_ready_is_judged_against_it_not_learned(
    seed: int,
) -> None:
    """Restarted with a stricter revision (reading 0.2 + 0.8 x 7/36 where the old read 0.2)
    and no verdicts of the old one: once the rule judges on the interim level, a 2.5x rise
    pages within four times its information limit, instead of entering the level it is
    judged against."""
    rng, clock = random.Random(seed), [START]
    config = Config.model_validate(COMPRESSED)
    first = Backtest(config)
    list(first.run(_rows(rng, clock, 8 * 400, 0.2, "r1")))
    second = Backtest(config)
    second.engine.restore(first.engine.snapshot())
    misread = 7 / 36
    healthy, risen = 0.2 + 0.8 * misread, 0.5 + 0.5 * misread
    registry = second.engine._t.registry
    labels = {"rule": RULE, "service": "svc"}
    for _ in range(300):  # healthy until the rule judges the new revision's level
        assert [e for e in second.run(_rows(rng, clock, 8, healthy, "r2"))] == []
        level = registry.get_sample_value("rag_monitor_defect_rate_baseline", labels)
        samples = registry.get_sample_value(
            "rag_monitor_alert_samples", {**labels, "window": "baseline"}
        )
        if level is not None and (samples or 0) >= 240 and level >= healthy - 0.03:
            break
    else:
        raise AssertionError("the rule never judged the new revision's level")
    limit = math.log(8 * 3600) / (
        risen * math.log(risen / healthy) + (1 - risen) * math.log((1 - risen) / (1 - healthy))
    )
    sent = 0
    while not any(e.status == "firing" for e in second.run(_rows(rng, clock, 4, risen, "r2"))):
        sent += 4
        assert sent <= 4 * limit, f"no page after {sent} verdicts of the rise (limit {limit:.0f})"


def test_the_interim_level_is_its_first_verdicts_never_the_open_bucket_with_a_rise() -> None:
    """Buckets of 24 minutes (a 24h baseline without a season): the interim level takes the
    new revision's first `baseline.min_samples` verdicts and stops, so a doubling a minute
    after they came is judged against the level before it (the baseline gauge stays there)
    and pages saying the rule is on an interim level, rather than entering the open
    bucket's level as it comes."""
    rng, clock = random.Random(4), [START]
    config = Config.model_validate(COMPRESSED)
    (rule,) = config.alerts.rules
    assert rule.baseline is not None
    baseline = rule.baseline.model_copy(update={"window": "24h", "season": "none"})
    config.alerts.rules[0] = rule.model_copy(update={"baseline": baseline})
    first = Backtest(config)
    list(first.run(_rows(rng, clock, 8 * 600, 0.2, "r1")))
    second = Backtest(config)
    second.engine.restore(first.engine.snapshot())
    registry = second.engine._t.registry
    labels = {"rule": RULE, "service": "svc"}
    healthy = _rows(rng, clock, 8 * 60, 0.3, "r2")
    first_verdicts = [row["fails"] for _, row in healthy[:240]]
    assert list(second.run(healthy)) == []
    events = list(second.run(_rows(rng, clock, 8 * 120, 0.6, "r2")))  # doubled for 2 min
    level = registry.get_sample_value("rag_monitor_defect_rate_baseline", labels)
    assert level == pytest.approx(sum(first_verdicts) / 240, abs=0.005)
    fired = [e for e in events if e.status == "firing"]
    assert fired, "the doubling pages within two minutes"
    said = fired[0].alert.annotations["description"]
    assert "the new evaluator revision's level since its change" in said
