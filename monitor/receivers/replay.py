"""JSONL replay: streams a file of records (any input shape) into the evaluation stage.

The file is read in chunks off the event loop, never whole. A malformed line (bad JSON,
wrong types, no response, unknown shape) is reported with its line number and reason,
counted in `records_rejected_total{receiver="replay",reason}`, and skipped.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import IO

import orjson

from monitor.processors.evaluate import EvaluationStage
from monitor.records import RecordError, parse_record
from monitor.telemetry import Telemetry

_CHUNK_LINES = 256
RECEIVER = "replay"
_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass
class ReplayStats:
    lines: int = 0
    accepted: int = 0
    rejected: int = 0
    problems: list[str] = field(default_factory=list)


def _read_chunk(handle: IO[bytes]) -> tuple[list[bytes], int]:
    lines = list(islice(handle, _CHUNK_LINES))
    return lines, handle.tell()


async def replay_file(
    path: Path,
    stage: EvaluationStage,
    telemetry: Telemetry,
    *,
    stop: asyncio.Event,
    on_problem: Callable[[str], None],
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayStats:
    """Feed every valid line of `path` to `stage` until EOF or `stop` is set."""
    stats = ReplayStats()
    handle = await asyncio.to_thread(path.open, "rb")
    total = os.fstat(handle.fileno()).st_size
    try:
        while not stop.is_set():
            chunk, position = await asyncio.to_thread(_read_chunk, handle)
            if not chunk:
                break
            for raw in chunk:
                if stop.is_set():
                    break
                stats.lines += 1
                if not raw.strip():
                    continue
                problem = await _one(raw, stats.lines, stage, telemetry)
                if problem is None:
                    stats.accepted += 1
                else:
                    stats.rejected += 1
                    on_problem(problem)
            if on_progress is not None:
                on_progress(position, total)
    finally:
        await asyncio.to_thread(handle.close)
    return stats


async def _one(raw: bytes, number: int, stage: EvaluationStage, telemetry: Telemetry) -> str | None:
    if number == 1:
        raw = raw.removeprefix(_UTF8_BOM)  # editors on Windows start files with one
    try:
        # orjson: bad UTF-8 and nesting deeper than 1024 are decode errors too.
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        telemetry.records_rejected.labels(RECEIVER, "bad_json").inc()
        return f"line {number}: bad JSON: {exc}"
    try:
        record = parse_record(data)
    except RecordError as exc:
        telemetry.records_rejected.labels(RECEIVER, exc.reason).inc()
        return f"line {number}: {exc.detail}"
    await stage.put(record, RECEIVER)
    return None
