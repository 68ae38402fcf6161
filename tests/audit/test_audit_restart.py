"""The audit window across restarts (`monitor.audit.saved`): the estimate and the records
awaiting a label are kept in `<alerts.state_file>.audit`; a corrupt file is moved aside and
counted, a part that cannot be restored is left out alone and counted, and another
evaluator's or reference's counts are not restored."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from monitor.alerts.state import StateFile, StateFormat
from monitor.audit import saved
from monitor.audit.sink import BUCKETS, AuditSink
from monitor.component import Evaluated
from monitor.config._audit import Audit, LabelFeed
from monitor.records.where import DIMENSIONS
from monitor.telemetry import Telemetry, create_telemetry
from tests.audit.test_audit_sink import (
    DETECTOR,
    JUDGE,
    SHARE,
    Clock,
    _audited,
    _count,
    _gauge,
    _record,
    _results,
    _share,
)

FORMAT = StateFormat(
    "audit", saved.FORMAT, saved.VERSION, saved.KEY, saved.counters, saved.UPGRADES
)
SHOP = {"service": "shop", "evaluator": DETECTOR}
COUNTS = saved.TALLY_COUNTS


def _sink(t: Telemetry, clock: Clock, path: Path, reference: str = JUDGE) -> AuditSink:
    section = Audit(
        evaluator=DETECTOR,
        reference=reference,
        share=SHARE,
        min_audited=2,
        window="1h",
        labels=LabelFeed(http=reference == "labels"),
    )
    state = StateFile(str(path), t, FORMAT)
    return AuditSink(section, t, lambda r: _share(r, 1.0), state=state, clock=clock)


def _judged(sink: AuditSink, first: int = 0) -> None:
    sink.emit(
        [
            Evaluated(_record(i, "shop"), _results(i % 4 == 0, _audited(i) and i % 3 == 0))
            for i in range(first, first + 400)
        ]
    )


@pytest.mark.asyncio
async def test_a_restart_keeps_the_estimate(tmp_path: Path) -> None:
    path, clock = tmp_path / "alerts.state.audit", Clock()
    before = _sink(create_telemetry(), clock, path)
    await before.start()
    _judged(before)
    page = before.page()
    await before.shutdown(5)
    assert page["services"]["shop"]["estimate"] is not None
    clock.now += 60
    t = create_telemetry()
    after = _sink(t, clock, path)
    await after.start()
    try:
        assert after.page()["services"] == page["services"]
        assert _gauge(t, "defect_rate_estimate", **SHOP, bound="estimate") == pytest.approx(
            page["services"]["shop"]["estimate"]["estimate"]
        )
        assert _count(t, "audit_state_loads", outcome="loaded") == 1
        # The restored window goes on counting, and slides as before.
        _judged(after, 400)
        assert after.page()["services"]["shop"]["evaluated"] == 800
        clock.now += 3600 + 3600 / BUCKETS
        after.refresh()
        assert after.page()["services"] == {}
    finally:
        await after.shutdown(5)


@pytest.mark.asyncio
async def test_a_label_for_a_record_evaluated_before_the_restart_joins(tmp_path: Path) -> None:
    path, clock = tmp_path / "alerts.state.audit", Clock()
    before = _sink(create_telemetry(), clock, path, reference="labels")
    await before.start()
    before.emit([Evaluated(_record(i), _results(i % 2 == 0, "absent")) for i in range(100)])
    awaiting = before.page()["awaiting_labels"]
    await before.shutdown(5)
    assert awaiting == [f"req-{i}" for i in range(100) if _audited(i)]
    t = create_telemetry()
    after = _sink(t, clock, path, reference="labels")
    await after.start()
    try:
        assert after.page()["awaiting_labels"] == awaiting
        assert _gauge(t, "audit_pending_labels") == len(awaiting)
        for request_id in awaiting:
            assert after.label(request_id, True, "http") is None
        assert after.page()["services"]["shop"]["audited"] == len(awaiting)
    finally:
        await after.shutdown(5)


@pytest.mark.asyncio
async def test_a_corrupt_audit_state_is_moved_aside_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "alerts.state.audit"
    path.write_text('{"format": "rag-monitor-audit-state", "vers')
    t = create_telemetry()
    sink = _sink(t, Clock(), path)
    await sink.start()
    try:
        assert sink.page()["services"] == {}
        assert _count(t, "audit_state_loads", outcome="corrupt") == 1
        _judged(sink)
    finally:
        await sink.shutdown(5)
    _assert_set_aside_and_saved_anew(path)


def _assert_set_aside_and_saved_anew(path: Path) -> None:
    (aside,) = path.parent.glob(f"{path.name}.corrupt-*")
    assert aside.read_text().endswith('"vers')  # kept as it was
    assert json.loads(path.read_text())["format"] == saved.FORMAT


def _saved_with(path: Path, clock: Clock, edit: Any) -> None:
    """A state file written by a sink, then edited by `edit(body)`."""
    sink = _sink(create_telemetry(), clock, path)
    _judged(sink)
    body = saved.encode(DETECTOR, JUDGE, sink._windows, sink._pending, sink._traces)
    edit(body)
    StateFile(str(path), create_telemetry(), FORMAT).save(clock(), body)


@pytest.mark.asyncio
async def test_a_part_that_cannot_be_restored_is_left_out_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, clock = tmp_path / "alerts.state.audit", Clock()

    def two_services_one_broken(body: dict[str, Any]) -> None:
        windows = body["windows"]
        bucket = next(iter(windows["shop"]))  # in the window: read, and refused
        windows["cart"] = {bucket: {"total": [1, -1] + [0] * (COUNTS - 2), "slices": []}}

    _saved_with(path, clock, two_services_one_broken)
    t = create_telemetry()
    sink = _sink(t, clock, path)
    with caplog.at_level(logging.ERROR, logger="monitor.audit.sink"):
        await sink.start()
    try:
        assert sorted(sink.page()["services"]) == ["shop"]
        assert _count(t, "audit_state_dropped", part="window") == 1
        assert "1 window entries could not be restored" in caplog.text
    finally:
        await sink.shutdown(5)


@pytest.mark.asyncio
async def test_another_evaluator_s_counts_are_not_restored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, clock = tmp_path / "alerts.state.audit", Clock()
    _saved_with(path, clock, lambda body: body.update(reference="fact_check"))
    sink = _sink(create_telemetry(), clock, path)
    with caplog.at_level(logging.WARNING, logger="monitor.audit.sink"):
        await sink.start()
    try:
        assert sink.page()["services"] == {}
        assert "audit state not restored: it counted" in caplog.text
    finally:
        await sink.shutdown(5)


def test_malformed_windows_and_pending_entries_are_left_out_alone() -> None:
    body = {
        "evaluator": DETECTOR,
        "reference": "labels",
        "windows": {},
        "pending": [
            ["req-1", "shop", 10, True, [""] * len(DIMENSIONS), "trace-1"],
            ["req-2", "shop", "10", True, [""] * len(DIMENSIONS), "trace-2"],
            ["req-3", "shop", 10, True, ["only one"], "trace-3"],
            "req-4",
        ],
    }
    body["windows"] = {
        "shop": {
            "10": {
                "total": [5, 1] + [0] * (COUNTS - 2),
                "slices": [["model", "m1", [5, 1] + [0] * (COUNTS - 2)]],
            }
        },
        "no total": {"10": {"slices": []}},
        "not a dict": [1, 2],
        "bad bucket": {"ten": {"total": [0] * COUNTS, "slices": []}},
        "unknown dimension": {
            "10": {"total": [0] * COUNTS, "slices": [["colour", "red", [0] * COUNTS]]}
        },
    }
    restored = saved.decode(body, DETECTOR, "labels", oldest=0, max_pending=10)
    assert list(restored.pending) == ["req-1"]
    assert list(restored.windows) == ["shop"]
    assert restored.windows["shop"][10].slices[("model", "m1")].unaudited == 5
    assert restored.dropped == {"pending": 3, "window": 4}
    # Past the oldest bucket, or beyond max_pending (the oldest first): not restored.
    assert list(saved.decode(body, DETECTOR, "labels", oldest=11, max_pending=10).pending) == []
    assert list(saved.decode(body, DETECTOR, "labels", oldest=0, max_pending=0).pending) == []
