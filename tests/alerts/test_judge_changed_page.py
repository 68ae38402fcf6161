"""The anchor check's page goes through the alert engine (`monitor.alerts.kinds.judge_changed`):
fired by a check that found the judge changed, re-sent while it fires, kept across a restart
by the state file, resolved by the next check whose verdicts held, in the kit's severities.
An injected clock; the engine's evaluations are called as its loop calls them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.rule import rules_of
from monitor.alerts.state import StateFile
from monitor.component import Alert
from monitor.config import Config, JudgeChangedRule
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock

JUDGE = "fact_check"
RULE = JudgeChangedRule(every="1h", judges=(JUDGE, "other_judge"))
FIGURES = {
    "anchors": 40,
    "accuracy_before": 1.0,
    "accuracy_now": 0.5,
    "failed_before": 0.5,
    "failed_now": 0.0,
    "right_then_wrong": 20,
    "wrong_then_right": 0,
    "failed_then_passed": 20,
    "passed_then_failed": 0,
    "p_value": 3.8e-6,
}


def _engine(path: Path, clock: Clock) -> AlertEngine:
    t = create_telemetry()
    state = StateFile(str(path), t)
    engine = AlertEngine([RULE], t, clock=clock, state_file=state, resend_interval_s=60)
    # What `start` does before its loop: the state file, read and restored.
    engine.restore(state.load(clock(), RULE.memory_s), release=True)
    return engine


def _one(alerts: list[Alert]) -> Alert:
    assert len(alerts) == 1, alerts
    return alerts[0]


@pytest.mark.asyncio
async def test_the_judge_changed_page_resends_survives_a_restart_and_resolves(
    tmp_path: Path,
) -> None:
    clock, path = Clock(), tmp_path / "alerts.json"
    engine = _engine(path, clock)
    # A check that compared the judge and found it held pages nothing.
    engine.report(JUDGE, None)
    assert engine.evaluate() == []
    engine.report(JUDGE, FIGURES)
    page = _one(engine.evaluate())
    assert page.status == "firing"
    assert page.labels == {
        "alertname": "RagMonitorJudgeChanged",
        "evaluator": JUDGE,
        "severity": "ticket",
        "generator": "rag-monitor",
    }
    assert "anchor accuracy 100% → 50%" in page.annotations["summary"]
    assert json.loads(page.annotations["anchor_figures"])["right_then_wrong"] == 20
    started = page.starts_at
    # Re-sent every resend interval while it fires, as every rule's page.
    clock.now += 30
    assert engine.evaluate() == []
    clock.now += 31
    again = _one(engine.evaluate())
    assert (again.status, again.starts_at, again.labels) == ("firing", started, page.labels)
    assert engine.firing() == [("RagMonitorJudgeChanged", JUDGE)]
    await engine.shutdown(1.0)  # saves the state file

    # A new process: the page is restored firing and re-sent, the same alert.
    clock.now += 120
    engine = _engine(path, clock)
    assert engine.firing() == [("RagMonitorJudgeChanged", JUDGE)]
    restored = _one(engine.evaluate())
    assert (restored.status, restored.starts_at, restored.labels) == (
        "firing",
        started,
        page.labels,
    )
    # The next check whose verdicts held resolves it.
    clock.now += 3600
    engine.report(JUDGE, None)
    resolved = _one(engine.evaluate())
    assert (resolved.status, resolved.starts_at, resolved.labels) == (
        "resolved",
        started,
        page.labels,
    )
    assert "Resolved: its verdicts held at the next check." in resolved.annotations["description"]
    assert engine.firing() == []
    clock.now += 3600
    assert engine.evaluate() == []


@pytest.mark.asyncio
async def test_a_page_whose_check_stopped_resolves_after_three_intervals(tmp_path: Path) -> None:
    clock = Clock()
    engine = _engine(tmp_path / "alerts.json", clock)
    engine.report(JUDGE, FIGURES)
    assert _one(engine.evaluate()).status == "firing"
    clock.now += 3 * 3600
    assert _one(engine.evaluate()).status == "firing"  # re-sent: three intervals not passed
    clock.now += 60
    resolved = _one(engine.evaluate())
    assert resolved.status == "resolved"
    assert (
        "no anchor check compared the judge for more than 3h" in resolved.annotations["description"]
    )


@pytest.mark.asyncio
async def test_a_saved_page_of_a_judge_no_longer_configured_is_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock, path = Clock(), tmp_path / "alerts.json"
    engine = _engine(path, clock)
    engine.report(JUDGE, FIGURES)
    engine.report("other_judge", FIGURES)
    assert len(engine.evaluate()) == 2
    await engine.shutdown(1.0)
    saved = json.loads(path.read_text())
    services = saved["rules"]["RagMonitorJudgeChanged"]["services"]
    services["not_a_judge_of_the_config"] = services.pop("other_judge")
    services[JUDGE][""]["state"]["figures"] = {"invented": 1.0}
    path.write_text(json.dumps(saved))
    with caplog.at_level(logging.WARNING):
        engine = _engine(path, clock)
    assert engine.firing() == []
    assert "pages of RagMonitorJudgeChanged on subjects no longer reported on left out" in (
        caplog.text
    )
    assert "malformed" in caplog.text  # the invented figure drops that page alone


def test_the_rule_is_made_with_the_anchor_check_only() -> None:
    base = {"evaluators": [{"name": "local_groundedness"}, {"name": JUDGE}]}
    off = Config.model_validate(base)
    assert rules_of(off) == list(off.alerts.rules)
    on = Config.model_validate({**base, "audit": {"anchors": {"enabled": True, "every": "2h"}}})
    *users, rule = rules_of(on)
    assert users == list(on.alerts.rules)
    assert isinstance(rule, JudgeChangedRule)
    assert (rule.every, rule.judges, rule.severity) == (
        "2h",
        ("local_groundedness", JUDGE),
        "ticket",
    )


@pytest.mark.asyncio
async def test_a_firing_page_saved_with_the_placeholder_evaluators_fingerprint_is_restored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A state file whose judge-changed rule's fingerprint names the placeholder evaluator
    (`audit.anchors||60.0`, as written while the rule had one) holds the same rule: its
    firing page is restored firing and re-sent, not dropped as "the rule changed"; another
    evaluator in its place is still a changed rule."""
    clock, path = Clock(), tmp_path / "alerts.json"
    engine = _engine(path, clock)
    engine.report(JUDGE, FIGURES)
    started = _one(engine.evaluate()).starts_at
    await engine.shutdown(1.0)
    saved = json.loads(path.read_text())
    rule = saved["rules"]["RagMonitorJudgeChanged"]
    assert rule["fingerprint"] == "||60.0"
    rule["fingerprint"] = "audit.anchors||60.0"
    path.write_text(json.dumps(saved))
    clock.now += 120
    with caplog.at_level(logging.WARNING):
        engine = _engine(path, clock)
    assert "the rule changed" not in caplog.text
    assert engine.firing() == [("RagMonitorJudgeChanged", JUDGE)]
    restored = _one(engine.evaluate())
    assert (restored.status, restored.starts_at) == ("firing", started)

    rule["fingerprint"] = "fact_check||60.0"
    path.write_text(json.dumps(saved))
    with caplog.at_level(logging.WARNING):
        engine = _engine(path, clock)
    assert engine.firing() == []
    assert "alert state of rule RagMonitorJudgeChanged left out: the rule changed" in caplog.text
