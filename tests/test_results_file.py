"""The results file sink: lines land in order of completion; a failing disk is counted, not fatal."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from monitor.evaluators.base import EvalResult
from monitor.exporters.results_file import ResultsFileSink
from monitor.records import RagRecord
from monitor.telemetry import Telemetry
from tests.conftest import EXAMPLES


def _emit(sink: ResultsFileSink, n: int) -> None:
    for i in range(n):
        record = RagRecord(request_id=f"r{i}", response="a")
        sink.emit(record, {"e": EvalResult(name="e", score=1, normalized=1, passed=True)})


async def test_lines_are_written_and_flushed_on_close(tmp_path: Path, telemetry: Telemetry) -> None:
    path = tmp_path / "results.jsonl"
    sink = ResultsFileSink(path, telemetry)
    await sink.start()
    _emit(sink, 250)
    await sink.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["request_id"] for line in lines] == [f"r{i}" for i in range(250)]
    assert lines[0]["results"]["e"]["passed"] is True


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
async def test_disk_full_is_counted_and_the_sink_keeps_going(telemetry: Telemetry) -> None:
    sink = ResultsFileSink("/dev/full", telemetry)
    await sink.start()
    _emit(sink, 10)
    await sink.close()
    dropped = telemetry.registry.get_sample_value(
        "rag_monitor_dropped_total", {"stage": "results_file", "reason": "write_error"}
    )
    assert dropped == 10


async def test_queue_overflow_is_counted(tmp_path: Path, telemetry: Telemetry) -> None:
    sink = ResultsFileSink(tmp_path / "r.jsonl", telemetry, queue_size=5)
    await sink.start()
    _emit(sink, 20)  # no await in between: the writer has had no chance to drain
    await sink.close()
    dropped = telemetry.registry.get_sample_value(
        "rag_monitor_dropped_total", {"stage": "results_file", "reason": "queue_full"}
    )
    assert dropped == 15
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 5


def test_unwritable_results_file_does_not_stop_a_replay(tmp_path: Path, cli: list[str]) -> None:
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
    assert result.returncode == 0, result.stderr
    assert "cannot write" in result.stderr
    assert "10 records evaluated" in result.stdout
