"""Hostile audit state files (`<alerts.state_file>.audit`): the audit starts every time,
each bad part is dropped alone and counted, a good file is restored whole, and the writer
keeps the file within what the reader takes."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from monitor.alerts.state import MAX_BYTES, StateFile
from monitor.audit import saved
from monitor.audit.kept import MAX_FILE_BYTES, KeptState, Pair
from monitor.audit.saved import Awaiting, OpenTrace, OpenTraces, Pending
from monitor.audit.sink import BUCKETS
from monitor.evidence.ppi import Trace
from monitor.records.where import DIMENSIONS
from monitor.telemetry import create_telemetry
from tests.audit.test_audit_restart import COUNTS, FORMAT, _judged, _saved_with, _sink
from tests.audit.test_audit_sink import DETECTOR, JUDGE, Clock, _count

pytestmark = pytest.mark.asyncio


async def _start(path: Path, clock: Clock) -> tuple[dict[str, Any], Any, Any]:
    t = create_telemetry()
    sink = _sink(t, clock, path)
    await sink.start()  # never raises, whatever the file holds
    page = sink.page()
    await sink._ticker.stop()
    return page, t, sink


async def _unedited(tmp_path: Path, clock: Clock) -> dict[str, Any]:
    path = tmp_path / "unedited.audit"
    _saved_with(path, clock, lambda body: None)
    page, _, _ = await _start(path, clock)
    assert page["services"]["shop"]["estimate"] is not None  # a good file, restored whole
    return page


def _shop_bucket(body: dict[str, Any]) -> str:
    return str(next(iter(body["windows"]["shop"])))


def _huge_count(body: dict[str, Any]) -> None:
    bucket = _shop_bucket(body)
    body["windows"]["cart"] = {bucket: json.loads(json.dumps(body["windows"]["shop"][bucket]))}
    body["windows"]["cart"][bucket]["total"][0] = int("9" * 400)


def _far_future(body: dict[str, Any]) -> None:
    bucket = _shop_bucket(body)
    body["windows"]["shop"][str(int(bucket) + 10**9)] = body["windows"]["shop"][bucket]


def _huge_name(body: dict[str, Any]) -> None:
    bucket = _shop_bucket(body)
    body["windows"]["x" * 10_000_000] = {bucket: body["windows"]["shop"][bucket]}


def _wrong_types(body: dict[str, Any]) -> None:
    bucket = _shop_bucket(body)
    body["windows"]["cart"] = [1, 2]
    body["windows"]["shop"]["not a number"] = body["windows"]["shop"][bucket]
    body["pending"] = [["r", "shop", 1e300, True, [""] * len(DIMENSIONS), "t"], {"a": 1}]
    body["traces"] = [["shop", "t", int(bucket), [[True, "", "", "1", 0, 0]]], "x", None]


def _inconsistent(body: dict[str, Any]) -> None:
    bucket = _shop_bucket(body)
    total = [1, 5] + [0] * (COUNTS - 2)  # more unaudited defects than unaudited records
    body["windows"]["cart"] = {bucket: {"total": total, "slices": []}}
    where = [""] * len(DIMENSIONS)
    body["pending"] = [["r" * 100_000, "shop", int(bucket), True, where, "t"]]


UNSHOWN = "\u0000\n\u202e<b>x</b>"  # controls and a bidi override: no live value holds them


def _unshown_values(body: dict[str, Any]) -> None:
    """A slice, an awaiting record's dimension and an open trace's sums, each under a
    value no live record gives (a live one has such characters replaced)."""
    bucket = _shop_bucket(body)
    cart = json.loads(json.dumps(body["windows"]["shop"][bucket]))
    cart["slices"] = [["model", UNSHOWN, cart["total"]]]
    body["windows"]["cart"] = {bucket: cart}
    where = [""] * len(DIMENSIONS)
    where[DIMENSIONS.index("model")] = UNSHOWN
    body["pending"] = [["r", "shop", int(bucket), True, where, "t"]]
    body["traces"] = [["shop", "t", int(bucket), [[True, "model", "m\u200b2", 1, 0, 0]]]]


HOSTILE = {
    "label values no live record gives": (
        _unshown_values,
        {"window": 1, "pending": 1, "traces": 1},
    ),
    "a 400-digit count": (_huge_count, {"window": 1}),
    "a bucket 10**9 ahead": (_far_future, {"window": 1}),
    "a 10 MB service name": (_huge_name, {"window": 1}),
    "wrong types": (_wrong_types, {"window": 2, "pending": 2, "traces": 3}),
    "inconsistent counts, a huge id": (_inconsistent, {"window": 1, "pending": 1}),
}


@pytest.mark.parametrize("case", list(HOSTILE))
async def test_a_hostile_part_is_dropped_alone_and_counted(tmp_path: Path, case: str) -> None:
    """Each file holds the good window of `shop` and a bad part: the audit starts, `shop`
    is restored as the unedited file restores it, and each bad part is counted."""
    clock = Clock()
    good = await _unedited(tmp_path, clock)
    edit, dropped = HOSTILE[case]
    path = tmp_path / "alerts.state.audit"
    _saved_with(path, clock, edit)
    page, t, _ = await _start(path, clock)
    assert page["services"] == good["services"]
    for part, count in dropped.items():
        assert _count(t, "audit_state_dropped", part=part) == count, part
    assert _count(t, "audit_state_loads", outcome="loaded") == 1
    metrics = t.registry  # no series carries a name the file made up
    names = {s.labels.get("service") for m in metrics.collect() for s in m.samples}
    assert names <= {None, "shop"}


async def test_a_truncated_file_is_set_aside_and_the_audit_starts_empty(tmp_path: Path) -> None:
    clock, path = Clock(), tmp_path / "alerts.state.audit"
    _saved_with(path, clock, lambda body: None)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    page, t, sink = await _start(path, clock)
    assert page["services"] == {}
    assert _count(t, "audit_state_loads", outcome="corrupt") == 1
    (aside,) = path.parent.glob(f"{path.name}.corrupt-*")
    assert aside.read_bytes() == whole[: len(whole) // 2]  # kept as it was
    _judged(sink)
    await sink.shutdown(5)
    assert json.loads(path.read_text())["format"] == saved.FORMAT


async def test_a_file_that_reads_but_cannot_be_restored_is_never_written_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file of the form before per-trace sums (version 1) whose slices are a number: its
    upgrade fails where no check of the parts runs. The start goes on empty, counted, and
    the file stays as it was."""
    clock, path = Clock(), tmp_path / "alerts.state.audit"
    bucket = str(int(clock() // (3600 / BUCKETS)))
    audit = {
        "evaluator": DETECTOR,
        "reference": JUDGE,
        "windows": {"shop": {bucket: {"total": [0] * 6, "slices": 5}}},
        "pending": [],
    }
    body = {"format": saved.FORMAT, "version": 1, "saved_at": clock(), saved.KEY: audit}
    path.write_text(json.dumps(body))
    before = path.read_bytes()
    t = create_telemetry()
    sink = _sink(t, clock, path)
    with caplog.at_level(logging.ERROR):
        await sink.start()
    _judged(sink)
    await sink.shutdown(5)
    assert path.read_bytes() == before
    assert _count(t, "audit_state_dropped", part="file") == 1
    assert "not written over" in caplog.text


async def test_the_writer_keeps_the_file_within_what_the_reader_takes(tmp_path: Path) -> None:
    """At a bound scaled down (`max_bytes`), the oldest open traces, then the oldest
    awaiting records, are left out (counted); the file loads, holding the newest."""
    assert MAX_FILE_BYTES < MAX_BYTES
    clock, path = Clock(), tmp_path / "alerts.state.audit"
    t = create_telemetry()
    bucket = int(clock() // (3600 / BUCKETS))
    where = tuple([""] * len(DIMENSIONS))
    pending = Awaiting()
    for i in range(3000):
        waiting = Pending("shop", bucket, True, where, f"t{i}")
        pending.put(f"{i:08d}-2f1e-4c5b-9a7d-request-id", waiting, 3000)
    traces = OpenTraces()
    for i in range(3000):
        opened = OpenTrace(bucket, {(True, "", ""): Trace(2, 1, 1)})
        traces.put(("shop", f"{i:032x}"), opened, 3000)
    kept = KeptState(
        StateFile(str(path), t, FORMAT),
        t,
        Pair(DETECTOR, JUDGE),
        max_pending=10_000,
        service_name=t.service_cap,
        max_bytes=200_000,
    )
    await kept.save(clock(), {}, pending, traces)
    assert path.stat().st_size <= 200_000
    assert _count(t, "audit_state_dropped", part="traces_over_size") == 3000
    left_out = _count(t, "audit_state_dropped", part="pending_over_size")
    assert 0 < left_out < 3000
    restored = await kept.restore(clock(), 3600, bucket - BUCKETS + 1, bucket)
    assert list(restored.pending) == list(pending)[int(left_out) :]  # the newest, in order
    assert restored.dropped == {}


async def test_entries_arriving_during_a_save_are_not_counted_over_size(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A state far below the bound, with open traces and awaiting records arriving while the
    save runs (between its slices): nothing is left out, nothing counted or logged as over
    size; what arrived is the next save's."""
    clock, path = Clock(), tmp_path / "alerts.state.audit"
    t = create_telemetry()
    bucket = int(clock() // (3600 / BUCKETS))
    where = tuple([""] * len(DIMENSIONS))
    pending, traces = Awaiting(), OpenTraces()
    for i in range(200):
        pending.put(f"p{i}", Pending("shop", bucket, True, where, f"t{i}"), 10_000)
        traces.put(
            ("shop", f"{i:032x}"), OpenTrace(bucket, {(True, "", ""): Trace(2, 1, 1)}), 10_000
        )
    kept = KeptState(
        StateFile(str(path), t, FORMAT),
        t,
        Pair(DETECTOR, JUDGE),
        max_pending=10_000,
        service_name=t.service_cap,
        max_bytes=MAX_FILE_BYTES,
    )

    async def arriving() -> None:
        for n in range(40):  # a burst at each of the save's returns to the loop
            for i in range(50):
                pending.put(f"late{n}-{i}", Pending("shop", bucket, True, where, "x"), 10_000)
                key = ("shop", f"late{n}-{i}")
                traces.put(key, OpenTrace(bucket, {(True, "", ""): Trace(2, 1, 1)}), 10_000)
            await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR):
        await asyncio.gather(kept.save(clock(), {}, pending, traces), arriving())
    assert len(traces) > 200 and len(pending) > 200  # they did arrive during the save
    assert path.stat().st_size < MAX_FILE_BYTES // 10
    assert _count(t, "audit_state_dropped", part="traces_over_size") == 0
    assert _count(t, "audit_state_dropped", part="pending_over_size") == 0
    assert "left out of the file" not in caplog.text
