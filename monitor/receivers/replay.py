"""Replay: streams a file into the trace stage, for backfills, CI gates and demos.

Two kinds of file, told apart by the first line that is not blank:
- records, one JSON object per line in any input shape (`monitor.records`);
- OTLP/JSON traces as the OpenTelemetry Collector's `file` exporter writes them: one
  `ExportTraceServiceRequest` (`{"resourceSpans": [...]}`) per line. Their spans go
  through the same trace assembly and extraction as spans received over OTLP, so a dump
  of last week's traces yields the records live traffic would have.
Either may be gzip-compressed (recognised by its first bytes, whatever the name).

The file is read in chunks off the event loop, never whole. A malformed line (bad JSON,
wrong types, no response, unknown shape, not OTLP) is reported with its line number and
reason, counted in `records_rejected_total{receiver="replay",reason}`, and skipped.
"""

from __future__ import annotations

import asyncio
import gzip
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import IO, Literal

import orjson

from monitor.component import Delivery, TraceConsumer
from monitor.records import RagRecord, RecordError, parse_record
from monitor.spans import DecodeError, Span, decode_json
from monitor.telemetry import Telemetry

_CHUNK_LINES = 256
RECEIVER = "replay"
_UTF8_BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"
_OTLP_KEYS = (b'"resourceSpans"', b'"resource_spans"')

Kind = Literal["records", "otlp"]


@dataclass
class ReplayStats:
    lines: int = 0
    accepted: int = 0  # records, or OTLP requests
    rejected: int = 0
    kind: Kind = "records"
    problems: list[str] = field(default_factory=list)


@dataclass
class _Chunk:
    deliveries: list[Delivery]
    accepted: int
    problems: list[str]
    lines: int
    position: int


class _Reader:
    """Lines of a plain or gzip file, with the position in the file as stored."""

    def __init__(self, path: Path) -> None:
        self._raw: IO[bytes] = path.open("rb")
        self.size = os.fstat(self._raw.fileno()).st_size
        compressed = self._raw.read(2) == _GZIP_MAGIC
        self._raw.seek(0)
        self._gzip = gzip.GzipFile(fileobj=self._raw) if compressed else None
        self._lines: Iterable[bytes] = self._gzip if self._gzip is not None else self._raw
        self.kind: Kind | None = None

    def chunk(self, first_line: int, telemetry: Telemetry) -> _Chunk:
        """The next lines, parsed (off the event loop: decoding is CPU work)."""
        chunk = _Chunk([], 0, [], 0, 0)
        records: list[RagRecord] = []
        for raw in islice(self._lines, _CHUNK_LINES):
            chunk.lines += 1
            number = first_line + chunk.lines
            if number == 1:
                raw = raw.removeprefix(_UTF8_BOM)  # editors on Windows start files with one
            if not raw.strip():
                continue
            if self.kind is None:
                self.kind = "otlp" if any(key in raw[:4096] for key in _OTLP_KEYS) else "records"
            parsed = (
                _otlp(raw, number, telemetry)
                if self.kind == "otlp"
                else _record(raw, number, telemetry)
            )
            if isinstance(parsed, str):
                chunk.problems.append(parsed)
            elif isinstance(parsed, RagRecord):
                records.append(parsed)
            else:
                chunk.deliveries.append(Delivery(RECEIVER, spans=parsed))
                chunk.accepted += 1
        if records:
            chunk.deliveries.append(Delivery(RECEIVER, records=records))
            chunk.accepted += len(records)
        chunk.position = self._raw.tell()
        return chunk

    def close(self) -> None:
        if self._gzip is not None:
            self._gzip.close()
        self._raw.close()


async def replay_file(
    path: Path,
    consumer: TraceConsumer,
    telemetry: Telemetry,
    *,
    stop: asyncio.Event,
    on_problem: Callable[[str], None],
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayStats:
    """Feed every valid line of `path` to `consumer` until EOF or `stop` is set."""
    stats = ReplayStats()
    reader = await asyncio.to_thread(_Reader, path)
    try:
        while not stop.is_set():
            try:
                chunk = await asyncio.to_thread(reader.chunk, stats.lines, telemetry)
            except (OSError, EOFError) as exc:  # a truncated or corrupt gzip stream
                telemetry.counter("records_rejected").labels(RECEIVER, "bad_gzip").inc()
                on_problem(f"line {stats.lines + 1}: cannot read further: {exc}")
                stats.rejected += 1
                break
            if not chunk.lines:
                break
            stats.lines += chunk.lines
            stats.rejected += len(chunk.problems)
            for problem in chunk.problems:
                on_problem(problem)
            if chunk.deliveries:
                if not await consumer.put(chunk.deliveries):
                    break
                stats.accepted += chunk.accepted
            if on_progress is not None:
                on_progress(chunk.position, reader.size)
        stats.kind = reader.kind or "records"
    finally:
        await asyncio.to_thread(reader.close)
    return stats


def _record(raw: bytes, number: int, telemetry: Telemetry) -> RagRecord | str:
    """The record on a line, or the problem with it (counted)."""
    try:
        # orjson: bad UTF-8 and nesting deeper than 1024 are decode errors too.
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        telemetry.counter("records_rejected").labels(RECEIVER, "bad_json").inc()
        return f"line {number}: bad JSON: {exc}"
    try:
        return parse_record(data)
    except RecordError as exc:
        telemetry.counter("records_rejected").labels(RECEIVER, exc.reason).inc()
        return f"line {number}: {exc.detail}"


def _otlp(raw: bytes, number: int, telemetry: Telemetry) -> list[Span] | str:
    """The spans of the `ExportTraceServiceRequest` on a line, or the problem (counted)."""
    try:
        decoded = decode_json(raw)
    except DecodeError as exc:
        telemetry.counter("records_rejected").labels(RECEIVER, exc.reason).inc()
        return f"line {number}: {exc.detail}"
    if decoded.rejected:
        telemetry.counter("records_rejected").labels(RECEIVER, "invalid_span").inc(decoded.rejected)
    return decoded.spans
