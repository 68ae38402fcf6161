"""OTLP/JSON trace payloads → `Span` objects.

OTLP/JSON differs from the protobuf JSON mapping: trace and span ids are hex strings, not
base64, and 64-bit integers may arrive as strings. A JSON body with an id that is not hex
is rejected as a whole (HTTP 400), naming the field, because it almost always means the
sender encoded every id the same wrong way. Any other field of the wrong type or range
costs its span alone (rejected, counted, named), and an attribute value that cannot be
read costs that value alone (`monitor/shared/nesting.py`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from typing import Any

from monitor.shared.nesting import MAX_DEPTH, MAX_ITEMS
from monitor.spans._span import (
    _CORRUPT,
    _EMPTY_IDS,
    _HAS_IS_REMOTE,
    _IS_REMOTE,
    _STATUS_ERROR,
    _TOO_DEEP,
    _TOO_LARGE,
    _UNREAD,
    Decoded,
    DecodeError,
    Span,
    SpanEvent,
    _Unread,
)

_HEX = re.compile(r"[0-9a-fA-F]*")


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


def _json_int(value: Any, where: str, *, signed: bool = False, bits: int = 64) -> int:
    """An integer as OTLP/JSON writes one (a number or a string), within the range of its
    protobuf type (unsigned 64-bit for times and flags by default)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise DecodeError("bad_json", f"{where}: expected an integer")
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise DecodeError("bad_json", f"{where}: expected an integer, got {value!r:.40}") from None
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not low <= number <= high:
        kind = f"{'' if signed else 'u'}int{bits}"
        raise DecodeError("bad_json", f"{where}: {value!r:.40} is out of range for an {kind}")
    return number


def _json_any(value: Any, where: str, depth: int = 1, budget: list[int] | None = None) -> Any:
    """An OTLP/JSON `AnyValue` → Python value, or why it cannot be one, a bad value of its
    attribute that is left out: `_CORRUPT` (not an AnyValue, or its field of the wrong
    type or range), `_TOO_DEEP` (arrays or kvlists nested deeper than `MAX_DEPTH`),
    `_TOO_LARGE` (more than `MAX_ITEMS` values, nested ones included: `budget` is what is
    left of them)."""
    try:
        return _json_value(value, where, depth, budget)
    except (ValueError, TypeError, AttributeError, OverflowError):  # DecodeError included
        return _CORRUPT


def _json_value(value: Any, where: str, depth: int, budget: list[int] | None) -> Any:
    if not isinstance(value, dict):
        raise DecodeError("bad_json", f"{where}: expected an AnyValue object")
    if "stringValue" in value:
        text = value["stringValue"]
        if not isinstance(text, str):
            raise DecodeError("bad_json", f"{where}.stringValue: expected a string")
        return text
    if "intValue" in value:
        return _json_int(value["intValue"], f"{where}.intValue", signed=True)
    if "doubleValue" in value:
        raw = value["doubleValue"]
        return float(raw) if isinstance(raw, int | float | str) else None
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value or "kvlistValue" in value:
        if depth > MAX_DEPTH:
            return _TOO_DEEP
        budget = [MAX_ITEMS] if budget is None else budget
        kind = "arrayValue" if "arrayValue" in value else "kvlistValue"
        values = (value[kind] or {}).get("values") or []
        budget[0] -= len(values)
        if budget[0] < 0:
            return _TOO_LARGE
        if kind == "arrayValue":
            items = [
                _json_any(v, f"{where}.arrayValue.values[{i}]", depth + 1, budget)
                for i, v in enumerate(values)
            ]
            return next((v for v in items if isinstance(v, _Unread)), items)
        inner: list[str] = []
        pairs = _json_attributes(values, f"{where}.kvlistValue", inner, depth, budget)
        return _UNREAD[inner[0]] if inner else pairs
    if "bytesValue" in value:
        try:
            return base64.b64decode(value["bytesValue"], validate=True).hex()
        except (binascii.Error, TypeError, ValueError):
            raise DecodeError("bad_json", f"{where}.bytesValue: not base64") from None
    return None


def _json_attributes(
    kvs: Any,
    where: str,
    unread: list[str] | None = None,
    depth: int = 0,
    budget: list[int] | None = None,
) -> dict[str, Any]:
    """OTLP/JSON key/value objects → Python values; a value that cannot be read (nested
    too deeply, too many values) is left out and its reason appended to `unread`. Each
    attribute has its own `MAX_ITEMS`; the values of a kvlist share its `budget`."""
    if not isinstance(kvs, list):
        raise DecodeError("bad_json", f"{where}: expected a list of key/value objects")
    out: dict[str, Any] = {}
    for i, kv in enumerate(kvs):
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise DecodeError("bad_json", f"{where}[{i}]: expected an object with a string key")
        value = kv.get("value")
        if value is None:
            continue
        parsed = _json_any(value, f"{where}[{i}].value", depth + 1, budget)
        if not isinstance(parsed, _Unread):
            out[kv["key"]] = parsed
        elif unread is not None:
            unread.append(parsed.reason)
    return out


def _hex_id(value: Any, size: int, where: str, *, optional: bool = False) -> str:
    """A hex id of `size` bytes. Not a string of hex digits: `bad_ids` (the sender encodes
    every id that way: base64, most often); hex of the wrong length: `invalid_span`."""
    if optional and (value is None or value == ""):
        return ""
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise DecodeError(
            "bad_ids",
            f"{where}: expected {size * 2} hex characters (OTLP/JSON ids are hex, not base64), "
            f"got {value!r:.60}",
        )
    if len(value) != size * 2:
        raise DecodeError(
            "invalid_span", f"{where}: expected {size * 2} hex characters, got {len(value)}"
        )
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
    """The spans of a trace request. A span (or a resource's spans) with a field of the
    wrong type, or an id of the wrong length, is rejected alone, named in the message and
    counted in `rejected`; ids that are not hex and a body of the wrong shape reject the
    whole request."""
    if not isinstance(data, dict):
        raise DecodeError("bad_json", "body: expected a JSON object with resourceSpans")
    spans: list[Span] = []
    rejected = 0
    message = ""
    for r, rs in enumerate(_json_list(data, "resourceSpans", "resource_spans", "body")):
        rwhere = f"resourceSpans[{r}]"
        if not isinstance(rs, dict):
            raise DecodeError("bad_json", f"{rwhere}: expected an object")
        scopes = [
            (f"{rwhere}.scopeSpans[{s}]", ss)
            for s, ss in enumerate(_json_list(rs, "scopeSpans", "scope_spans", rwhere))
        ]
        for swhere, ss in scopes:
            if not isinstance(ss, dict):
                raise DecodeError("bad_json", f"{swhere}: expected an object")
        try:
            resource_obj = rs.get("resource") or {}
            if not isinstance(resource_obj, dict):
                raise DecodeError("bad_json", f"{rwhere}.resource: expected an object")
            resource = _json_attributes(
                resource_obj.get("attributes") or [], f"{rwhere}.resource.attributes"
            )
        except DecodeError as exc:
            rejected += sum(len(_json_list(ss, "spans", "spans", w)) for w, ss in scopes)
            message = message or exc.detail
            continue
        service = str(resource.get("service.name") or "unknown")
        for swhere, ss in scopes:
            for i, sp in enumerate(_json_list(ss, "spans", "spans", swhere)):
                try:
                    spans.append(_json_span(sp, f"{swhere}.spans[{i}]", service, resource))
                except DecodeError as exc:
                    if exc.reason == "bad_ids":
                        raise
                    rejected += 1
                    message = message or exc.detail
    return Decoded(spans, rejected, message)


def _json_span(sp: Any, where: str, service: str, resource: dict[str, Any]) -> Span:
    """One span; `DecodeError` (`invalid_span`: this span alone; `bad_ids`: the request)."""
    if not isinstance(sp, dict):
        raise DecodeError("invalid_span", f"{where}: expected an object")
    trace_id = _hex_id(_get(sp, "traceId", "trace_id"), 16, f"{where}.traceId")
    span_id = _hex_id(_get(sp, "spanId", "span_id"), 8, f"{where}.spanId")
    parent = _hex_id(
        _get(sp, "parentSpanId", "parent_span_id"), 8, f"{where}.parentSpanId", optional=True
    )
    if trace_id in _EMPTY_IDS or span_id in _EMPTY_IDS:
        raise DecodeError("invalid_span", f"{where}: trace_id and span_id must not be all zeros")
    try:
        events = []
        unread: list[str] = []
        for e, ev in enumerate(_json_list(sp, "events", "events", where)):
            if not isinstance(ev, dict):
                raise DecodeError("bad_json", f"{where}.events[{e}]: expected an object")
            events.append(
                SpanEvent(
                    str(ev.get("name") or ""),
                    _json_int(_get(ev, "timeUnixNano", "time_unix_nano"), f"{where}.events[{e}]"),
                    _json_attributes(
                        ev.get("attributes") or [], f"{where}.events[{e}].attributes", unread
                    ),
                )
            )
        status = sp.get("status") or {}
        code = status.get("code") if isinstance(status, dict) else None
        flags = _json_int(sp.get("flags"), f"{where}.flags", bits=32)
        return Span(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent,
            name=str(sp.get("name") or ""),
            start_unix_nano=_json_int(
                _get(sp, "startTimeUnixNano", "start_time_unix_nano"), f"{where}.startTimeUnixNano"
            ),
            end_unix_nano=_json_int(
                _get(sp, "endTimeUnixNano", "end_time_unix_nano"), f"{where}.endTimeUnixNano"
            ),
            attributes=_json_attributes(sp.get("attributes") or [], f"{where}.attributes", unread),
            events=events,
            error=code in (_STATUS_ERROR, "STATUS_CODE_ERROR"),
            service=service,
            parent_is_remote=bool(flags & _HAS_IS_REMOTE and flags & _IS_REMOTE),
            resource=resource,
            unread=tuple(unread),
        )
    except DecodeError as exc:
        raise DecodeError("invalid_span", exc.detail) from None
    except (ValueError, TypeError, AttributeError, OverflowError) as exc:
        raise DecodeError("invalid_span", f"{where}: {type(exc).__name__}: {exc}") from None


def encode_value(value: Any, text: Callable[[str], str]) -> dict[str, Any]:
    """A Python attribute value (as the decoders make one) → an OTLP/JSON `AnyValue`;
    `text` maps each string on the way (redaction)."""
    if isinstance(value, str):
        return {"stringValue": text(value)}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": encode_attributes(value, text)}}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [encode_value(v, text) for v in value]}}
    return {}


def encode_attributes(attributes: dict[str, Any], text: Callable[[str], str]) -> list[Any]:
    return [{"key": k, "value": encode_value(v, text)} for k, v in attributes.items()]


def encode_span(span: Span, text: Callable[[str], str]) -> dict[str, Any]:
    """One span as OTLP/JSON writes it (ids in hex), as `decode_json` reads it back: its
    attributes' and events' strings mapped by `text`. Raises `DecodeError` when the
    span's bytes turn out corrupt."""
    encoded: dict[str, Any] = {
        "traceId": span.trace_id,
        "spanId": span.span_id,
        "name": span.name,
        "startTimeUnixNano": str(span.start_unix_nano),
        "endTimeUnixNano": str(span.end_unix_nano),
        "attributes": encode_attributes(span.attributes, text),
    }
    if span.parent_span_id:
        encoded["parentSpanId"] = span.parent_span_id
    if span.parent_is_remote:
        encoded["flags"] = _HAS_IS_REMOTE | _IS_REMOTE
    if span.events:
        encoded["events"] = [
            {
                "name": event.name,
                "timeUnixNano": str(event.time_unix_nano),
                "attributes": encode_attributes(event.attributes, text),
            }
            for event in span.events
        ]
    if span.error:
        encoded["status"] = {"code": _STATUS_ERROR}
    return encoded


def encode_request(resource_spans: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> bytes:
    """An OTLP/JSON `ExportTraceServiceRequest` of encoded spans, by resource."""
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": encode_attributes(resource, str)},
                "scopeSpans": [{"spans": spans}],
            }
            for resource, spans in resource_spans
        ]
    }
    return json.dumps(body, ensure_ascii=False).encode()
