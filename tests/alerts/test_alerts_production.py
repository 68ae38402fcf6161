"""Regression rules on production-shaped traffic, replayed through `rag-monitor backtest`'s
engine on simulated time: conversations, a daily cycle of the defect rate and of traffic,
good spells, evaluator revisions, the folded `other` service.

The streams come from `harness/production_streams.py` with fixed seeds, so every
assertion is deterministic; budgets are short (a day) where a test shows that something
would page, so that pages are many enough to count. `bench/alert_production.py` measures
the same streams over service-years at the default budget (docs/quality.md).
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

import pytest

from harness.production_streams import DAY_S, START, Change, StreamSpec, stream
from monitor.alerts import AlertEngine
from monitor.alerts.backtest import Backtest, Event
from monitor.component import Evaluated
from monitor.config import AlertBaseline, Config, RegressionRule
from monitor.evidence.counts import Unit
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock, gauge

# Statistical behaviour on simulated time: the scorecard tier (tests/conftest.py).
pytestmark = pytest.mark.scorecard
RULE = "regression"


def config(**baseline: Any) -> Config:
    return rules(**{RULE: baseline})


def rules(**baselines: dict[str, Any]) -> Config:
    """A rule of each name, on the same evaluator: rules that judge one replayed stream."""
    listed = [
        {
            "name": name,
            "evaluator": "local_groundedness",
            "baseline": baseline,
            "false_page_every": baseline.pop("budget", "90d"),
        }
        for name, baseline in baselines.items()
    ]
    return Config.model_validate({"alerts": {"evaluation_interval_s": 60, "rules": listed}})


def replay(spec: StreamSpec, cfg: Config | None = None) -> tuple[list[Event], Backtest]:
    backtest = Backtest(cfg or config())
    return list(backtest.run(stream(spec))), backtest


def pages(events: list[Event], after_day: float = 0.0, rule: str = RULE) -> list[Event]:
    return [
        e
        for e in events
        if e.status == "firing" and e.time >= START + after_day * DAY_S and e.alert.rule == rule
    ]


SEASONAL = StreamSpec(rate=0.5, days=7, cycle=0.06, traffic_ratio=10, icc=0.05, ids=False, seed=4)


def test_a_daily_cycle_is_learned_as_the_day_not_paged_as_a_rise() -> None:
    """A defect rate that swings 0.14 to 0.26 every day, traffic ten times higher by day:
    a baseline that knows the hour expects the peak; one that does not pages it daily."""
    both = rules(
        seasonal={"budget": "1d", "season": "day"}, flat={"budget": "1d", "season": "none"}
    )
    events, _ = replay(SEASONAL, both)
    assert len(pages(events, rule="seasonal")) <= 1
    assert len(pages(events, after_day=1, rule="flat")) >= 4


def test_a_seasonal_rule_judges_once_it_has_learned_a_whole_day() -> None:
    events, backtest = replay(replace(SEASONAL, days=0.9), config(budget="1h", season="day"))
    assert pages(events) == []
    entry = next(iter(backtest.engine._entries.values()))
    assert entry.state.baseline.history.learning()
    assert entry.judgment is not None and entry.judgment.figures["learning"] == 1.0


@pytest.mark.parametrize("ids", [True, False], ids=["with ids", "without ids"])
def test_conversations_are_measured_and_their_clusters_do_not_page(ids: bool) -> None:
    """Conversations of 5 to 20 verdicts sharing a defect probability (intraclass
    correlation 0.3): with their ids each conversation is one unit and the correlation is
    measured; without, the dispersion of the hourly counts is. Either way the evidence
    respects them: at a budget of one false page a day, at most a page or two in ten days."""
    spec = StreamSpec(rate=0.15, days=10, icc=0.3, ids=ids, seed=3)
    events, backtest = replay(spec, config(budget="1d", season="day"))
    assert len(pages(events)) <= 2
    entry = next(iter(backtest.engine._entries.values()))
    expected = entry.state.baseline.history.expectation(backtest.engine._clock(), 500)
    assert expected is not None
    if ids:
        assert expected.rho == pytest.approx(0.3, abs=0.05)
        assert expected.kappa == 1.0  # no verdict came without its conversation
    else:
        assert expected.kappa == pytest.approx(spec.design_effect, rel=0.3)


def test_a_step_of_half_again_pages_within_hours() -> None:
    spec = StreamSpec(
        rate=1,
        days=2.5,
        icc=0.17,
        cycle=0.03,
        traffic_ratio=10,
        changes=(Change("step", 2.0, 1.5),),
        seed=5,
    )
    events, _ = replay(spec, config(season="day"))
    (page,) = pages(events)
    # The step lands at midnight, when traffic is a tenth of the day's: the night's few
    # verdicts, against a season whose offsets are as uncertain as the clustering makes them,
    # carry it into the morning.
    assert START + 2 * DAY_S < page.time < START + 2.5 * DAY_S
    assert (
        "expected from the previous 24h and this hour of the day"
        in (page.alert.annotations["description"])
    )


def test_a_return_after_a_good_spell_is_not_a_regression() -> None:
    """Twelve hours at 0.10, then back to the usual 0.20: the recent level learned the
    spell, the long level did not, and the expectation is the higher of the two."""
    spec = StreamSpec(
        rate=1, days=7, icc=0.05, ids=False, changes=(Change("spell", 4.0, 0.10, 0.5),)
    )
    events, _ = replay(spec, config(budget="7d", season="day"))
    assert pages(events, after_day=4) == []


def test_an_evaluator_revision_starts_a_new_baseline_and_never_pages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A new detector whose verdicts run at 0.35 where the old one read 0.20, on a rate
    that follows the day (a rollout of it: tests/alerts/test_alerts_changeover.py)."""
    caplog.set_level(logging.WARNING, logger="monitor.alerts.engine")
    spec = StreamSpec(
        rate=1, days=3, icc=0.05, cycle=0.03, ids=False, changes=(Change("revision", 1.5, 0.35),)
    )
    events, backtest = replay(spec, config(budget="7d", season="day"))
    assert pages(events) == []
    assert [r.getMessage() for r in caplog.records if "is now revision" in r.getMessage()] == [
        "alert regression for svc-0: local_groundedness is now revision r1.1 (was r1): a new "
        "baseline starts, and the rule judges again once it holds one"
    ]
    registry = backtest.engine._t.registry
    assert (
        registry.get_sample_value(
            "rag_monitor_alert_baselines_started_total", {"rule": RULE, "reason": "revision"}
        )
        == 1
    )


def _verdict(passed: bool, revision: str) -> dict[str, EvalResult]:
    result = EvalResult(
        name="local_groundedness",
        score=float(passed),
        normalized=float(passed),
        passed=passed,
        revision=revision,
    )
    return {"local_groundedness": result}


WINDOWED = RegressionRule(
    name=RULE,
    evaluator="local_groundedness",
    window="60s",
    min_samples=50,
    baseline=AlertBaseline(window="10m", min_samples=200),
    min_increase=0.05,
    false_page_every="2h",
)


def test_a_firing_alert_resolves_saying_the_evaluator_changed() -> None:
    clock = Clock()
    engine = AlertEngine([WINDOWED], create_telemetry(), evaluation_interval_s=5, clock=clock)
    n = 0
    sent = []
    for seconds, rate, revision in ((900, 0.2, "a"), (120, 0.8, "a"), (5, 0.2, "b")):
        for _ in range(int(seconds / 5)):
            for _ in range(50):
                n += 1
                failed = (n % 100) < rate * 100
                record = RagRecord(request_id=str(n), service="shop", response="x")
                engine.emit([Evaluated(record, _verdict(not failed, revision))])
            clock.now += 5
            sent.extend(engine.evaluate())
    firing = [a for a in sent if a.status == "firing"]
    resolved = [a for a in sent if a.status == "resolved"]
    assert firing and len(resolved) == 1
    assert (
        resolved[0]
        .annotations["description"]
        .startswith("the evaluator changed (revision a -> b): a new baseline starts; ")
    )
    assert resolved[0].annotations["evaluator_revision"] == "a"
    # Late verdicts of the revision just replaced are left out, not a change back.
    engine.emit(
        [
            Evaluated(
                RagRecord(request_id="late", service="shop", response="x"), _verdict(False, "a")
            )
        ]
    )
    assert next(iter(engine._entries.values())).revision == "b"


def test_the_folded_other_service_is_never_judged() -> None:
    clock = Clock()
    t = create_telemetry(max_services=2, clock=clock)
    engine = AlertEngine([WINDOWED], t, evaluation_interval_s=5, clock=clock)
    for i in range(400):
        record = RagRecord(request_id=str(i), service=f"s{i % 40}", response="x")
        engine.emit([Evaluated(record, _verdict(i % 3 == 0, "a"))])
    engine.evaluate()
    assert {service for _, service, _ in engine._entries} == {"s0", "s1"}
    assert gauge(t, "alert_samples", service="other", rule=RULE, window="current") is None


def test_open_conversations_and_the_learned_season_survive_a_restart() -> None:
    spec = StreamSpec(rate=0.2, days=2.2, icc=0.17, cycle=0.03, seed=6)
    _, first = replay(spec, config(season="day"))
    saved = first.engine.snapshot()
    entry = saved[RULE]["services"]["svc-0"][""]
    assert entry["conversations"], "conversations still open at the end"
    second = Backtest(config(season="day"))
    second.engine.restore(saved)
    restored = second.engine.snapshot()[RULE]["services"]["svc-0"][""]
    assert restored["conversations"] == entry["conversations"]
    assert restored["state"]["history"] == entry["state"]["history"]
    history = next(iter(second.engine._entries.values())).state.baseline.history
    assert not history.learning()


def test_a_conversation_is_one_unit_of_its_verdicts_and_each_arrival_knows_what_came_before() -> (
    None
):
    from monitor.evidence.conversations import Conversations
    from monitor.evidence.counts import Arrival

    conversations = Conversations(idle_s=600)
    levels = [0.0, 1.0]
    assert conversations.add(1, [2, 1], levels, 0.0) == (Arrival(3, 1.0, 1.0, 0, 0.0), [])
    assert conversations.add(1, [1, 1], levels, 300.0) == (Arrival(2, 1.0, 1.0, 3, 1.0), [])
    assert conversations.close_idle(800.0) == []  # quiet for 500 s only
    assert conversations.close_idle(900.0) == [Unit(5, 2.0, 2.0, conversation=True)]


def test_a_conversation_that_goes_on_after_its_unit_closed_is_judged_with_all_it_showed() -> None:
    """A user back after a pause, or a session past `MAX_VERDICTS`, is the same
    conversation: its next arrival carries every earlier verdict (bet on as new, its
    verdicts would count twice as independent ones); the unit that closed holds only its
    own. The memory survives the state file and ends after `REMEMBER_S`."""
    from monitor.evidence.conversations import MAX_VERDICTS, REMEMBER_S, Conversations
    from monitor.evidence.counts import Arrival

    levels = [0.0, 1.0]
    conversations = Conversations(idle_s=600)
    conversations.add(1, [3, 2], levels, 0.0)
    assert conversations.close_idle(700.0) == [Unit(5, 2.0, 2.0, conversation=True)]
    assert conversations.add(1, [1, 1], levels, 900.0) == (Arrival(2, 1.0, 1.0, 5, 2.0), [])
    assert conversations.close_idle(1600.0) == [Unit(2, 1.0, 1.0, conversation=True)]

    # Past MAX_VERDICTS the unit closes and the conversation goes on.
    _, closed = conversations.add(2, [MAX_VERDICTS - 10, 10], levels, 0.0)
    assert closed == [Unit(MAX_VERDICTS, 10.0, 10.0, conversation=True)]
    arrival, _ = conversations.add(2, [0, 1], levels, 60.0)
    assert (arrival.earlier, arrival.earlier_defects) == (MAX_VERDICTS, 10.0)

    # Through the state file, in the format it is saved in.
    restored = Conversations(idle_s=600)
    restored.restore(json.loads(json.dumps(conversations.snapshot())))
    assert restored.add(1, [1, 0], levels, 2000.0)[0] == Arrival(1, 0.0, 0.0, 7, 3.0)
    assert restored.add(2, [1, 0], levels, 2000.0)[0] == Arrival(
        1, 0.0, 0.0, MAX_VERDICTS + 1, 11.0
    )

    # Remembered for REMEMBER_S after its unit closed, then new.
    conversations.close_idle(1600.0 + REMEMBER_S)
    assert conversations.add(1, [1, 0], levels, 1600.0 + REMEMBER_S)[0].earlier == 0


def test_a_state_file_of_open_conversations_only_is_still_read() -> None:
    from monitor.evidence.conversations import Conversations
    from monitor.evidence.counts import Arrival

    conversations = Conversations(idle_s=600)
    conversations.restore([[7, 3, 1.0, 1.0, 0.0, 10.0]])
    assert conversations.add(7, [1, 0], [0.0, 1.0], 20.0)[0] == Arrival(1, 0.0, 0.0, 3, 1.0)
    malformed: list[Any] = [
        [[7, 3, 4.0, 1.0, 0.0, 10.0]],
        {"open": [], "closed": [[7, 2, 1.0]]},
        {"open": []},
    ]
    for bad in malformed:
        with pytest.raises((TypeError, ValueError)):
            Conversations(idle_s=600).restore(bad)


def test_a_rise_against_the_same_hours_a_week_before_pages() -> None:
    spec = StreamSpec(
        rate=1, days=8.5, cycle=0.03, ids=False, changes=(Change("step", 8.2, 1.5),), seed=7
    )
    events, _ = replay(spec, config(season="day", reference="last_week"))
    (page,) = pages(events)
    assert START + 8.2 * DAY_S < page.time < START + 8.45 * DAY_S
    assert "expected from the same hours a week before" in page.alert.annotations["description"]


def test_a_slow_drift_pages_against_a_pinned_period_and_not_against_the_trailing_day() -> None:
    """0.20 to 0.30 over four days: the trailing level follows it, a pinned good week does
    not. The pinned level is kept once learned (the history keeps four weeks)."""
    drift = StreamSpec(
        rate=1, days=8, ids=False, changes=(Change("drift", 3.0, 0.30, 4.0),), seed=8
    )
    pinned = {"pinned": "2026-01-01T00:00Z/2026-01-03T00:00Z"}
    events, backtest = replay(
        drift, rules(trailing={"season": "day"}, pinned={"season": "day", "reference": pinned})
    )
    assert pages(events, rule="trailing") == []
    first = pages(events, rule="pinned")[0]
    # The rate crosses 0.23 (min_increase above the pinned 0.20) at day 4.2.
    assert START + 4.2 * DAY_S < first.time < START + 5.2 * DAY_S
    assert (
        "the pinned period 2026-01-01T00:00Z/2026-01-03T00:00Z"
        in (first.alert.annotations["description"])
    )
    saved = backtest.engine.snapshot()["pinned"]["services"]["svc-0"][""]["state"]["pinned"]
    assert saved[:2] == [START, START + 2 * DAY_S] and saved[2] == pytest.approx(0.2, abs=0.01)


def test_a_step_at_high_traffic_pages_before_the_conversations_under_way_go_quiet() -> None:
    """Ten verdicts a second in conversations of 5 to 20 turns a minute apart (intraclass
    correlation 0.17): each turn counts as it comes, against what its conversation's
    earlier turns predict, so a x1.5 step pages within minutes, before the conversations
    it reached could have gone quiet for `alerts.conversation_idle` (10m)."""
    step_day = 0.05  # 72 minutes of a 1h baseline, then 14 minutes of the step
    spec = StreamSpec(
        rate=10, days=0.06, icc=0.17, changes=(Change("step", step_day, 1.5),), seed=6
    )
    events, backtest = replay(spec, config(window="1h", season="none"))
    (page,) = pages(events)
    after = page.time - (START + step_day * DAY_S)
    assert 0 < after < 600
    entry = next(iter(backtest.engine._entries.values()))
    expected = entry.state.baseline.history.expectation(backtest.engine._clock(), 500)
    assert expected is not None and expected.rho <= expected.rho_bound
