"""OTLP logs carrying GenAI events → spans the trace stage can assemble.

Which log records are taken is the conventions table's (`monitor/conventions/`: each entry's
`log_events` and `log_lines`; a user's convention adds the events it reads, the `taken` the
receivers pass). GenAI instrumentations send message content as log events
(`gen_ai.user.message`, `gen_ai.system.message`, `gen_ai.assistant.message`,
`gen_ai.tool.message`, `gen_ai.choice`, and one `gen_ai.client.inference.operation.details`
per call in the newer conventions), each carrying the trace and span id of the model call it
belongs to. Each becomes a small *event span*: a child of that span in the same trace,
holding the event (attributes plus `body`) as its only span event and `LOG_EVENT_KEY` naming
it. It travels through the trace stage like any span (same intake, bounds and counters);
extraction folds it into its parent (`monitor/extraction/_extract.py`). Spring AI writes its
content (with `spring.ai.*.observations.log-prompt` / `log-completion` /
`log-query-response`) as plain log lines in the span's scope, which an OTel log appender
exports with the span's ids: such a record is an event named by what its body starts with
(`LOG_LINE_EVENTS`). Other log records (no event name the table declares, or no span
context) are refused, counted in `rejected`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from monitor.conventions import LOG_EVENTS, LOG_LINE_EVENTS
from monitor.spans._json import (
    _get,
    _hex_id,
    _json_any,
    _json_attributes,
    _json_int,
    _json_list,
    decode_json_request,
)
from monitor.spans._lite import LiteSpan as _LiteSpan
from monitor.spans._lite import LogsRequest as _LogsRequest
from monitor.spans._span import (
    _EMPTY_IDS,
    Decoded,
    DecodeError,
    Span,
    SpanEvent,
    _attributes,
    _raw_value,
    _Unread,
)

LOG_EVENT_KEY = "rag_monitor.log_event"
# The first characters of the line starts, so that most bodies are refused at a glance.
_LINE_FIRSTS = frozenset(start[:1] for start in LOG_LINE_EVENTS)


def _line_event(body: Any) -> str:
    """The event a framework's content log line is (`LOG_LINE_EVENTS`), or "" when the
    body is not one."""
    if isinstance(body, str) and body[:1] in _LINE_FIRSTS:
        for start, name in LOG_LINE_EVENTS.items():
            if body.startswith(start):
                return name
    return ""


def _event_span(
    trace_id: str,
    span_id: str,
    name: str,
    time_unix_nano: int,
    attributes: dict[str, Any],
    body: Any,
    service: str,
    resource: dict[str, Any],
    index: int,
    unread: list[str],
) -> Span:
    attrs = dict(attributes)
    if isinstance(body, _Unread):
        unread = [*unread, body.reason]
    elif body is not None:
        attrs["body"] = body
    span = _EventSpan(trace_id, span_id, name, time_unix_nano, service, resource, index)
    return span.made(
        attributes={LOG_EVENT_KEY: name},
        events=[SpanEvent(name, time_unix_nano, attrs)],
        unread=tuple(unread),
    )


@dataclass(frozen=True, slots=True)
class _EventSpan:
    """Where an event span belongs: its parent span, its event, its resource."""

    trace_id: str
    span_id: str
    name: str
    time_unix_nano: int
    service: str
    resource: dict[str, Any]
    index: int

    def made(self, **content: Any) -> Span:
        """The span, holding `content` (`attributes`, `events` and `unread`, or `raw`)."""
        when = self.time_unix_nano
        return Span(
            self.trace_id,
            _event_id(self.span_id, self.name, when, self.index),
            self.span_id,
            self.name,
            when,
            when,
            service=self.service,
            resource=self.resource,
            **content,
        )


def _event_id(span_id: str, name: str, time_unix_nano: int, index: int) -> str:
    """An event span's own id, stable, so that the same record sent twice is one span."""
    return hashlib.blake2b(
        f"{span_id}/{name}/{time_unix_nano}/{index}".encode(), digest_size=8
    ).hexdigest()


def _refusal(name: str, has_context: bool, taken: frozenset[str]) -> str | None:
    if name not in taken:
        return f"log record {name or '(no event name)'!r} is not a GenAI event"
    if not has_context:
        return f"GenAI event {name!r} has no trace and span id to join it to its span"
    return None


def decode_logs_protobuf(payload: bytes, taken: frozenset[str] = LOG_EVENTS) -> Decoded:
    """Decode an OTLP/protobuf `ExportLogsServiceRequest`; `taken`: the events a log
    record is taken as (the shipped conventions', and those a user's convention names:
    `monitor.extraction.log_events_taken`). Each GenAI event becomes an
    event span that keeps its body and attributes serialized (`_raw_event_span`): decoding
    a request costs a parse of its framing, whatever its events hold, and an event's
    content becomes Python values only when its trace is evaluated (with the bounds every
    attribute value has: `monitor/shared/nesting.py`)."""
    try:
        request = _LogsRequest.FromString(payload)
    except (ProtobufDecodeError, RuntimeError, ValueError) as exc:
        raise DecodeError("bad_protobuf", f"body is not an OTLP logs request: {exc}") from None
    spans: list[Span] = []
    rejected = 0
    message = ""
    for rl in request.resource_logs:
        resource = _attributes(rl.resource.attributes)
        service = str(resource.get("service.name") or "unknown")
        for sl in rl.scope_logs:
            for i, record in enumerate(sl.log_records):
                attributes = dict(record.attributes)
                name = record.event_name
                if not name and "event.name" in attributes:
                    named = _attributes({"event.name": attributes["event.name"]})
                    name = str(named.get("event.name", ""))
                attributes.pop("event.name", None)
                if not name and record.body:
                    name = _line_event(_raw_value(record.body))
                trace_id, span_id = record.trace_id.hex(), record.span_id.hex()
                refusal = _refusal(
                    name,
                    len(record.trace_id) == 16
                    and len(record.span_id) == 8
                    and trace_id not in _EMPTY_IDS
                    and span_id not in _EMPTY_IDS,
                    taken,
                )
                if refusal is not None:
                    rejected += 1
                    message = message or refusal
                    continue
                if record.body:
                    attributes["body"] = record.body
                when = record.time_unix_nano or record.observed_time_unix_nano
                spans.append(
                    _raw_event_span(trace_id, span_id, name, when, attributes, service, resource, i)
                )
    return Decoded(spans, rejected, message)


def _raw_event_span(
    trace_id: str,
    span_id: str,
    name: str,
    time_unix_nano: int,
    attributes: dict[str, bytes],
    service: str,
    resource: dict[str, Any],
    index: int,
) -> Span:
    """`_event_span` with the event's attributes (and body) still serialized."""
    lite = _LiteSpan()
    lite.attributes[LOG_EVENT_KEY] = AnyValue(string_value=name).SerializeToString()
    event = lite.events.add(time_unix_nano=time_unix_nano, name=name)
    for key, raw in attributes.items():
        event.attributes[key] = raw
    span = _EventSpan(trace_id, span_id, name, time_unix_nano, service, resource, index)
    return span.made(raw=lite.SerializeToString())


def decode_logs_json(body: bytes, taken: frozenset[str] = LOG_EVENTS) -> Decoded:
    """Decode an OTLP/JSON `ExportLogsServiceRequest` (`taken`: as `decode_logs_protobuf`)."""
    return decode_json_request(body, lambda data: _decode_logs_json(data, taken), "logs request")


def _decode_logs_json(data: Any, taken: frozenset[str]) -> Decoded:
    """The GenAI events of a logs request; a log record with a field of the wrong type is
    refused alone (counted in `rejected`, like a record that is not a GenAI event)."""
    if not isinstance(data, dict):
        raise DecodeError("bad_json", "body: expected a JSON object with resourceLogs")
    spans: list[Span] = []
    rejected = 0
    message = ""
    for r, rl in enumerate(_json_list(data, "resourceLogs", "resource_logs", "body")):
        where = f"resourceLogs[{r}]"
        if not isinstance(rl, dict):
            raise DecodeError("bad_json", f"{where}: expected an object")
        resource_obj = rl.get("resource") or {}
        if not isinstance(resource_obj, dict):
            raise DecodeError("bad_json", f"{where}.resource: expected an object")
        resource = _json_attributes(
            resource_obj.get("attributes") or [], f"{where}.resource.attributes"
        )
        service = str(resource.get("service.name") or "unknown")
        for s, sl in enumerate(_json_list(rl, "scopeLogs", "scope_logs", where)):
            swhere = f"{where}.scopeLogs[{s}]"
            if not isinstance(sl, dict):
                raise DecodeError("bad_json", f"{swhere}: expected an object")
            for i, record in enumerate(_json_list(sl, "logRecords", "log_records", swhere)):
                span = _json_event(record, f"{swhere}.logRecords[{i}]", service, resource, i, taken)
                if isinstance(span, str):  # why it is refused
                    rejected += 1
                    message = message or span
                else:
                    spans.append(span)
    return Decoded(spans, rejected, message)


def _json_event(
    record: Any,
    where: str,
    service: str,
    resource: dict[str, Any],
    index: int,
    taken: frozenset[str],
) -> Span | str:
    """One log record's event span, or why it is refused."""
    if not isinstance(record, dict):
        return f"{where}: expected an object"
    try:
        unread: list[str] = []
        attrs = _json_attributes(record.get("attributes") or [], f"{where}.attributes", unread)
        name = str(_get(record, "eventName", "event_name") or attrs.pop("event.name", ""))
        trace_id = _hex_id(
            _get(record, "traceId", "trace_id"), 16, f"{where}.traceId", optional=True
        )
        span_id = _hex_id(_get(record, "spanId", "span_id"), 8, f"{where}.spanId", optional=True)
        body = _json_any(record["body"], f"{where}.body") if "body" in record else None
        name = name or _line_event(body)
        refusal = _refusal(name, trace_id not in _EMPTY_IDS and span_id not in _EMPTY_IDS, taken)
        if refusal is not None:
            return refusal
        when = _json_int(
            _get(record, "timeUnixNano", "time_unix_nano")
            or _get(record, "observedTimeUnixNano", "observed_time_unix_nano")
            or 0,
            f"{where}.timeUnixNano",
        )
    except (ValueError, TypeError, AttributeError, OverflowError) as exc:
        if isinstance(exc, DecodeError) and exc.reason == "bad_ids":
            raise
        return str(exc.detail if isinstance(exc, DecodeError) else f"{where}: {exc}")
    return _event_span(trace_id, span_id, name, when, attrs, body, service, resource, index, unread)
