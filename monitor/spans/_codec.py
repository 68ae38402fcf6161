"""OTLP trace payloads (protobuf or OTLP/JSON) → `Span` objects.

Pure functions, no I/O. `decode_protobuf` and `decode_json` return a `Decoded`: the spans
that are usable plus a count and a message for the ones rejected (ids of the wrong
length), which the receivers report as an OTLP partial success. A body that cannot be
parsed at all raises `DecodeError` whose `reason` is a closed-set metric label.

OTLP/JSON differs from the protobuf JSON mapping: trace and span ids are hex strings, not
base64, and 64-bit integers may arrive as strings. A JSON body with an id that is not hex
is rejected as a whole (HTTP 400), naming the field, because it almost always means the
sender encoded every id the same wrong way.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError as _ProtoDecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from monitor.spans._lite import LiteSpan as _LiteSpan
from monitor.spans._lite import LiteStatus as _LiteStatus
from monitor.spans._lite import RawRequest as _RawRequest
from monitor.spans._lite import SkeletonRequest as _SkeletonRequest

# OTLP span flags: bit 8 says whether bit 9 (parent is remote) is meaningful.
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
_STATUS_ERROR = 2
_EMPTY_IDS = ("", "0" * 16, "0" * 32)
_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
# Python's own cost of a span beyond its payload (the object, its id strings, its dicts),
# so that memory bounds in bytes hold for spans with tiny payloads too.
SPAN_OVERHEAD_BYTES = 400
# The attribute a user's feedback travels in; read on every span to decide sampling, so
# decoders settle its absence for a whole request at once.
FEEDBACK_KEY = "rag.feedback"


class DecodeError(ValueError):
    """A payload that is not a valid OTLP trace export request."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(slots=True)
class SpanEvent:
    name: str
    time_unix_nano: int
    attributes: dict[str, Any]


_MISSING: Any = object()


class Span:
    """One span, reduced to what trace assembly and record extraction read.

    Spans decoded from protobuf keep their serialized bytes (`raw`) and turn attributes
    and events into Python values only when first read, so traces that are never
    evaluated never pay for it. A value that turns out to be corrupt raises
    `DecodeError("bad_protobuf", ...)` at that point. `attribute(key)` reads one
    attribute without decoding the others.
    """

    __slots__ = (
        "_absent",
        "_attributes",
        "_events",
        "_raw",
        "end_unix_nano",
        "error",
        "name",
        "parent_is_remote",
        "parent_span_id",
        "resource",
        "service",
        "size",
        "span_id",
        "start_unix_nano",
        "trace_id",
    )

    def __init__(
        self,
        trace_id: str,  # 32 lowercase hex characters
        span_id: str,  # 16 lowercase hex characters
        parent_span_id: str,  # "" for a root span
        name: str,
        start_unix_nano: int,
        end_unix_nano: int,
        attributes: dict[str, Any] | None = None,
        events: list[SpanEvent] | None = None,
        error: bool = False,
        service: str = "unknown",
        parent_is_remote: bool = False,
        resource: dict[str, Any] | None = None,
        raw: bytes | None = None,
        absent: frozenset[str] = frozenset(),
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.name = name
        self.start_unix_nano = start_unix_nano
        self.end_unix_nano = end_unix_nano
        self.error = error
        self.service = service
        self.parent_is_remote = parent_is_remote
        self.resource: dict[str, Any] = {} if resource is None else resource
        self._raw = raw
        self._absent = absent  # keys the decoder found nowhere in the request
        if raw is None:
            self._attributes: dict[str, Any] | None = {} if attributes is None else attributes
            self._events: list[SpanEvent] | None = [] if events is None else events
            payload = _estimate(self._attributes) + sum(
                len(e.name) + _estimate(e.attributes) for e in self._events
            )
        else:
            self._attributes = attributes
            self._events = events
            payload = len(raw)
        # Approximate bytes held, for the memory bounds of trace assembly and queues.
        self.size = SPAN_OVERHEAD_BYTES + len(name) + payload

    @property
    def is_root(self) -> bool:
        """A local root: no parent, or a parent in another process."""
        return not self.parent_span_id or self.parent_is_remote

    @property
    def decoded(self) -> bool:
        """Whether attributes and events are Python values yet (not still serialized)."""
        return self._raw is None

    @property
    def attributes(self) -> dict[str, Any]:
        if self._attributes is None:
            self.decode()
        assert self._attributes is not None
        return self._attributes

    @property
    def events(self) -> list[SpanEvent]:
        if self._events is None:
            self.decode()
        assert self._events is not None
        return self._events

    def attribute(self, key: str, default: Any = None) -> Any:
        """One attribute's value (`default` when absent), decoding no other attribute."""
        raw = self._raw
        if raw is None:
            return self.attributes.get(key, default)
        if key in self._absent or key.encode() not in raw:  # keys are stored verbatim
            return default
        entries = self._parse().attributes
        if key not in entries:
            return default
        return self._guard(_raw_value, entries[key])

    def _parse(self) -> Any:
        try:
            return _LiteSpan.FromString(self._raw)
        except (_ProtoDecodeError, RuntimeError, ValueError) as exc:
            raise self._corrupt(exc) from None

    def _guard(self, convert: Any, value: Any) -> Any:
        try:
            return convert(value)
        except (_ProtoDecodeError, RuntimeError, ValueError) as exc:
            raise self._corrupt(exc) from None

    def _corrupt(self, exc: Exception) -> DecodeError:
        return DecodeError(
            "bad_protobuf", f"span {self.span_id}: attributes or events are corrupt: {exc}"
        )

    def decode(self) -> None:
        """Decode the attributes and events now (no-op when already done)."""
        if self._raw is None:
            return
        message = self._parse()
        attributes = self._guard(_attributes, message.attributes)
        raw_events = message.events
        events = (
            [
                SpanEvent(e.name, e.time_unix_nano, self._guard(_attributes, e.attributes))
                for e in raw_events
            ]
            if raw_events
            else []
        )
        self._attributes, self._events, self._raw = attributes, events, None

    def __reduce__(self) -> tuple[type[Span], tuple[Any, ...]]:
        """Pickled as it stands: still-serialized attributes travel as their bytes (a
        sampled trace goes to an evaluation worker process to be extracted there)."""
        return Span, (*self._state(self._attributes, self._events), self._raw, self._absent)

    def _fields(self) -> tuple[Any, ...]:
        return self._state(self.attributes, self.events)

    def _state(self, attributes: Any, events: Any) -> tuple[Any, ...]:
        """The constructor's arguments up to `raw`, with `attributes` and `events` given."""
        return (
            self.trace_id,
            self.span_id,
            self.parent_span_id,
            self.name,
            self.start_unix_nano,
            self.end_unix_nano,
            attributes,
            events,
            self.error,
            self.service,
            self.parent_is_remote,
            self.resource,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Span):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Span(trace_id={self.trace_id!r}, span_id={self.span_id!r}, "
            f"parent_span_id={self.parent_span_id!r}, name={self.name!r})"
        )


def _estimate(value: Any) -> int:
    """Rough bytes of a decoded attribute value (strings dominate span payloads)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(k) + _estimate(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_estimate(v) for v in value)
    return 8


@dataclass(slots=True)
class Decoded:
    spans: list[Span]
    rejected: int = 0
    message: str = ""


def _any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return None


def _raw_value(raw: bytes) -> Any:
    """A serialized `AnyValue` → Python value; strings under 16 KiB take a fast path."""
    size = len(raw)
    if size > 1 and raw[0] == 0x0A:  # field 1 (string_value), length-delimited
        b1 = raw[1]
        if b1 < 0x80:
            if b1 + 2 == size:
                return raw[2:].decode("utf-8", "replace")
        elif size > 2 and raw[2] < 0x80 and ((b1 & 0x7F) | raw[2] << 7) + 3 == size:
            return raw[3:].decode("utf-8", "replace")
    if not raw:
        return None
    return _any_value(AnyValue.FromString(raw))


def _attributes(entries: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in entries.items():
        # Inline fast path for short strings, the bulk of span attributes.
        if len(raw) > 1 and raw[0] == 0x0A and raw[1] < 0x80 and raw[1] + 2 == len(raw):
            out[key] = raw[2:].decode("utf-8", "replace")
        else:
            out[key] = _raw_value(raw)
    return out


def decode_protobuf(
    body: bytes, *, lazy: bool = False, probe: tuple[str, ...] = (FEEDBACK_KEY,)
) -> Decoded:
    """Decode an `ExportTraceServiceRequest`; spans with malformed ids are rejected.

    With `lazy`, only the span skeleton (ids, parent, name, times, flags, status) is
    decoded here and attributes and events stay serialized in each `Span` until read (a
    corrupt value then raises `DecodeError` when read); otherwise every span is decoded
    now and any corruption raises here. `probe`: attribute keys that `Span.attribute`
    will be asked for on every span; one search of the whole body settles, for all its
    spans at once, the ones that occur nowhere in it."""
    absent = frozenset(key for key in probe if key.encode() not in body)
    try:
        decoded = _decode_protobuf(
            _SkeletonRequest.FromString(body), _RawRequest.FromString(body), absent
        )
    except (_ProtoDecodeError, RuntimeError, ValueError) as exc:
        raise DecodeError(
            "bad_protobuf", f"body is not an ExportTraceServiceRequest: {exc}"
        ) from None
    if not lazy:
        for span in decoded.spans:
            span.decode()
    return decoded


_STATUS_UNSET_OR_OK = (b"", b"\x18\x01")
_STATUS_ERROR_BYTES = b"\x18\x02"


def _is_error(status: bytes) -> bool:
    """A serialized `Status` other than the unset and OK ones: is its code ERROR?"""
    if status == _STATUS_ERROR_BYTES:
        return True
    code: int = _LiteStatus.FromString(status).code  # a status with a message
    return code == _STATUS_ERROR


def _decode_protobuf(request: Any, raw_request: Any, absent: frozenset[str]) -> Decoded:
    spans: list[Span] = []
    append = spans.append
    rejected = 0
    message = ""
    for r, (resource_spans, raw_resource) in enumerate(
        zip(request.resource_spans, raw_request.resource_spans, strict=True)
    ):
        resource = _attributes(resource_spans.resource.attributes)
        service = str(resource.get("service.name") or "unknown")
        for s, (scope_spans, raw_scope) in enumerate(
            zip(resource_spans.scope_spans, raw_resource.scope_spans, strict=True)
        ):
            for i, (span, raw) in enumerate(zip(scope_spans.spans, raw_scope.spans, strict=True)):
                trace_id = span.trace_id
                span_id = span.span_id
                parent = span.parent_span_id
                if (
                    len(trace_id) != 16
                    or len(span_id) != 8
                    or (parent and len(parent) != 8)
                    or trace_id == _ZERO_TRACE
                    or span_id == _ZERO_SPAN
                ):
                    rejected += 1
                    if not message:
                        message = (
                            f"resource_spans[{r}].scope_spans[{s}].spans[{i}]: trace_id must be 16 "
                            "non-zero bytes, span_id 8 non-zero bytes, parent_span_id empty or 8 bytes"
                        )
                    continue
                flags = span.flags
                status = span.status
                append(
                    Span(
                        trace_id.hex(),
                        span_id.hex(),
                        parent.hex() if parent else "",
                        span.name,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        None,
                        None,
                        status not in _STATUS_UNSET_OR_OK and _is_error(status),
                        service,
                        bool(flags & _HAS_IS_REMOTE and flags & _IS_REMOTE),
                        resource,
                        raw,
                        absent,
                    )
                )
    return Decoded(spans, rejected, message)


# --- OTLP/JSON ---------------------------------------------------------------------------


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _json_list(obj: dict[str, Any], camel: str, snake: str, where: str) -> list[Any]:
    value = _get(obj, camel, snake)
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError("bad_json", f"{where}.{camel}: expected a list")
    return value


def _json_int(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise DecodeError("bad_json", f"{where}: expected an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise DecodeError("bad_json", f"{where}: expected an integer, got {value!r:.40}") from None


def _json_any(value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise DecodeError("bad_json", f"{where}: expected an AnyValue object")
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return _json_int(value["intValue"], f"{where}.intValue")
    if "doubleValue" in value:
        raw = value["doubleValue"]
        return float(raw) if isinstance(raw, int | float | str) else None
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        values = (value["arrayValue"] or {}).get("values") or []
        return [_json_any(v, f"{where}.arrayValue.values[{i}]") for i, v in enumerate(values)]
    if "kvlistValue" in value:
        return _json_attributes(
            (value["kvlistValue"] or {}).get("values") or [], f"{where}.kvlistValue"
        )
    if "bytesValue" in value:
        try:
            return base64.b64decode(value["bytesValue"], validate=True).hex()
        except (binascii.Error, TypeError):
            raise DecodeError("bad_json", f"{where}.bytesValue: not base64") from None
    return None


def _json_attributes(kvs: Any, where: str) -> dict[str, Any]:
    if not isinstance(kvs, list):
        raise DecodeError("bad_json", f"{where}: expected a list of key/value objects")
    out: dict[str, Any] = {}
    for i, kv in enumerate(kvs):
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise DecodeError("bad_json", f"{where}[{i}]: expected an object with a string key")
        value = kv.get("value")
        if value is not None:
            out[kv["key"]] = _json_any(value, f"{where}[{i}].value")
    return out


def _hex_id(value: Any, size: int, where: str, *, optional: bool = False) -> str:
    if optional and (value is None or value == ""):
        return ""
    if not isinstance(value, str) or len(value) != size * 2:
        raise DecodeError(
            "bad_ids",
            f"{where}: expected {size * 2} hex characters (OTLP/JSON ids are hex, not base64), "
            f"got {value!r:.60}",
        )
    try:
        bytes.fromhex(value)
    except ValueError:
        raise DecodeError(
            "bad_ids", f"{where}: not hex (OTLP/JSON ids are hex, not base64): {value!r:.60}"
        ) from None
    return value.lower()


def decode_json(body: bytes) -> Decoded:
    """Decode an OTLP/JSON `ExportTraceServiceRequest`."""
    return decode_json_request(body, _decode_json, "trace request")


def decode_json_request(body: bytes, decode: Callable[[Any], Decoded], what: str) -> Decoded:
    """Parse an OTLP/JSON body and hand it to `decode`: whatever goes wrong is a DecodeError
    saying whether the body was not JSON or not the `what` it should be."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DecodeError("bad_json", f"body is not JSON: {exc}") from None
    except RecursionError:
        raise DecodeError("bad_json", "body is JSON nested too deeply") from None
    try:
        return decode(data)
    except DecodeError:
        raise
    except (ValueError, TypeError, AttributeError, RecursionError, OverflowError) as exc:
        raise DecodeError("bad_json", f"body is not an OTLP/JSON {what}: {exc}") from None


def _decode_json(data: Any) -> Decoded:
    if not isinstance(data, dict):
        raise DecodeError("bad_json", "body: expected a JSON object with resourceSpans")
    spans: list[Span] = []
    rejected = 0
    message = ""
    for r, rs in enumerate(_json_list(data, "resourceSpans", "resource_spans", "body")):
        rwhere = f"resourceSpans[{r}]"
        if not isinstance(rs, dict):
            raise DecodeError("bad_json", f"{rwhere}: expected an object")
        resource_obj = rs.get("resource") or {}
        resource = _json_attributes(
            resource_obj.get("attributes") or [], f"{rwhere}.resource.attributes"
        )
        service = str(resource.get("service.name") or "unknown")
        for s, ss in enumerate(_json_list(rs, "scopeSpans", "scope_spans", rwhere)):
            swhere = f"{rwhere}.scopeSpans[{s}]"
            if not isinstance(ss, dict):
                raise DecodeError("bad_json", f"{swhere}: expected an object")
            for i, sp in enumerate(_json_list(ss, "spans", "spans", swhere)):
                where = f"{swhere}.spans[{i}]"
                if not isinstance(sp, dict):
                    raise DecodeError("bad_json", f"{where}: expected an object")
                trace_id = _hex_id(_get(sp, "traceId", "trace_id"), 16, f"{where}.traceId")
                span_id = _hex_id(_get(sp, "spanId", "span_id"), 8, f"{where}.spanId")
                parent = _hex_id(
                    _get(sp, "parentSpanId", "parent_span_id"),
                    8,
                    f"{where}.parentSpanId",
                    optional=True,
                )
                if trace_id in _EMPTY_IDS or span_id in _EMPTY_IDS:
                    rejected += 1
                    message = message or f"{where}: trace_id and span_id must not be all zeros"
                    continue
                events = []
                for e, ev in enumerate(_json_list(sp, "events", "events", where)):
                    if not isinstance(ev, dict):
                        raise DecodeError("bad_json", f"{where}.events[{e}]: expected an object")
                    events.append(
                        SpanEvent(
                            str(ev.get("name") or ""),
                            _json_int(
                                _get(ev, "timeUnixNano", "time_unix_nano"), f"{where}.events[{e}]"
                            ),
                            _json_attributes(
                                ev.get("attributes") or [], f"{where}.events[{e}].attributes"
                            ),
                        )
                    )
                status = sp.get("status") or {}
                code = status.get("code") if isinstance(status, dict) else None
                flags = _json_int(sp.get("flags"), f"{where}.flags")
                spans.append(
                    Span(
                        trace_id=trace_id,
                        span_id=span_id,
                        parent_span_id=parent,
                        name=str(sp.get("name") or ""),
                        start_unix_nano=_json_int(
                            _get(sp, "startTimeUnixNano", "start_time_unix_nano"),
                            f"{where}.startTimeUnixNano",
                        ),
                        end_unix_nano=_json_int(
                            _get(sp, "endTimeUnixNano", "end_time_unix_nano"),
                            f"{where}.endTimeUnixNano",
                        ),
                        attributes=_json_attributes(
                            sp.get("attributes") or [], f"{where}.attributes"
                        ),
                        events=events,
                        error=code in (_STATUS_ERROR, "STATUS_CODE_ERROR"),
                        service=service,
                        parent_is_remote=bool(flags & _HAS_IS_REMOTE and flags & _IS_REMOTE),
                        resource=resource,
                    )
                )
    return Decoded(spans, rejected, message)
