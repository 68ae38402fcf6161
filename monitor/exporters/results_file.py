"""JSONL results: one line per evaluated record (docs/contract.md, "Results file").

`emit` queues a line (`SendingQueue`, `monitor/exporters/_sending.py`) and returns a
future; the queue's worker appends queued lines in batches off the event loop and resolves
each future with True once its line is whole in the file and synced to disk
(`fdatasync`). The record's `on_done` waits for that future, so a Kafka offset is never
committed past a record whose results line is not on disk.

When a write fails (disk full, permissions), the bytes of the failed batch that did reach
the file are cut off again, so a line is never torn, and the batch is retried — at half
its size at once (lines that still fit get written), then with backoff — never skipped.
Meanwhile no future resolves, the evaluation stage stops taking records once too many wait
for their lines, and intake pushes back (Kafka pauses, OTLP answers retryable).
`results_file_writable` is 0 and `results_file_write_failures_total` counts the failed
attempts until a write succeeds again. Lines still unwritten when shutdown's deadline
(at most `close_retry_s`) passes are given up: their futures resolve False, and they are
counted in `dropped_total{stage="results_file",reason="write_error"}`.

Rotation: before each batch the path is compared with the open file; if the file was
renamed or removed (logrotate's create mode) a new one is opened at the path, and a file
truncated in place (copytruncate) is appended to from its new end. `reopen()` (SIGHUP)
reopens unconditionally.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from monitor.component import Evaluated
from monitor.config import ConfigError
from monitor.exporters._sending import DropReason, RetryableError, SendingQueue
from monitor.exporters.extracted import Redact, extracted_text, shown_results
from monitor.records import NOT_EVALUATED, RagRecord, sender
from monitor.records.fingerprint import request_fingerprint
from monitor.records.where import Where
from monitor.results import EvalResult, Results
from monitor.shared.json_lines import json_line
from monitor.shared.retry import RetryPolicy
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)
_STAGE = "results_file"
_BATCH_LINES = 1000
_RETRY_INITIAL_S = 0.1
_RETRY_MAX_S = 5.0
_CLOSE_RETRY_S = 5.0  # how long shutdown waits for lines to be written at most
_QUEUE_BYTES = 256 << 20


def results_line(
    record: RagRecord,
    results: dict[str, EvalResult],
    *,
    text: bool = False,
    redact: Redact | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """One results line; with `text`, also what was extracted (redacted) under
    "extracted". `time` is the request's (its
    trace's start) or, for a record without one, `now` (the time it was evaluated): what
    `rag-monitor backtest` replays on."""
    line = {
        "request_id": record.request_id,
        "trace_id": record.trace_id,
        "time": record.timestamp if record.timestamp is not None else now,
        "service": record.service,
        "version": record.version,
        "route": record.route,
        "model": record.model,
        "conversation": record.conversation,
        "context_source": record.context_source,
        # The question's fingerprint: verdicts on the same question are one unit of evidence
        # to the alert rules (monitor/records/fingerprint.py), here as live.
        "fingerprint": request_fingerprint(record),
        # Who sent it: a regression rule screens each sender's verdicts (monitor/evidence/
        # senders.py), here as live.
        "sender": sender(record),
        # What else a page's attribution looks at (monitor/records/where.py), so that
        # `rag-monitor backtest` over this file says where as the sidecar does.
        "dimensions": Where.of(record).line(),
        "results": {name: result.as_json() for name, result in results.items()},
    }
    not_evaluated = record.metadata.get(NOT_EVALUATED)
    if not_evaluated:
        # Written unevaluated (the shutdown deadline passed first): its results are errors.
        line["not_evaluated"] = not_evaluated
    if text:
        line["extracted"] = extracted_text(record, redact)
    return line


Write = Callable[[int, memoryview], int]
_Line = tuple[bytes, "asyncio.Future[bool]"]


class ResultsFileSink:
    """Appends one results line per evaluated record to `path` (see the module docstring).

    **Parameters:**
    - `queue_size`, `queue_bytes`: lines waiting to be written, at most (the evaluation
      stage bounds what waits for them first; this is a safety net).
    - `include_text`, `redact`: add the extracted text, redacted, to each line.
    - `include_explanations`: keep the evaluators' explanations (redacted with `redact`);
      without, each line's `explanation` is null (they carry the record's text).
    - `write`, `sync`: `os.write` and `os.fdatasync` (tests inject a failing disk).
    - `retry_s`: the first and the longest wait before a failed write is tried again.
    - `close_retry_s`: how long shutdown waits for lines to be written, at most.
    """

    def __init__(
        self,
        path: str | Path,
        telemetry: Telemetry,
        *,
        queue_size: int = 100_000,
        queue_bytes: int = _QUEUE_BYTES,
        include_text: bool = False,
        include_explanations: bool = False,
        redact: Redact | None = None,
        write: Write = os.write,
        sync: Callable[[int], None] = os.fdatasync,
        retry_s: tuple[float, float] = (_RETRY_INITIAL_S, _RETRY_MAX_S),
        close_retry_s: float = _CLOSE_RETRY_S,
    ) -> None:
        self._path = Path(path)
        self._include_text = include_text
        self._include_explanations = include_explanations
        self._redact = redact
        self._write_fn = write
        self._sync = sync
        self._close_retry = close_retry_s
        self._queue: SendingQueue[_Line] = SendingQueue(
            self._write_batch,
            telemetry,
            _STAGE,
            name=f"results file {self._path}",
            retry=RetryPolicy(base_s=retry_s[0], max_s=retry_s[1]),
            max_items=queue_size,
            max_bytes=queue_bytes,
            max_batch=_BATCH_LINES,
            split_failed_batches=True,
            # Writes are retried until shutdown: what it leaves is what could not be written.
            reasons={"shutdown": "write_error"},
            on_sent=self._written,
            on_drop=self._given_up,
            logger=log,
        )
        self._writing: asyncio.Future[None] | None = None  # the write in its thread
        self._started = False
        self._fd: int | None = None
        self._reopen = False
        self._warn = RateLimitedLog(log, 30.0)
        self.written = 0
        self.failures = telemetry.counter("results_file_write_failures")
        self.writable = telemetry.gauge("results_file_writable")
        self.writable.set(1)

    async def start(self) -> None:
        """Open the file now, so that a path that cannot be written is a startup error
        naming the key, not a stream of failed writes later."""
        try:
            await asyncio.to_thread(self._open)
        except OSError as exc:
            raise ConfigError(
                [f"exporters.results_file: cannot open {self._path}: {exc.strerror or exc}"]
            ) from None
        self._started = True
        await self._queue.start()

    def emit(self, batch: Sequence[Evaluated]) -> list[asyncio.Future[bool]]:
        """Each record's line; a future per line, True once it is written. Every line is built
        before any is queued: a record it fails on leaves the batch unwritten, and the
        stage's retry, record by record, writes none twice."""
        loop, now = asyncio.get_running_loop(), time.time()
        lines = [
            json_line(
                results_line(
                    evaluated.record,
                    self._shown(evaluated.results),
                    text=self._include_text,
                    redact=self._redact,
                    now=now,
                )
            ).encode()
            + b"\n"
            for evaluated in batch
        ]
        owed = []
        for line in lines:
            written: asyncio.Future[bool] = loop.create_future()
            self._queue.put((line, written), len(line))  # refused: `_given_up` resolves it
            owed.append(written)
        return owed

    def _shown(self, results: Results) -> dict[str, EvalResult]:
        return shown_results(results, explanations=self._include_explanations, redact=self._redact)

    def reopen(self) -> None:
        """Open the path afresh before the next write (SIGHUP, after log rotation)."""
        self._reopen = True

    async def shutdown(self, deadline_s: float) -> None:
        """Write what is queued until `deadline_s` has passed (and for at most
        `close_retry_s`), then give up the lines still unwritten — their futures resolve
        False — and count them. Safe without `start` and safe to call twice."""
        if not self._started:
            return
        self._started = False
        await self._queue.shutdown(min(self._close_retry, deadline_s))
        if self._writing is not None:
            # A write cut off by the deadline still runs in its thread: the file stays
            # open until it ends (its lines were reported unwritten: at least once).
            await asyncio.gather(self._writing, return_exceptions=True)
            self._writing = None
        self._close_fd()

    async def _write_batch(self, batch: list[_Line]) -> None:
        data = b"".join(line for line, _ in batch)
        writing = asyncio.ensure_future(asyncio.to_thread(self._append, data))
        self._writing = writing
        try:
            await asyncio.shield(writing)
        except OSError as exc:
            self.failures.inc()
            self.writable.set(0)
            self._warn.log(
                "write",
                logging.ERROR,
                "cannot write %d results lines to %s (retrying; intake pauses while they wait): %s",
                len(batch),
                self._path,
                exc,
            )
            raise RetryableError(str(exc)) from exc
        self.writable.set(1)

    def _written(self, batch: list[_Line]) -> None:
        for _, written in batch:
            if not written.done():
                written.set_result(True)
        self.written += len(batch)

    def _given_up(self, batch: list[_Line], reason: DropReason) -> None:
        for _, written in batch:
            if not written.done():
                written.set_result(False)

    def _append(self, data: bytes) -> None:
        """Append whole lines and sync them, or leave the file as it was and raise."""
        fd = self._open()
        before = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                n = self._write_fn(fd, view)
                if n <= 0:
                    raise OSError(errno.EIO, "write made no progress")
                view = view[n:]
            self._sync(fd)
        except OSError:
            try:
                os.ftruncate(fd, before)  # no torn line: cut off what part of the batch got in
            except OSError as cut:
                log.error("cannot roll back a partial write to %s: %s", self._path, cut)
                self._close_fd()  # the next attempt reopens and starts on a fresh line
            raise

    def _open(self) -> int:
        """The file descriptor, (re)opened if the path no longer names the open file."""
        if self._fd is not None and not self._reopen:
            try:
                at_path = os.stat(self._path)
                mine = os.fstat(self._fd)
                if (at_path.st_dev, at_path.st_ino) != (mine.st_dev, mine.st_ino):
                    log.info("results file %s was rotated; opening a new one", self._path)
                    self._close_fd()
            except FileNotFoundError:
                log.info("results file %s was moved away; opening a new one", self._path)
                self._close_fd()
        elif self._reopen:
            self._close_fd()
        self._reopen = False
        if self._fd is None:
            self._fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            self._trim_torn_tail(self._fd)
        return self._fd

    def _trim_torn_tail(self, fd: int) -> None:
        """A file we did not write last may end mid-line (another process, a crash):
        start on a fresh line so our first line is not glued to that fragment."""
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.write(fd, b"\n")

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError as exc:
                log.warning("closing results file %s failed: %s", self._path, exc)
