"""Shadow scoring (`evaluators[].next`, `monitor/alerts/kinds/regression_shadow.py`): a new
evaluator revision scores a share of the records beside the revision of record; the alert
engine keeps the differences of their verdicts on the same records with the entry
(`AlertEngine.count_shadow`) and never counts them as the service's. When the operator
switches (the verdicts come with the shadowed revision), the changeover starts with the
offset measured in shadow, so a rise a quarter hour after the switch is judged against the
translated level. Verdicts one record at a time on an injected clock, judged every 15 s.

The two revisions disagree on about a sixth of the records (the new one reads 0.15 where
the old read 0.20, each on its own errors half of the time: `harness.simulated_changeover`,
whose model the scorecard's changeover row runs with the default rule): an offset measured on the
pairs alone, at a share of 0.2, needs hours; a day of shadow measures it before the switch.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from typing import Any

import pytest

from harness.production_streams import EVALUATOR
from harness.simulated_alerts import information_limit_s
from harness.simulated_changeover import NEW, OLD, reads, verdict
from monitor.alerts import AlertEngine
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.alerts.rule import Origin
from monitor.component import Alert
from monitor.config import AlertBaseline, RegressionRule
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock

STEP_S = 15
RATE = 1  # records a second
SHARE = 0.2  # of the records the shadowed revision scores
BUDGET_S = 7 * 86_400.0


LIMIT_S = information_limit_s(NEW, 2 * NEW, RATE, BUDGET_S)


def engine_for(clock: Clock, name: str) -> AlertEngine:
    rule = RegressionRule(
        name=name,
        evaluator=EVALUATOR,
        baseline=AlertBaseline(season="none", window="6h"),
        false_page_every="7d",
    )
    return AlertEngine([rule], create_telemetry(), evaluation_interval_s=STEP_S, clock=clock)


def run(
    engine: AlertEngine,
    clock: Clock,
    start_s: float,
    end_s: float,
    *,
    switch_s: float = 0.0,
    shadow: bool = True,
    rise_from_s: float = math.inf,
    seed: int = 0,
) -> list[Alert]:
    """`RATE` records a second from `start_s` to `end_s` (seconds since the switch), the
    firing alerts sent. Before `switch_s` revision "a" is of record and, with `shadow`, "b"
    scores `SHARE` of the records in shadow; from it "b" is of record. Each revision reads
    the record's own draw half of the time and a draw of its own the other half. From
    `rise_from_s` the service fails twice as much. `seed` draws another stream."""
    rng = random.Random(f"{start_s} {seed}")
    origin = Origin("shop")
    sent: list[Alert] = []
    t = start_s
    while t < end_s:
        clock.now += STEP_S
        at, t = t, t + STEP_S
        factor = 2.0 if at >= rise_from_s else 1.0
        for _ in range(RATE * STEP_S):
            old, new = reads(rng, factor)
            if at >= switch_s:
                engine.count_results(origin, verdict(new, "b"), clock.now)
                continue
            own = verdict(old, "a")
            engine.count_results(origin, own, clock.now)
            if shadow and rng.random() < SHARE:
                engine.count_shadow(origin, verdict(new, "b"), clock.now, own)
        sent.extend(a for a in engine.evaluate() if a.status == "firing")
    return sent


def state_of(engine: AlertEngine) -> RegressionState:
    state: RegressionState = next(iter(engine._entries.values())).state
    return state


@pytest.fixture(scope="module")
def shadowed_day() -> tuple[AlertEngine, Clock, dict[str, Any]]:
    """A day of revision "a" of record with "b" in shadow, no page; and the engine's state
    at its end, for the tests that go on from it on their own."""
    clock = Clock()
    engine = engine_for(clock, "shadowed")
    assert run(engine, clock, -86_400.0, 0.0) == []
    return engine, clock, json.loads(json.dumps(engine.snapshot()))  # as the state file holds it


@pytest.fixture(scope="module")
def shadowed_hours() -> tuple[AlertEngine, Clock]:
    """Seven hours of revision "a" of record with "b" in shadow."""
    clock = Clock()
    engine = engine_for(clock, "shadowed_hours")
    run(engine, clock, -7 * 3600.0, 0.0)
    return engine, clock


def test_shadow_verdicts_are_measured_and_never_counted_as_the_services(
    shadowed_hours: tuple[AlertEngine, Clock],
) -> None:
    engine, clock = shadowed_hours
    state = state_of(engine)
    assert state.baseline.shadow is not None and state.baseline.shadow.revision == "b"
    n, total, _ = state.baseline.shadow.paired
    # The share of the records, less those that came while evidence of a rise built.
    assert 0.8 * SHARE * 7 * 3600 <= n <= 1.05 * SHARE * 7 * 3600
    assert total / n == pytest.approx(NEW - OLD, abs=0.01)
    # The window holds the revision of record's verdicts alone: 0.20, not a mix with 0.15.
    current = state.current.moments(clock.now)
    assert current.samples <= 6 * 3600 * RATE + STEP_S
    assert current.mean == pytest.approx(OLD, abs=0.03)  # 30 min: 1,800 verdicts
    entry = next(iter(engine._entries.values()))
    assert entry.revision == "a"
    # Shadow verdicts of the revision of record itself, or of a service with no entry, are
    # no shadow.
    engine.count_shadow(Origin("elsewhere"), verdict(True, "b"), clock.now, verdict(True, "a"))
    assert len(list(engine._entries)) == 1
    before = list(state.baseline.shadow.paired)
    engine.count_shadow(Origin("shop"), verdict(True, "a"), clock.now, verdict(False, "a"))
    assert state.baseline.shadow.paired == before


def test_a_switch_after_a_day_of_shadow_never_pages_by_itself(
    shadowed_day: tuple[AlertEngine, Clock, dict[str, Any]],
) -> None:
    engine, clock, _ = shadowed_day
    assert run(engine, clock, 0.0, 4 * 3600.0) == []
    state = state_of(engine)
    assert state.baseline.changeover is None, "the offset measured in shadow was not kept"
    assert state.judging.expected is not None
    assert state.judging.expected.mean == pytest.approx(NEW, abs=0.01)


def test_a_doubling_a_quarter_hour_after_a_switch_with_a_day_of_shadow_pages_near_the_limit(
    shadowed_day: tuple[AlertEngine, Clock, dict[str, Any]],
) -> None:
    """Judged against the new revision's healthy level translated from the old one's by the
    offset measured in shadow (never an interim level), at a median within 2.5x the
    information limit over three streams. The offset measured on a day of pairs at a share
    of 0.2 has a standard error about three times the level's own (0.004 against 0.0014
    here), which the expectation's error carries: the same streams with no change at all
    page at a median of 1.46x."""
    rise_s = 900.0
    took = []
    _, day_clock, day = shadowed_day
    for seed in range(3):
        clock = Clock()
        if seed == 0:  # the fixture's day is this stream's: its state, restored
            engine = engine_for(clock, "shadowed")
            engine.restore(day)
            clock.now = day_clock.now
        else:
            engine = engine_for(clock, f"shadowed_rise_{seed}")
            run(engine, clock, -86_400.0, 0.0, seed=seed)
        switch_at = clock.now
        sent = run(engine, clock, 0.0, rise_s + 10 * LIMIT_S, rise_from_s=rise_s, seed=seed)
        assert sent, f"stream {seed}: the doubling after the switch did not page"
        took.append((sent[0].starts_at.timestamp() - switch_at - rise_s) / LIMIT_S)
        assert float(sent[0].annotations["baseline_defect_rate"]) == pytest.approx(NEW, abs=0.02)
        assert "an interim level" not in sent[0].annotations["description"]
        assert state_of(engine).baseline.changeover is None  # the offset was kept at the switch
    assert min(took) >= 0
    assert statistics.median(took) <= 2.5, f"paged at {sorted(took)} x the information limit"


def test_a_doubling_in_the_first_hour_of_a_change_without_shadow_pages_on_the_interim_level() -> (
    None
):
    """No shadow and no previous revision (a monitor release): the rule judges on the new
    revision's first verdicts, says so, and a doubling 20 minutes after the change pages,
    at a median within 3x the information limit over five streams."""
    rise_s = 1200.0
    took = []
    for seed in range(5):
        clock = Clock()
        engine = engine_for(clock, f"interim_rise_{seed}")
        run(engine, clock, -7 * 3600.0, 0.0, shadow=False, seed=seed)
        switch_at = clock.now
        end_s = rise_s + 10 * LIMIT_S
        sent = run(engine, clock, 0.0, end_s, rise_from_s=rise_s, shadow=False, seed=seed)
        assert sent, f"stream {seed}: the doubling in the change's first hour did not page"
        took.append((sent[0].starts_at.timestamp() - switch_at - rise_s) / LIMIT_S)
        description = sent[0].annotations["description"]
        assert "the new evaluator revision's level since its change" in description
        assert "an interim level" in description
        assert float(sent[0].annotations["baseline_defect_rate"]) < 1.5 * NEW
    assert min(took) >= 0
    assert statistics.median(took) <= 3.0, f"paged at {sorted(took)} x the information limit"


def test_a_shadow_under_way_survives_the_state_file(
    shadowed_hours: tuple[AlertEngine, Clock],
) -> None:
    engine, clock = shadowed_hours
    shadow = state_of(engine).baseline.shadow
    assert shadow is not None
    saved = engine.snapshot()
    again = engine_for(clock, "shadowed_hours")
    again.restore(saved)
    assert state_of(again).baseline.shadow == shadow
    assert again.snapshot() == saved
