"""A switch back to the revision an entry replaced is said at once (issue 104): its
verdicts are judged by no rule while the newer revision's still come, and until they have
been alone for a window (a rollback, `monitor.alerts.revisions`) nothing said so. Now the
first of them logs a warning naming both revisions, once; the rollback itself logs the
revision change as any switch does."""

from __future__ import annotations

import logging

import pytest

from monitor.alerts import AlertEngine
from monitor.component import Evaluated
from monitor.config import AlertBaseline, RegressionRule
from monitor.records import RagRecord
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock
from tests.alerts.test_alerts_production import _verdict

RULE = RegressionRule(
    name="regression", evaluator="local_groundedness", window="60s", baseline=AlertBaseline()
)
RECORD = RagRecord(request_id="r", service="商店-متجر", response="答案：是。")


def test_a_switch_back_is_logged_at_once_and_the_rollback_as_a_switch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    engine = AlertEngine([RULE], create_telemetry(), evaluation_interval_s=15, clock=clock)

    def send(revision: str, seconds: int) -> None:
        for i in range(seconds):
            clock.now += 1
            engine.emit([Evaluated(RECORD, _verdict(i % 5 > 0, revision))])

    with caplog.at_level(logging.INFO, logger="monitor"):
        send("a", 120)
        send("b", 30)  # the switch: "b" replaces "a"
        switched = [r.getMessage() for r in caplog.records if "is now revision b" in r.getMessage()]
        assert len(switched) == 1
        caplog.clear()
        send("a", 5)  # the switch back: "a" again, "b" seen within the window
    back = [r for r in caplog.records if "arrive again" in r.getMessage()]
    assert len(back) == 1 and back[0].levelno == logging.WARNING  # once, not per verdict
    message = back[0].getMessage()
    assert "revision a arrive again (revision b replaced it)" in message
    assert "商店-متجر" in message and "regression" in message
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="monitor"):
        send("a", 120)  # alone for two windows: the rollback
    (entry,) = engine._entries.values()
    assert entry.revision == "a"
    assert any("is now revision a (was b)" in r.getMessage() for r in caplog.records)
    assert not any("arrive again" in r.getMessage() for r in caplog.records)
