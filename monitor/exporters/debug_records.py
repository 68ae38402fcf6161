"""`/debug/records` on the metrics port: what the trace stage extracted lately, and which
traces gave no record and why — the way the Collector's zpages show a pipeline's recent
work, so a user can check extraction on their own traffic without reading code.

Off by default (`exporters.prometheus.debug_records: N` turns it on). The page shows
user text, so it is served only where the operator asked for it: on a loopback address,
or behind a web config that asks for credentials (`check_metrics_port`); text is redacted
as `redaction` says.

Bounded in what it holds and what it sends, whatever a record holds: each entry is
rendered once, when it is recorded, with every text cut at `TEXT_LIMIT` characters and
no more documents and history turns than fit in `ENTRY_BYTES` (the number left out is
said, `documents_left_out`, `history_left_out`); of the last N entries of each kind, the
newest that fit in `KIND_BYTES` are kept, so the page is at most `3 * KIND_BYTES` (the
kept traces' summaries share their spans' bytes) and says how many of the last N it
leaves out (`left_out`).

It keeps the spans of the last N traces that gave no record, an incomplete one or a
suspect one too, as OTLP/JSON (what `rag-monitor explain --from-debug` reads): each trace
within `TRACE_BYTES` (the spans that do not fit are left out whole, and counted), all of
them within `KIND_BYTES`; string attribute values are redacted as the text is.
`GET /debug/records/traces/<trace_id>` answers one as an `ExportTraceServiceRequest`
(404 with `{"error"}` for a trace not kept).

`GET /debug/records` answers JSON, newest first:
`{"extracted": [{time, source, trace_id, request_id, service, route, missing, suspect,
language: {script, not_scored_by, reason}, conventions, conversation, sender, query, history, context: [{doc_uri, content}], response}], "no_record": [{time, source,
trace_id, service, spans, reason}], "traces": [{trace_id, spans, spans_left_out}],
"left_out": {"extracted", "no_record", "traces"}}`. Reasons:
`unsampled`, `not_rag`, `extract_failed`, `extract_timeout`, `bad_protobuf`.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web

from monitor.exporters.extracted import Redact
from monitor.records import CONTEXT_EVIDENCE, EXTRACTION_SUSPECT, RagRecord, scripts, sender
from monitor.spans import DecodeError, Span, encode_request, encode_span

TEXT_LIMIT = 2_000
ENTRY_BYTES = 64 * 1024
KIND_BYTES = 4 * 1024 * 1024
TRACE_BYTES = 256 * 1024  # one trace's spans
PATH = "/debug/records"
TRACES_PATH = PATH + "/traces/"


class _Recent:
    """The last `size` rendered entries of one kind whose bytes fit in `KIND_BYTES`
    together, and how many of the last `size` were left out for the bytes. An entry may
    carry a body served on its own, found by its key (counted in the bytes too)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: deque[tuple[bytes, str, bytes]] = deque()  # entry, key, body
        self._bytes = 0
        self._pushed_out = 0  # entries dropped for the bytes, newest ones counting

    def add(self, entry: bytes, key: str = "", body: bytes = b"") -> None:
        self._entries.append((entry, key, body))
        self._bytes += len(entry) + len(body)
        if len(self._entries) > self._size:
            self._bytes -= _held(self._entries.popleft())
        while self._bytes > KIND_BYTES:
            self._bytes -= _held(self._entries.popleft())
            self._pushed_out += 1

    def newest_first(self) -> tuple[list[bytes], int]:
        """The entries, newest first, and how many of the last `size` are left out."""
        kept = len(self._entries)
        entries = [entry for entry, _, _ in reversed(self._entries)]
        return entries, min(self._pushed_out, self._size - kept)

    def body(self, key: str) -> bytes | None:
        """The body of the newest entry of `key`."""
        return next((body for _, k, body in reversed(self._entries) if k == key), None)


def _language(record: RagRecord) -> dict[str, Any]:
    found = scripts.record_script(record)
    unscored = sorted(name for name, reads in scripts.READS.items() if found not in reads)
    return {
        "script": found,
        "not_scored_by": unscored,
        "reason": scripts.reason(found, unscored) if unscored else None,
    }


def _held(entry: tuple[bytes, str, bytes]) -> int:
    return len(entry[0]) + len(entry[2])


class DebugRecords:
    """A `TraceObserver` keeping the last `size` extractions and non-extractions. The trace
    stage writes and the page handler reads, both on the event loop: no lock."""

    def __init__(
        self, size: int, redact: Redact | None, clock: Callable[[], float] = time.time
    ) -> None:
        self._extracted = _Recent(size)
        self._no_record = _Recent(size)
        self._traces = _Recent(size)
        self._redact = redact
        self._clock = clock

    def extracted(self, record: RagRecord, source: str) -> None:
        entry = {
            "time": self._clock(),
            "source": source,
            "trace_id": record.trace_id,
            "request_id": _cut(record.request_id),
            "service": _cut(record.service),
            "route": _cut(record.route),
            "missing": sorted(record.missing()),
            "suspect": record.metadata.get(EXTRACTION_SUSPECT),
            # Its script, and the embedded evaluators that give it no verdict and why.
            "language": _language(record),
            # The conventions its spans were read by (a user's among them, when matched).
            "conventions": record.metadata.get("conventions"),
            # Where its context came from, and the evidence when found by structure or
            # taken from the prompt.
            "context_source": record.context_source,
            "context_evidence": record.metadata.get(CONTEXT_EVIDENCE),
            "conversation": _cut(record.conversation) if record.conversation else None,
            # Who sent it: the client's address and its `service.instance.id`.
            "sender": sender(record),
            "query": self._text(record.query),
            "response": self._text(record.response),
        }
        # Sized with its lists empty and the widest counts they may say.
        widest = len(record.history) + len(record.retrieved_context)
        entry |= {"history": [], "history_left_out": widest}
        entry |= {"context": [], "documents_left_out": widest}
        room = ENTRY_BYTES - _size(entry)
        entry["history"], room, entry["history_left_out"] = self._fitting(
            [(m.role, m.content) for m in record.history], "role", room
        )
        entry["context"], room, entry["documents_left_out"] = self._fitting(
            [(d.doc_uri, d.content) for d in record.retrieved_context], "doc_uri", room
        )
        self._extracted.add(_render(entry))

    def no_record(self, trace_id: str, service: str, source: str, reason: str, spans: int) -> None:
        entry = {
            "time": self._clock(),
            "source": source,
            "trace_id": _cut(trace_id),
            "service": _cut(service),
            "spans": spans,
            "reason": reason,
        }
        self._no_record.add(_render(entry))

    def kept_spans(self, trace_id: str, spans: Sequence[Span]) -> None:
        """Keep `spans` (one trace's) as OTLP/JSON: those that fit in `TRACE_BYTES`, their
        strings redacted; the others are counted, never encoded."""
        text = self._redact if self._redact is not None else _same
        by_resource: dict[int, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
        room = TRACE_BYTES
        left_out = 0
        for span in spans:
            if span.size > 2 * room:  # surely too large, whatever its encoding
                left_out += 1
                continue
            try:
                encoded = encode_span(span, text)
            except DecodeError:  # its bytes were corrupt: nothing of it to show
                left_out += 1
                continue
            size = _size(encoded) + 2
            group = by_resource.get(id(span.resource))
            if group is None:
                resource = {"service.name": span.service, **span.resource}
                size += len(encode_request([(resource, [])])) + 2
            if size > room:
                left_out += 1
                continue
            room -= size
            if group is None:
                group = by_resource[id(span.resource)] = (resource, [])
            group[1].append(encoded)
        kept = sum(len(group[1]) for group in by_resource.values())
        summary = {"trace_id": trace_id, "spans": kept, "spans_left_out": left_out}
        body = encode_request(list(by_resource.values())) + b"\n"
        self._traces.add(_render(summary), trace_id, body)

    def trace_spans(self, trace_id: str) -> bytes | None:
        """The kept spans of `trace_id` (an OTLP/JSON request), or None."""
        return self._traces.body(trace_id.lower())

    def _text(self, value: str | None) -> str | None:
        if value is None:
            return None
        if self._redact is not None:
            # Redacted before it is cut, so a cut never splits what the redaction matches;
            # but no more of it than could be shown.
            value = self._redact(value[: 2 * TEXT_LIMIT])
        return _cut(value)

    def _fitting(
        self, items: list[tuple[str | None, str]], key: str, room: int
    ) -> tuple[list[dict[str, Any]], int, int]:
        """As many of `items` as fit in `room` bytes (each text cut and redacted), the
        room left and how many were left out."""
        shown: list[dict[str, Any]] = []
        for label, content in items:
            item = {key: _cut(label) if label is not None else None, "content": self._text(content)}
            size = _size(item) + 2
            if size > room:
                break
            shown.append(item)
            room -= size
        return shown, room, len(items) - len(shown)

    def page(self) -> bytes:
        """The page, newest entries first (JSON)."""
        extracted, extracted_out = self._extracted.newest_first()
        no_record, no_record_out = self._no_record.newest_first()
        traces, traces_out = self._traces.newest_first()
        left_out = json.dumps(
            {"extracted": extracted_out, "no_record": no_record_out, "traces": traces_out}
        )
        return b"".join(
            [
                b'{"extracted": [',
                b",\n".join(extracted),
                b'],\n"no_record": [',
                b",\n".join(no_record),
                b'],\n"traces": [',
                b",\n".join(traces),
                b'],\n"left_out": ',
                left_out.encode(),
                b"}\n",
            ]
        )

    def snapshot(self) -> dict[str, Any]:
        """The page, parsed."""
        parsed: dict[str, Any] = json.loads(self.page())
        return parsed

    async def handle(self, request: web.Request) -> web.Response:
        return web.Response(body=self.page(), content_type="application/json")

    async def handle_trace(self, request: web.Request) -> web.Response:
        trace_id = request.match_info["trace_id"]
        body = self.trace_spans(trace_id)
        if body is None:
            error = f"trace {trace_id[:64]} is not among the traces {PATH} keeps the spans of"
            return web.json_response({"error": error}, status=404)
        return web.Response(body=body, content_type="application/json")


def _same(text: str) -> str:
    return text


def _cut(value: str | None) -> str | None:
    if value is None or len(value) <= TEXT_LIMIT:
        return value
    return value[: TEXT_LIMIT - 1] + "…"


def _render(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, ensure_ascii=False).encode()


def _size(value: Any) -> int:
    return len(_render(value))
