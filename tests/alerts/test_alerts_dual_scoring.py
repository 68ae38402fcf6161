"""An evaluator changeover measured on records both revisions scored (`Overlap.paired`,
what `backtest` replays from results lines that carry `previous`): the old revision's
verdicts on a share of the records come to the alert engine with the new revision's on the
same records (`AlertEngine.count_results` with `paired`); the offset is the mean of their differences, which varies far
less than two independent verdicts, so the history translates within hours and a rise soon
after the change pages. Verdicts one record at a time on an injected clock, judged every
15 s."""

from __future__ import annotations

import functools
import json
import logging
import random
import re

import pytest

from harness.production_streams import START, Change, StreamSpec, stream
from monitor.alerts import AlertEngine
from monitor.alerts.backtest import Backtest
from monitor.alerts.backtest_rows import Row
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.alerts.rule import Origin
from monitor.alerts.state import UPGRADES
from monitor.component import Alert, Evaluated
from monitor.config import AlertBaseline, Config, RegressionRule
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock, record

EVALUATOR = "local_groundedness"
STEP_S = 15
RATE = 2  # records a second
BEFORE_S = 7 * 3600.0
SHARE = 0.2  # of the records the previous revision scores again


def engine_for(clock: Clock, name: str) -> AlertEngine:
    """The rule named apart per test: the log lines are limited per rule and process."""
    rule = RegressionRule(
        name=name,
        evaluator=EVALUATOR,
        baseline=AlertBaseline(season="none", window="6h"),
        false_page_every="7d",
    )
    return AlertEngine([rule], create_telemetry(), evaluation_interval_s=STEP_S, clock=clock)


def verdict(failed: bool, revision: str) -> dict[str, EvalResult]:
    return {EVALUATOR: EvalResult(EVALUATOR, passed=not failed, revision=revision)}


def run(
    engine: AlertEngine,
    clock: Clock,
    start_s: float,
    end_s: float,
    *,
    rise_from_s: float = float("inf"),
    previous: str | None = "a",
    share: float = SHARE,
) -> list[Alert]:
    """`RATE` records a second from `start_s` to `end_s` (seconds since the change), the
    alerts sent. Before the change revision "a" reads 0.20; after it "b" reads 0.30 of the
    same records (it fails every record "a" fails, and a tenth more of them) and `previous`
    scores `share` of them again. From `rise_from_s` the service fails twice as much."""
    rng = random.Random(int(start_s) + 11)
    origin = Origin("shop")
    sent: list[Alert] = []
    t = start_s
    while t < end_s:
        clock.now += STEP_S
        at, t = t, t + STEP_S
        factor = 2.0 if at >= rise_from_s else 1.0
        for _ in range(RATE * STEP_S):
            u = rng.random()
            old_fails = u < 0.20 * factor
            if at < 0:
                engine.count_results(origin, verdict(old_fails, "a"), clock.now)
                continue
            own = verdict(u < 0.30 * factor, "b")
            engine.count_results(origin, own, clock.now)
            if previous is not None and rng.random() < share:
                engine.count_results(origin, verdict(old_fails, previous), clock.now, paired=own)
        sent.extend(engine.evaluate())
    return sent


@functools.cache
def _before() -> tuple[str, float]:
    """The hours before the change (revision "a" alone), replayed once: the rule's state
    as the state file holds it, and the clock at the change."""
    clock = Clock()
    engine = engine_for(clock, "before")
    run(engine, clock, -BEFORE_S, 0.0)
    return json.dumps(engine.snapshot()["before"]), clock.now


def changing(name: str) -> tuple[AlertEngine, Clock]:
    """An engine whose rule is named `name`, at the change, with the hours before it
    behind it (restored: they are the same stream in every test)."""
    saved, now = _before()
    clock = Clock()
    clock.now = now
    engine = engine_for(clock, name)
    engine.restore({name: json.loads(saved)})
    return engine, clock


def state_of(engine: AlertEngine) -> RegressionState:
    state: RegressionState = next(iter(engine._entries.values())).state
    return state


def firing(sent: list[Alert]) -> list[Alert]:
    return [a for a in sent if a.status == "firing"]


def test_a_doubling_minutes_after_a_change_pages_on_paired_verdicts() -> None:
    """The service fails twice as much five minutes after the new revision went live: the
    offset measured on the records both scored stays near +0.10, so the doubling pages;
    with no previous revision scoring, the rule judges on the new revision's interim level
    (its first minutes and what followed), which the doubling also rises above."""
    dual, clock = changing("dual")
    alone, alone_clock = changing("alone")
    change_at = clock.now
    sent = firing(run(dual, clock, 0.0, 3 * 3600.0, rise_from_s=300.0))
    alone_sent = firing(run(alone, alone_clock, 0.0, 3 * 3600.0, rise_from_s=300.0, previous=None))
    assert sent, "the doubling was taken for the evaluator's"
    assert sent[0].starts_at.timestamp() - change_at <= 1800.0
    # Against the new revision's healthy level (0.30), not the doubled one (0.60).
    assert 0.25 <= float(sent[0].annotations["baseline_defect_rate"]) <= 0.40
    assert alone_sent, "the doubling was taken for the evaluator's"
    assert float(alone_sent[0].annotations["baseline_defect_rate"]) < 0.45


def test_a_doubling_three_hours_after_a_change_pages_on_the_translated_level() -> None:
    engine, clock = changing("doubling_after")
    assert firing(run(engine, clock, 0.0, 3 * 3600.0)) == []
    change_at = clock.now - 3 * 3600.0
    sent = firing(run(engine, clock, 3 * 3600.0, 5 * 3600.0, rise_from_s=3 * 3600.0))
    assert sent, "the doubling three hours after the change did not page within two hours"
    assert sent[0].starts_at.timestamp() - change_at - 3 * 3600.0 <= 1800.0
    assert float(sent[0].annotations["baseline_defect_rate"]) == pytest.approx(0.30, abs=0.03)


def test_verdicts_of_a_revision_the_history_was_not_learned_with_are_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`previous` names the old judge, but the history was learned under another (the
    monitor's own release changed too, which no config brings back): its verdicts say
    nothing of the history's level, so they are left out, and the log says why."""
    engine, clock = changing("other_previous")
    with caplog.at_level(logging.WARNING, logger="monitor.alerts.kinds.regression"):
        run(engine, clock, 0.0, 600.0, previous="c")
    change = state_of(engine).baseline.changeover
    assert change is not None and change.replaced == "a"
    assert change.overlap.paired == [0.0, 0.0, 0.0]
    assert "the previous revision c scores records again" in caplog.text
    assert "learned with a" in caplog.text


def test_paired_verdicts_under_way_survive_the_state_file_and_an_older_file_reads() -> None:
    engine, clock = changing("saved")
    run(engine, clock, 0.0, 600.0)
    change = state_of(engine).baseline.changeover
    assert change is not None and change.overlap.paired[0] > 0
    saved = engine.snapshot()
    again = engine_for(clock, "saved")
    again.restore(saved)
    assert again.snapshot() == saved
    assert state_of(again).baseline.changeover == change
    # A version-3 state file from before paired verdicts were kept: none, and no revision
    # replaced known (the previous revision's verdicts are then left out).
    older = saved["saved"]["services"]["shop"][""]["state"]
    older["changeover"] = older["changeover"][:24]
    del older["replaced"]
    UPGRADES[3](saved)
    third = engine_for(clock, "saved")
    third.restore(saved)
    restored = state_of(third).baseline.changeover
    assert restored is not None
    assert restored.overlap.paired == [0.0, 0.0, 0.0] and restored.replaced is None


def test_backtest_replays_the_previous_revisions_verdicts_of_verdict_rows(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A verdict row of one verdict carries the previous revision's on the same record
    (`previous`), as the production streams write them: the replay measures the offset on
    them (joined with the new revision's own hours once those hold enough); a row of
    counts, or a `previous` of another shape, is refused naming why."""
    spec = StreamSpec(
        rate=1.0, days=0.5, changes=(Change("revision", 0.35, 0.30),), previous_share=0.5
    )
    config = Config.model_validate(
        {"alerts": {"rules": [{"name": "replayed", "evaluator": EVALUATOR, "baseline": {}}]}}
    )
    replay = Backtest(config)
    with caplog.at_level(logging.INFO, logger="monitor.alerts.kinds.regression_expectation"):
        assert [e for e in replay.run(stream(spec)) if e.status == "firing"] == []
    state: RegressionState = next(iter(replay.engine._entries.values())).state
    change = state.baseline.changeover
    if change is not None:
        assert change.overlap.paired[0] > 5000
        assert change.applied == pytest.approx(0.10, abs=0.01)
    else:
        found = re.search(r"reads ([+-][0-9.]+) .*\((\d+) records scored by both", caplog.text)
        assert found is not None, caplog.text
        assert float(found[1]) == pytest.approx(0.10, abs=0.01)
        assert int(found[2]) > 5000
    origin = {"time": START, "service": "s", "evaluator": EVALUATOR}
    with pytest.raises(ValueError, match="previous: only on a row of one verdict"):
        Row.of({**origin, "passes": 3, "fails": 1, "previous": {"outcome": "pass"}})
    with pytest.raises(ValueError, match="previous: expected"):
        Row.of({**origin, "outcome": "pass", "previous": {"outcome": "maybe"}})
    row = Row.of({**origin, "outcome": "pass", "previous": {"revision": "r1", "outcome": "fail"}})
    assert row.previous == ("r1", True)


def test_a_failure_counting_the_shadow_verdicts_counts_the_own_ones_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A scripted fault in counting a next revision's verdicts in shadow: `emit` does not
    raise (the evaluation stage would retry the whole call and count the record's own
    verdicts again); the loss is logged and counted."""
    clock = Clock()
    clock.now = START
    telemetry = create_telemetry()
    rule = RegressionRule(
        name="paired_fault",
        evaluator=EVALUATOR,
        baseline=AlertBaseline(season="none", window="6h"),
        false_page_every="7d",
    )
    engine = AlertEngine([rule], telemetry, evaluation_interval_s=STEP_S, clock=clock)
    counting = engine._counting  # the part that counts what `emit` is handed

    def count_shadow(*args: object, **kwargs: object) -> None:
        raise RuntimeError("scripted fault")

    monkeypatch.setattr(counting, "count_shadow", count_shadow)
    with caplog.at_level(logging.ERROR):
        engine.emit([Evaluated(record(), verdict(True, "b"), shadow=verdict(False, "c"))])
    engine.evaluate()
    own = telemetry.registry.get_sample_value(
        "rag_monitor_alert_samples",
        {"rule": "paired_fault", "service": "shop", "window": "current"},
    )
    assert own == 1
    dropped = telemetry.registry.get_sample_value(
        "rag_monitor_dropped_total", {"stage": "alerts", "reason": "paired_error"}
    )
    assert dropped == 1
    assert "were not paired" in caplog.text
