"""A changeover measured on the overlap (`monitor.evidence.Overlap`):
while both evaluator revisions score the same service (a rollout), the new revision's
offset is the difference of the two on the same hours, so a change of the service in the
first hour after the evaluator's still pages; with the old revision gone the offset comes
from consecutive periods, and the rule says so. Counts through `AlertEngine.add_counts`
on an injected clock, every 15 s."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.alerts.state import UPGRADES
from monitor.component import Alert
from monitor.config import AlertBaseline, RegressionRule
from monitor.evidence import Moments, Overlap
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock

RULE = "regression"
STEP_S = 15
# Verdicts a second, all revisions together.
RATE = 2


def engine_for(clock: Clock, name: str = RULE) -> AlertEngine:
    """The rule named apart per test: the log lines are limited per rule, service and process."""
    rule = RegressionRule(
        name=name,
        evaluator="local_groundedness",
        baseline=AlertBaseline(season="none", window="6h"),
        false_page_every="7d",
    )
    return AlertEngine([rule], create_telemetry(), evaluation_interval_s=STEP_S, clock=clock)


# revision -> its defect rate, at seconds since the change (negative: before it).
Rates = Callable[[float], dict[str, float]]


def run(
    engine: AlertEngine,
    clock: Clock,
    rates: Rates,
    start_s: float,
    end_s: float,
    services: tuple[str, ...] = ("shop",),
) -> list[Alert]:
    """Binomial counts of each revision for each of `services` every `STEP_S` from
    `start_s` to `end_s` (seconds since the change), the traffic split evenly between the
    revisions live; the alerts sent."""
    rng = random.Random(int(start_s) + 7)
    sent: list[Alert] = []
    t = start_s
    while t < end_s:
        clock.now += STEP_S
        t += STEP_S
        live = rates(t)
        n = RATE * STEP_S // len(live)
        for service in services:
            for revision, rate in live.items():
                k = sum(rng.random() < rate for _ in range(n))
                engine.add_counts(
                    engine.rules[0].config.name, service, "", [float(n - k), float(k)], revision
                )
        sent.extend(engine.evaluate())
    return sent


def entry_state(engine: AlertEngine) -> RegressionState:
    state: RegressionState = next(iter(engine._entries.values())).state
    return state


def firing(sent: list[Alert]) -> list[Alert]:
    return [a for a in sent if a.status == "firing"]


BEFORE_S = 7 * 3600.0


def rollout(worse_from_s: float, rise: float) -> Rates:
    """ "a" reads 0.20 and "b" 0.30 of the same traffic; from the change on both live, half
    the traffic each; from `worse_from_s` the service fails `rise` more of it."""

    def rates(t: float) -> dict[str, float]:
        if t < 0:
            return {"a": 0.20}
        extra = rise if t >= worse_from_s else 0.0
        return {"a": 0.20 + extra, "b": 0.30 + extra}

    return rates


def test_a_service_change_in_the_first_hour_of_a_rollout_pages() -> None:
    """The service fails 0.15 more five minutes after the new revision went live: the
    offset measured on both revisions' verdicts of the same hours stays near 0.10, so the
    rise pages; measured between consecutive periods it would be taken for the judge's."""
    clock = Clock()
    engine = engine_for(clock)
    rates = rollout(300.0, 0.15)
    assert firing(run(engine, clock, rates, -BEFORE_S, 0.0)) == []
    change_at = clock.now
    sent = firing(run(engine, clock, rates, 0.0, 2 * 3600.0))
    assert sent, "the rise was taken for the evaluator's"
    assert 300.0 <= sent[0].starts_at.timestamp() - change_at <= 3600.0
    assert float(sent[0].annotations["baseline_defect_rate"]) == pytest.approx(0.30, abs=0.04)


def test_a_healthy_rollout_translates_from_the_overlap_and_never_pages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    engine = engine_for(clock, "healthy_rollout")
    rates = rollout(float("inf"), 0.0)
    run(engine, clock, rates, -BEFORE_S, 0.0)
    with caplog.at_level(logging.INFO, logger="monitor.alerts.kinds.regression_expectation"):
        sent = run(engine, clock, rates, 0.0, 8 * 3600.0)
    assert firing(sent) == []
    state = entry_state(engine)
    assert state.baseline.changeover is None and state.baseline.translated is not None
    assert "verdicts of both in the same hours" in caplog.text
    assert state.judging.expected is not None
    assert state.judging.expected.mean == pytest.approx(0.30, abs=0.02)


def test_with_the_old_revision_gone_the_rule_says_how_it_translates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A new detector release: "b" alone from the change on. The rule is not ready (the
    gauge) until the offset from consecutive periods is kept, and its log line says what
    that offset cannot tell apart."""
    clock = Clock()
    engine = engine_for(clock, "new_release")

    def rates(t: float) -> dict[str, float]:
        return {"a": 0.20} if t < 0 else {"b": 0.30}

    run(engine, clock, rates, -BEFORE_S, 0.0)
    registry = engine._t.registry
    labels = {"service": "shop", "rule": "new_release"}
    with caplog.at_level(logging.INFO, logger="monitor.alerts.kinds.regression_expectation"):
        run(engine, clock, rates, 0.0, 1800.0)
        assert registry.get_sample_value("rag_monitor_alert_baseline_ready", labels) == 0
        assert firing(run(engine, clock, rates, 1800.0, 10 * 3600.0)) == []
    assert registry.get_sample_value("rag_monitor_alert_baseline_ready", labels) == 1
    assert "a change of the service meanwhile is taken for the evaluator's" in caplog.text
    assert entry_state(engine).baseline.changeover is None


def test_each_service_whose_evaluator_changed_is_logged_by_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two services get the new detector release in the same hour: each one's translation
    is logged, naming it (a rule's lines are limited per service, not per rule, so the
    second service's is not held back for an hour)."""
    clock = Clock()
    engine = engine_for(clock, "two_releases")

    def rates(t: float) -> dict[str, float]:
        return {"a": 0.20} if t < 0 else {"b": 0.30}

    services = ("shop", "search")
    run(engine, clock, rates, -BEFORE_S, 0.0, services)
    with caplog.at_level(logging.INFO, logger="monitor.alerts.kinds.regression_expectation"):
        run(engine, clock, rates, 0.0, 10 * 3600.0, services)
    translated = [r.getMessage() for r in caplog.records if "is translated" in r.getMessage()]
    for service in services:
        assert [m for m in translated if f"alert two_releases for {service}:" in m], translated


def test_an_overlap_under_way_survives_the_state_file_and_an_older_file_reads() -> None:
    clock = Clock()
    engine = engine_for(clock)
    rates = rollout(float("inf"), 0.0)
    run(engine, clock, rates, -BEFORE_S, 0.0)
    run(engine, clock, rates, 0.0, 600.0)
    change = entry_state(engine).baseline.changeover
    assert change is not None and min(change.overlap.counts) > 0
    saved = engine.snapshot()
    again = engine_for(clock)
    again.restore(saved)
    assert again.snapshot() == saved
    # A version-3 state file written before overlaps were kept: the changeover without
    # them, upgraded to an empty one.
    older = saved[RULE]["services"]["shop"][""]["state"]
    older["changeover"] = older["changeover"][:9]
    UPGRADES[3](saved)
    third = engine_for(clock)
    third.restore(saved)
    restored = entry_state(third).baseline.changeover
    assert restored is not None and restored.overlap == Overlap()


def test_the_overlap_weighs_each_hour_apart() -> None:
    """A share that moves while the level moves (10 % of the new revision at night, half
    by day) must not read the day's rise as the revision's offset."""
    overlap = Overlap()
    night, day = 0.10, 0.30
    overlap.add(0, Moments(900, 900 * night, 900 * night), 0.0, old=True)
    overlap.add(0, Moments(100, 100 * (night + 0.05), 100 * (night + 0.05)), 0.0, old=False)
    overlap.add(1, Moments(500, 500 * day, 500 * day), 0.0, old=True)
    overlap.add(1, Moments(500, 500 * (day + 0.05), 500 * (day + 0.05)), 0.0, old=False)
    measured = overlap.offset(1.0)
    assert measured is not None
    # Pooled across the hours the new revision would read 0.15 more than the old.
    assert measured[0] == pytest.approx(0.05)


def test_a_paged_doubling_does_not_move_the_offset_while_it_fires() -> None:
    """Both revisions' rates double twenty minutes into a rollout: the difference of the two
    doubles with them, so the hours it fires are left out of the overlap and the offset
    stays what the hours before measured."""
    clock = Clock()
    engine = engine_for(clock, "doubling")

    def rates(t: float) -> dict[str, float]:
        if t < 0:
            return {"a": 0.20}
        factor = 2.0 if t >= 1200.0 else 1.0
        return {"a": 0.20 * factor, "b": 0.30 * factor}

    run(engine, clock, rates, -BEFORE_S, 0.0)
    assert firing(run(engine, clock, rates, 0.0, 3 * 3600.0))
    assert next(iter(engine._entries.values())).firing
    change = entry_state(engine).baseline.changeover
    assert change is not None
    measured = change.overlap.offset(1.0)
    assert measured is not None
    assert measured[0] == pytest.approx(0.10, abs=0.05)


def test_while_evidence_builds_the_overlap_is_held_apart_then_joins_or_is_dropped() -> None:
    """A rise that moves the two revisions apart (a doubling of both) would move the
    offset while its evidence builds: what both score then is kept apart, joins the overlap
    when the evidence fades, and is dropped when the rule fires."""
    clock = Clock()
    engine = engine_for(clock, "held_overlap")
    rates = rollout(float("inf"), 0.0)
    run(engine, clock, rates, -BEFORE_S, 0.0)
    run(engine, clock, rates, 0.0, 600.0)
    state = entry_state(engine)
    change = state.baseline.changeover
    assert change is not None and not state.baseline.building
    counts = list(change.overlap.counts)
    now = clock.now + 1.0
    # How long a hold lasts at most: the rule's baseline window and window.
    hold_s = 6 * 3600.0 + 60.0

    def both() -> None:
        state.baseline.count(Moments(10, 4.0, 4.0), now, old=True, firing=False)
        state.baseline.count(Moments(10, 6.0, 6.0), now, old=False, firing=False)

    state.baseline.settle_held_overlap(now, building=True, firing=False, hold_s=hold_s)
    both()
    assert change.overlap.counts == counts and change.overlap.old_seen == now
    assert state.baseline.held_overlap is not None and state.baseline.held_overlap.counts == [
        10.0,
        10.0,
    ]
    state.baseline.settle_held_overlap(now, building=False, firing=False, hold_s=hold_s)
    assert state.baseline.held_overlap is None and change.overlap.counts == [c + 10 for c in counts]
    state.baseline.settle_held_overlap(now, building=True, firing=False, hold_s=hold_s)
    both()
    state.baseline.settle_held_overlap(now, building=True, firing=True, hold_s=hold_s)
    assert state.baseline.held_overlap is None and change.overlap.counts == [c + 10 for c in counts]
    assert not state.baseline.building
    # A hold that neither fades nor pages joins after `hold_s`, as held verdicts do.
    state.baseline.settle_held_overlap(now, building=True, firing=False, hold_s=hold_s)
    both()
    state.baseline.settle_held_overlap(now + hold_s - 1, building=True, firing=False, hold_s=hold_s)
    assert state.baseline.held_overlap is not None
    state.baseline.settle_held_overlap(now + hold_s, building=True, firing=False, hold_s=hold_s)
    assert state.baseline.held_overlap is None and change.overlap.counts == [c + 20 for c in counts]
