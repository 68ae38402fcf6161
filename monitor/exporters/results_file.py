"""JSONL results: one line per evaluated record (DESIGN.md, "Results line").

Lines wait in a bounded queue and a writer task appends them in batches off the event
loop. A full queue or a failed write (disk full, file unwritable) is counted in
`dropped_total{stage="results_file"}` and logged; the process keeps running. `emit`
returns a future that is done once the line is flushed to the file (or its loss counted),
so a Kafka offset is only committed after its results line is written: a process killed
with SIGKILL loses no line whose offset was committed (flushed data lives in the OS).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import IO, Any

from monitor.evaluators.base import EvalResult
from monitor.records import RagRecord
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)
_STAGE = "results_file"
_ERROR_LOG_INTERVAL_S = 30.0


def results_line(record: RagRecord, results: dict[str, EvalResult]) -> dict[str, Any]:
    return {
        "request_id": record.request_id,
        "trace_id": record.trace_id,
        "service": record.service,
        "route": record.route,
        "results": {name: result.as_json() for name, result in results.items()},
    }


class ResultsFileSink:
    def __init__(self, path: str | Path, telemetry: Telemetry, queue_size: int = 10_000) -> None:
        self._path = Path(path)
        self._t = telemetry
        self._queue: asyncio.Queue[tuple[str, asyncio.Future[None]] | None] = asyncio.Queue(
            maxsize=queue_size
        )
        self._task: asyncio.Task[None] | None = None
        self._file: IO[str] | None = None
        self._last_error_log = 0.0
        self.written = 0

    async def start(self) -> None:
        self._task = asyncio.create_task(self._writer(), name="results-file")

    def emit(self, record: RagRecord, results: dict[str, EvalResult]) -> asyncio.Future[None]:
        line = json.dumps(results_line(record, results), ensure_ascii=False)
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait((line, written))
        except asyncio.QueueFull:
            self._t.dropped.labels(_STAGE, "queue_full").inc()
            written.set_result(None)
        return written

    async def close(self) -> None:
        if self._task is None:
            return
        await self._queue.put(None)
        await self._task
        self._task = None
        if self._file is not None:
            await asyncio.to_thread(self._file.close)
            self._file = None

    async def _writer(self) -> None:
        while True:
            first = await self._queue.get()
            batch = [first]
            while not self._queue.empty() and len(batch) < 1000:
                batch.append(self._queue.get_nowait())
            items = [item for item in batch if item is not None]
            try:
                if items:
                    await self._write([line for line, _ in items])
            finally:
                for _, written in items:
                    if not written.done():
                        written.set_result(None)
            if None in batch:
                return

    async def _write(self, lines: list[str]) -> None:
        try:
            await asyncio.to_thread(self._append, lines)
            self.written += len(lines)
        except OSError as exc:
            self._t.dropped.labels(_STAGE, "write_error").inc(len(lines))
            now = time.monotonic()
            if now - self._last_error_log >= _ERROR_LOG_INTERVAL_S:
                self._last_error_log = now
                log.error("cannot write %d results to %s: %s", len(lines), self._path, exc)

    def _append(self, lines: list[str]) -> None:
        if self._file is None:
            self._file = self._path.open("a", encoding="utf-8")
        try:
            self._file.write("\n".join(lines) + "\n")
            self._file.flush()
        except OSError:
            # Reopen on the next batch: the error may be transient (disk freed, file rotated).
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
            raise
