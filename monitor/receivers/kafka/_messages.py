"""Kafka message bytes → records (JSON) or OTLP trace payloads, per `receivers.kafka.encoding`.

- `json`: one record in any input shape (`monitor.records`) or a JSON array of them;
  each becomes a `RawRecord`, validated only if it is sampled (by the trace stage, which
  reports what does not validate through the delivery's `on_rejected`);
- `otlp_proto`: an `ExportTraceServiceRequest` in protobuf, as the Collector's Kafka
  exporter writes it (`encoding: otlp_proto`);
- `otlp_json`: OTLP/JSON (hex ids), either `{"resourceSpans": [...]}` or a bare list of
  ResourceSpans (what rotel's Kafka exporter writes with `--kafka-exporter-format json`);
- `auto`: per message, by the first byte: `{` / `[` (after whitespace) → JSON (OTLP/JSON
  when it has resource spans, records otherwise); 0x0A (protobuf field 1,
  length-delimited) → OTLP protobuf (0x0A is also a newline, so a message that starts
  with it and then looks like JSON is tried as JSON first); anything else is rejected as
  `unknown_encoding`.

OTLP payloads are decoded with `monitor.spans` (eagerly: a message whose span attributes
are corrupt is rejected, and dead-lettered, as a whole). Problems are
`Rejection(reason, detail)` with a closed-set reason for
`records_rejected_total{receiver="kafka",reason}`: `empty`, `bad_json`,
`unknown_encoding`, `bad_protobuf`, `invalid_span`, `not_object`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from monitor.records import RawRecord
from monitor.spans import Decoded as OtlpDecoded
from monitor.spans import DecodeError, Span, decode_json, decode_protobuf

Encoding = Literal["auto", "json", "otlp_proto", "otlp_json"]
_JSON_START = frozenset(b"{[")
_OPEN_BRACE = 0x7B
_RECORD_ENCODINGS = frozenset({"auto", "json"})
_PROTO_START = 0x0A
_WHITESPACE = b" \t\r\n"
_SNIFF_BYTES = 256  # leading whitespace looked past when detecting the encoding
_SCOPE_SPANS_KEYS = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans")


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: str
    detail: str


@dataclass(slots=True)
class Decoded:
    """What one message held: JSON records, or OTLP spans to assemble."""

    records: list[RawRecord] = field(default_factory=list)
    spans: list[Span] | None = None
    problems: list[Rejection] = field(default_factory=list)
    # For a JSON array: each record's index in it (its non-objects are problems instead).
    positions: list[int] | None = None


def decode_message(value: bytes | None, encoding: Encoding) -> Decoded:
    """Decode one message value.
    Never raises on bad input: problems are returned."""
    if not value:
        return Decoded(problems=[Rejection("empty", "message has no value")])
    if value[0] == _OPEN_BRACE and encoding in _RECORD_ENCODINGS:
        # The common message, one JSON object: nothing to sniff. One that is not JSON
        # takes the general path below, which says why.
        try:
            data = orjson.loads(value)
        except orjson.JSONDecodeError:
            pass
        else:
            if isinstance(data, dict):
                if encoding == "auto" and _is_otlp_json(data):
                    return _otlp(decode_json, value)
                return Decoded(records=[RawRecord(data)])
    # Most messages start with their JSON; only others pay for looking past whitespace.
    first = value[:1] if value[0] in _JSON_START else value[:_SNIFF_BYTES].lstrip(_WHITESPACE)[:1]
    looks_json = bool(first) and first[0] in _JSON_START
    if encoding == "otlp_proto" or (
        encoding == "auto" and value[0] == _PROTO_START and not looks_json
    ):
        return _otlp(decode_protobuf, value)
    if encoding == "otlp_json":
        return _otlp(decode_json, _otlp_json_body(value, first))
    if not looks_json:
        # A JSON string, number, boolean or null is JSON too, just not a record.
        try:
            return _records(orjson.loads(value))
        except orjson.JSONDecodeError:
            pass
        reason = "unknown_encoding" if encoding == "auto" else "bad_json"
        return Decoded(
            problems=[
                Rejection(reason, f"neither JSON nor OTLP protobuf (first byte {value[:1]!r})")
            ]
        )
    try:
        # orjson: bad UTF-8 and nesting deeper than 1024 are decode errors too.
        data = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        if encoding == "auto" and value[0] == _PROTO_START:
            # 0x0A is both protobuf's first tag and a newline: JSON failed, so protobuf.
            return _otlp(decode_protobuf, value)
        return Decoded(problems=[Rejection("bad_json", f"bad JSON: {exc}")])
    if encoding == "auto" and _is_otlp_json(data):
        return _otlp(decode_json, _otlp_json_body(value, first))
    return _records(data)


def _otlp_json_body(value: bytes, first: bytes) -> bytes:
    """A bare list of ResourceSpans becomes `{"resourceSpans": [...]}` (no re-encoding)."""
    return b'{"resourceSpans":' + value + b"}" if first == b"[" else value


def _otlp(decode: Callable[[bytes], OtlpDecoded], body: bytes) -> Decoded:
    try:
        decoded = decode(body)
    except DecodeError as exc:
        return Decoded(problems=[Rejection(exc.reason, exc.detail)])
    out = Decoded(spans=decoded.spans)
    if decoded.rejected:
        out.problems.append(
            Rejection("invalid_span", f"{decoded.rejected} spans rejected: {decoded.message}")
        )
    elif not decoded.spans:
        out.problems.append(Rejection("empty", "OTLP request without spans"))
    return out


def _is_otlp_json(data: Any) -> bool:
    if isinstance(data, dict):
        # Checked for every JSON record: plain lookups, no generator.
        return isinstance(data.get("resourceSpans"), list) or isinstance(
            data.get("resource_spans"), list
        )
    return (
        isinstance(data, list)
        and bool(data)
        and isinstance(data[0], dict)
        and any(key in data[0] for key in _SCOPE_SPANS_KEYS)
    )


def _records(data: Any) -> Decoded:
    """JSON records, to be validated by whoever evaluates them (`RawRecord.parse`)."""
    if isinstance(data, dict):  # one record, the common case
        return Decoded(records=[RawRecord(data)])
    many = isinstance(data, list)
    out = Decoded(positions=[] if many else None)
    items = data if many else [data]
    if many and not items:
        out.problems.append(Rejection("empty", "empty JSON array"))
    for i, item in enumerate(items):
        if isinstance(item, dict):
            out.records.append(RawRecord(item))
            if out.positions is not None:
                out.positions.append(i)
        else:
            where = f"record {i}: " if many else ""
            detail = f"{where}{_json_kind(item)} where a record object was expected"
            out.problems.append(Rejection("not_object", detail))
    return out


def _json_kind(value: Any) -> str:
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, int | float):
        return "a JSON number"
    if isinstance(value, list):
        return "a JSON array"
    return "JSON null" if value is None else f"a JSON {type(value).__name__}"
