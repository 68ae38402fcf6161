"""Kafka message bytes → records (JSON) or OTLP trace payloads, per `receivers.kafka.encoding`.

- `json`: one record in any input shape (`monitor.records.parse_record`) or a JSON array
  of them;
- `otlp_proto`: an `ExportTraceServiceRequest` in protobuf, as the Collector's Kafka
  exporter writes it (`encoding: otlp_proto`);
- `otlp_json`: OTLP/JSON (hex ids), either `{"resourceSpans": [...]}` or a bare list of
  ResourceSpans (what rotel's Kafka exporter writes with `--kafka-exporter-format json`);
- `auto`: per message, by the first byte: `{` / `[` → JSON (OTLP/JSON when it has
  resource spans, records otherwise); 0x0A (protobuf field 1, length-delimited) → OTLP
  protobuf; anything else is rejected as `unknown_encoding`.

Problems are `Rejection(reason, detail)` with a closed-set reason for
`records_rejected_total{receiver="kafka",reason}`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from monitor.records import RagRecord, RecordError, parse_record

Encoding = Literal["auto", "json", "otlp_proto", "otlp_json"]
_JSON_START = frozenset(b"{[")
_PROTO_START = 0x0A
_WHITESPACE = b" \t\r\n"
_RESOURCE_SPANS_KEYS = ("resourceSpans", "resource_spans")
_SCOPE_SPANS_KEYS = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans")


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: str
    detail: str


@dataclass(slots=True)
class Decoded:
    """What one message held: JSON records, or an OTLP payload to assemble."""

    records: list[RagRecord] = field(default_factory=list)
    otlp_proto: bytes | None = None
    otlp_json: dict[str, Any] | None = None
    problems: list[Rejection] = field(default_factory=list)


def decode_message(value: bytes | None, encoding: Encoding) -> Decoded:
    """Decode one message value. Never raises on bad input: problems are returned."""
    if not value:
        return Decoded(problems=[Rejection("empty", "message has no value")])
    if encoding == "otlp_proto":
        return Decoded(otlp_proto=value)
    if encoding == "auto":
        first = value.lstrip(_WHITESPACE)[:1]
        if first and first[0] == _PROTO_START:
            return Decoded(otlp_proto=value)
        if not first or first[0] not in _JSON_START:
            return Decoded(
                problems=[
                    Rejection(
                        "unknown_encoding",
                        f"neither JSON nor OTLP protobuf (first byte {value[:1]!r})",
                    )
                ]
            )
    try:
        data = json.loads(value)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return Decoded(problems=[Rejection("bad_json", f"bad JSON: {exc}")])
    otlp = _as_otlp_json(data)
    if encoding == "otlp_json":
        if otlp is None:
            return Decoded(
                problems=[
                    Rejection(
                        "bad_otlp",
                        "expected OTLP/JSON: an object with resourceSpans or a list of "
                        "ResourceSpans",
                    )
                ]
            )
        return Decoded(otlp_json=otlp)
    if encoding == "auto" and otlp is not None:
        return Decoded(otlp_json=otlp)
    return _records(data)


def _as_otlp_json(data: Any) -> dict[str, Any] | None:
    """The OTLP/JSON request object for `data`, or None when it is not OTLP/JSON."""
    if isinstance(data, dict):
        for key in _RESOURCE_SPANS_KEYS:
            if isinstance(data.get(key), list):
                return {"resourceSpans": data[key]}
        return None
    if (
        isinstance(data, list)
        and data
        and isinstance(data[0], dict)
        and any(k in data[0] for k in _SCOPE_SPANS_KEYS)
    ):
        return {"resourceSpans": data}
    return None


def _records(data: Any) -> Decoded:
    out = Decoded()
    items = data if isinstance(data, list) else [data]
    many = isinstance(data, list)
    if many and not items:
        out.problems.append(Rejection("empty", "empty JSON array"))
    for i, item in enumerate(items):
        try:
            out.records.append(parse_record(item))
        except RecordError as exc:
            where = f"record {i}: " if many else ""
            out.problems.append(Rejection(exc.reason, f"{where}{exc.detail}"))
    return out
