"""The results file sink: whole lines in order, synced before they count as written; a
failing disk is retried (never torn, never skipped), rotation and SIGHUP reopen the file."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.wait import wait_until_async
from monitor.component import Evaluated
from monitor.config import Redaction
from monitor.exporters.results_file import ResultsFileSink
from monitor.records import RagRecord
from monitor.records.redaction import Redactor
from monitor.results import EvalResult
from monitor.telemetry import Telemetry
from tests.conftest import EXAMPLES


def _emit(sink: ResultsFileSink, n: int, first: int = 0) -> list[asyncio.Future[bool]]:
    futures = []
    for i in range(first, first + n):
        # With a time of its own, a record's line has the same length whenever it is written.
        record = RagRecord(request_id=f"r{i}", response="a", timestamp=1_700_000_000.0)
        result = EvalResult(name="e", score=1, normalized=1, passed=True)
        futures.extend(sink.emit([Evaluated(record, {"e": result})]))
    return futures


def _ids(path: Path) -> list[str]:
    """Request ids of the file's lines; every line must be whole JSON."""
    text = path.read_text()
    assert text == "" or text.endswith("\n"), "the file ends mid-line"
    return [json.loads(line)["request_id"] for line in text.splitlines()]


def _value(t: Telemetry, name: str, **labels: str) -> float:
    return t.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0


class FlakyDisk:
    """os.write that runs out of space: while `full`, each write puts part of its bytes in
    the file and then fails with ENOSPC, as a real disk filling mid-write does."""

    def __init__(self) -> None:
        self.full = False
        self.failed = 0

    def __call__(self, fd: int, data: memoryview) -> int:
        if self.full:
            self.failed += 1
            os.write(fd, data[: max(1, len(data) // 2)])
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.write(fd, data)


async def test_lines_are_written_and_flushed_on_shutdown(
    tmp_path: Path, telemetry: Telemetry
) -> None:
    path = tmp_path / "results.jsonl"
    sink = ResultsFileSink(path, telemetry)
    await sink.start()
    _emit(sink, 250)
    await sink.shutdown(10)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["request_id"] for line in lines] == [f"r{i}" for i in range(250)]
    assert lines[0]["results"]["e"]["passed"] is True


async def test_unicode_line_breaks_in_a_value_keep_one_record_per_line(
    tmp_path: Path, telemetry: Telemetry
) -> None:
    """U+0085, U+2028 and U+2029 are legal raw in JSON strings but end a line for
    `str.splitlines()`: the sink escapes them so every reader sees one record per line."""
    breaks = "a\x85b\u2028c\u2029d"
    path = tmp_path / "results.jsonl"
    sink = ResultsFileSink(path, telemetry, include_text=True, include_explanations=True)
    await sink.start()
    for i in range(2):
        record = RagRecord(request_id=f"r{i}{breaks}", query=breaks, response=breaks)
        result = EvalResult(name="e", score=0, normalized=0, passed=False, explanation=breaks)
        sink.emit([Evaluated(record, {"e": result})])
    await sink.shutdown(10)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["request_id"] for line in lines] == [f"r0{breaks}", f"r1{breaks}"]
    assert lines[1]["results"]["e"]["explanation"] == breaks
    assert lines[1]["extracted"]["response"] == breaks


async def test_explanations_are_written_only_when_asked_for_and_then_redacted(
    tmp_path: Path, telemetry: Telemetry
) -> None:
    """An explanation quotes the record's text: by default a line carries none (an error
    still says what went wrong); asked for, it is written redacted."""
    redact = Redactor(Redaction(enabled=True, detectors=["email"]))
    record = RagRecord(request_id="r", response="Write to ann@example.com.")
    results = {
        "g": EvalResult(
            name="g",
            score=0,
            normalized=0,
            passed=False,
            explanation="unsupported: Write to ann@example.com.",
        ),
        "j": EvalResult.failed("j", "timeout: no verdict within 30s"),
    }
    written = {}
    for include in (False, True):
        path = tmp_path / f"results-{include}.jsonl"
        sink = ResultsFileSink(path, telemetry, include_explanations=include, redact=redact)
        await sink.start()
        sink.emit([Evaluated(record, results)])
        await sink.shutdown(10)
        (line,) = [json.loads(text) for text in path.read_text().splitlines()]
        written[include] = {name: r["explanation"] for name, r in line["results"].items()}
        assert line["results"]["j"]["error"] == "timeout: no verdict within 30s"
        assert "ann@example.com" not in path.read_text()
    assert written == {
        False: {"g": None, "j": None},
        True: {"g": "unsupported: Write to [REDACTED:email].", "j": None},
    }


async def test_a_full_disk_is_retried_without_torn_or_lost_lines(
    tmp_path: Path, telemetry: Telemetry
) -> None:
    path = tmp_path / "results.jsonl"
    disk = FlakyDisk()
    sink = ResultsFileSink(path, telemetry, write=disk, retry_s=(0.01, 0.05))
    await sink.start()
    first = _emit(sink, 5)
    await asyncio.gather(*first)
    disk.full = True
    waiting = _emit(sink, 20, first=5)
    await wait_until_async(lambda: disk.failed >= 3, 10, "three failed writes")
    # While the disk is full nothing counts as written, and no fragment stays behind.
    assert not any(f.done() for f in waiting)
    assert _ids(path) == [f"r{i}" for i in range(5)]
    assert _value(telemetry, "results_file_writable") == 0
    assert _value(telemetry, "results_file_write_failures_total") >= 3
    disk.full = False  # room again: every waiting line is written, once, in order
    async with asyncio.timeout(10):
        assert all(await asyncio.gather(*waiting))
    await sink.shutdown(10)
    assert _ids(path) == [f"r{i}" for i in range(25)]
    assert _value(telemetry, "results_file_writable") == 1


class QuotaDisk:
    """os.write on a disk with `quota` bytes: a write past it puts in what fits and fails."""

    def __init__(self, quota: int) -> None:
        self.quota = quota

    def __call__(self, fd: int, data: memoryview) -> int:
        room = self.quota - os.fstat(fd).st_size
        if len(data) > room:
            os.write(fd, data[: max(0, room)])
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.write(fd, data)


async def test_lines_that_still_fit_are_written_when_a_whole_batch_does_not(
    tmp_path: Path, telemetry: Telemetry
) -> None:
    path = tmp_path / "results.jsonl"
    line = len(json.dumps(_line_of(0)).encode()) + 1
    disk = QuotaDisk(quota=line * 20 + line // 2)  # twenty lines and a half
    sink = ResultsFileSink(path, telemetry, write=disk, retry_s=(0.01, 0.05))
    await sink.start()
    futures = _emit(sink, 50)  # queued before the writer runs: one batch of fifty
    await wait_until_async(lambda: sum(f.done() for f in futures) >= 20, 10, "twenty lines")
    assert _ids(path) == [f"r{i}" for i in range(20)]
    assert [f.done() for f in futures] == [True] * 20 + [False] * 30
    disk.quota = 1 << 30
    async with asyncio.timeout(10):
        assert all(await asyncio.gather(*futures))
    await sink.shutdown(10)
    assert _ids(path) == [f"r{i}" for i in range(50)]


def _line_of(i: int) -> dict[str, object]:
    from monitor.exporters.results_file import results_line

    record = RagRecord(request_id=f"r{i}", response="a", timestamp=1_700_000_000.0)
    return results_line(record, {"e": EvalResult(name="e", score=1, normalized=1, passed=True)})


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
async def test_lines_that_cannot_be_written_by_shutdown_are_given_up_and_counted(
    telemetry: Telemetry,
) -> None:
    sink = ResultsFileSink("/dev/full", telemetry, retry_s=(0.01, 0.05), close_retry_s=0.2)
    await sink.start()
    futures = _emit(sink, 10)
    await sink.shutdown(10)
    assert [f.result() for f in futures] == [False] * 10  # never reported as written
    assert _value(telemetry, "dropped_total", stage="results_file", reason="write_error") == 10


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
async def test_the_shutdown_deadline_bounds_the_retries(telemetry: Telemetry) -> None:
    sink = ResultsFileSink("/dev/full", telemetry, retry_s=(0.01, 0.05), close_retry_s=3600)
    await sink.start()
    futures = _emit(sink, 3)
    await sink.shutdown(0.2)
    assert [f.result() for f in futures] == [False] * 3


async def test_a_rotated_file_is_replaced_at_the_configured_path(
    tmp_path: Path, telemetry: Telemetry
) -> None:
    path = tmp_path / "results.jsonl"
    sink = ResultsFileSink(path, telemetry)
    await sink.start()
    await asyncio.gather(*_emit(sink, 3))
    path.rename(tmp_path / "results.jsonl.1")  # logrotate, create mode
    await asyncio.gather(*_emit(sink, 2, first=3))
    assert _ids(tmp_path / "results.jsonl.1") == ["r0", "r1", "r2"]
    assert _ids(path) == ["r3", "r4"]
    with path.open("r+") as handle:  # copytruncate: emptied in place
        handle.truncate(0)
    await asyncio.gather(*_emit(sink, 2, first=5))
    await sink.shutdown(10)
    assert _ids(path) == ["r5", "r6"]


async def test_reopen_opens_the_path_afresh(tmp_path: Path, telemetry: Telemetry) -> None:
    """SIGHUP: the file is opened again, and checked again like any file it opens."""
    path = tmp_path / "results.jsonl"
    sink = ResultsFileSink(path, telemetry)
    await sink.start()
    await asyncio.gather(*_emit(sink, 1))
    with path.open("a") as other:  # another writer leaves a fragment in the same file
        other.write('{"fragment": ')
    sink.reopen()
    await asyncio.gather(*_emit(sink, 1, first=1))
    await sink.shutdown(10)
    lines = path.read_text().splitlines()
    assert (
        lines == [lines[0], '{"fragment": ', lines[2]]
        and json.loads(lines[2])["request_id"] == "r1"
    )


async def test_a_file_ending_mid_line_gets_a_fresh_line_first(
    tmp_path: Path, telemetry: Telemetry
) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"request_id": "old"}\n{"request_id": "cut sh')
    sink = ResultsFileSink(path, telemetry)
    await sink.start()
    await asyncio.gather(*_emit(sink, 1))
    await sink.shutdown(10)
    lines = path.read_text().splitlines()
    assert lines[-1].startswith('{"request_id": "r0"') and len(lines) == 3


async def test_queue_overflow_is_counted(tmp_path: Path, telemetry: Telemetry) -> None:
    sink = ResultsFileSink(tmp_path / "r.jsonl", telemetry, queue_size=5)
    await sink.start()
    _emit(sink, 20)  # no await in between: the writer has had no chance to drain
    await sink.shutdown(10)
    dropped = telemetry.registry.get_sample_value(
        "rag_monitor_dropped_total", {"stage": "results_file", "reason": "queue_full"}
    )
    assert dropped == 15
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 5


def test_a_results_file_that_cannot_be_opened_is_a_startup_error(
    tmp_path: Path, cli: list[str]
) -> None:
    # A directory that does not exist stands in for an unwritable path (tests run as root,
    # which ignores permission bits).
    config = tmp_path / "c.yaml"
    config.write_text(f"exporters:\n  results_file: {tmp_path / 'absent' / 'results.jsonl'}\n")
    result = subprocess.run(
        [*cli, "replay", str(EXAMPLES / "records.jsonl"), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "exporters.results_file: cannot open" in result.stderr
    assert "No such file or directory" in result.stderr


def test_each_line_says_where_the_records_context_came_from() -> None:
    from monitor.exporters.results_file import results_line
    from monitor.records import ContextDoc

    taken = RagRecord(
        request_id="p",
        retrieved_context=(ContextDoc(content="The wall was built over centuries."),),
        metadata={"context_source": "prompt"},
    )
    given = taken.model_copy(update={"metadata": {}})
    assert results_line(taken, {})["context_source"] == "prompt"
    assert results_line(given, {})["context_source"] == "record"
    assert results_line(RagRecord(request_id="n"), {})["context_source"] == "none"
