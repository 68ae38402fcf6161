"""The revisions an entry replaced (`monitor.alerts.entries.Entries`) are kept in the state
file: after a restart, a replaced revision's late verdicts are still left out while the
new one reports, and alone for a window they are still a rollback, as without the
restart. A file saved before they were kept loads."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.state import StateFile
from monitor.component import Evaluated
from monitor.config import AlertBaseline, RegressionRule
from monitor.records import RagRecord
from monitor.telemetry import Telemetry, create_telemetry
from tests.alerts.test_alerts import Clock
from tests.alerts.test_alerts_production import _verdict

RULE = RegressionRule(
    name="regression", evaluator="local_groundedness", window="60s", baseline=AlertBaseline()
)
RECORD = RagRecord(request_id="r", service="shop", response="x")


def _engine(path: Path, clock: Clock) -> tuple[AlertEngine, Telemetry]:
    t = create_telemetry()
    engine = AlertEngine(
        [RULE], t, evaluation_interval_s=15, clock=clock, state_file=StateFile(str(path), t)
    )
    return engine, t


def _send(engine: AlertEngine, clock: Clock, revision: str, seconds: int) -> None:
    for i in range(seconds):
        clock.now += 1
        engine.emit([Evaluated(RECORD, _verdict(i % 5 > 0, revision))])


def _revision(engine: AlertEngine) -> str | None:
    (entry,) = engine._entries.values()
    return entry.revision


def _started(t: Telemetry) -> float:
    value = t.registry.get_sample_value(
        "rag_monitor_alert_baselines_started_total", {"rule": RULE.name, "reason": "revision"}
    )
    return value or 0.0


async def _changeover(path: Path, *, restart: bool) -> list[Any]:
    """Revision "a" for two minutes, then "b" (it replaces "a") for half a minute; with
    `restart` the engine stops and starts again from its state file; then late "a"
    verdicts for half a minute, and "a" alone for two more windows. Returns the entry's revision and
    the baselines started since the (re)start after each phase."""
    clock = Clock()
    engine, t = _engine(path, clock)
    await engine.start()
    _send(engine, clock, "a", 120)
    _send(engine, clock, "b", 30)
    if restart:
        await engine.shutdown(1.0)
        engine, t = _engine(path, clock)
        await engine.start()
        started = 0.0
    else:
        started = _started(t)
    seen: list[Any] = [_revision(engine)]
    _send(engine, clock, "a", 30)
    seen += [_revision(engine), _started(t) - started]
    _send(engine, clock, "a", 120)
    seen += [_revision(engine), _started(t) - started]
    await engine.shutdown(1.0)
    return seen


async def test_a_replaced_revision_is_still_left_out_after_a_restart(tmp_path: Path) -> None:
    kept = await _changeover(tmp_path / "kept.json", restart=False)
    restarted = await _changeover(tmp_path / "restarted.json", restart=True)
    # Late "a" verdicts leave "b" in place; "a" alone for two windows is a rollback.
    assert kept == ["b", "b", 0.0, "a", 1.0]
    assert restarted == kept


async def _saved(path: Path, clock: Clock) -> dict[str, Any]:
    """The state file after "a" for two minutes and then "b", and its entry."""
    engine, _ = _engine(path, clock)
    await engine.start()
    _send(engine, clock, "a", 120)
    _send(engine, clock, "b", 30)
    await engine.shutdown(1.0)
    data: dict[str, Any] = json.loads(await asyncio.to_thread(path.read_text))
    return data


def _entry(data: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = data["rules"][RULE.name]["services"]["shop"][""]
    return entry


async def test_a_state_file_without_the_replaced_revisions_loads(tmp_path: Path) -> None:
    """Version 3 at first kept no replaced revisions: its files load; one of this version
    without them is malformed."""
    path, clock = tmp_path / "state.json", Clock()
    data = await _saved(path, clock)
    assert _entry(data).pop("replaced") == [["a"], clock.now]
    data["version"] = 3
    path.write_text(json.dumps(data))
    engine, t = _engine(path, clock)
    await engine.start()
    assert _revision(engine) == "b"
    dropped = t.registry.get_sample_value(
        "rag_monitor_alert_state_entries_dropped_total", {"when": "load"}
    )
    assert not dropped
    await engine.shutdown(1.0)


@pytest.mark.parametrize("malformed", [[[7], 0.0], "absent"], ids=["a number", "absent"])
async def test_a_malformed_replaced_list_drops_its_entry_alone(
    tmp_path: Path, malformed: Any
) -> None:
    path, clock = tmp_path / "state.json", Clock()
    data = await _saved(path, clock)
    if malformed == "absent":
        del _entry(data)["replaced"]
    else:
        _entry(data)["replaced"] = malformed
    path.write_text(json.dumps(data))
    engine, t = _engine(path, clock)
    await engine.start()
    assert list(engine._entries.values()) == []
    dropped = t.registry.get_sample_value(
        "rag_monitor_alert_state_entries_dropped_total", {"when": "load"}
    )
    assert dropped == 1.0
    await engine.shutdown(1.0)


async def test_a_replaced_revisions_time_later_than_now_is_clamped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A hand-edited file (or a wall clock stepped back) says "b" last reported an hour
    from now: clamped to now, logged, so "a" alone for two windows is still a rollback
    within them, not an hour later."""
    path, clock = tmp_path / "state.json", Clock()
    data = await _saved(path, clock)
    _entry(data)["replaced"] = [["a"], clock.now + 3600.0]
    path.write_text(json.dumps(data))
    engine, t = _engine(path, clock)
    with caplog.at_level(logging.WARNING, logger="monitor.alerts.entries"):
        await engine.start()
    assert "(started_at, last_sent, where or replaced) clamped to now" in caplog.text
    _send(engine, clock, "a", 150)
    assert _revision(engine) == "a" and _started(t) == 1.0
    await engine.shutdown(1.0)
