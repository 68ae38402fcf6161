"""Wire-compatible, reduced views of `ExportTraceServiceRequest` for fast decoding.

Views of the same bytes, each parsed by the C (upb) parser in one call:

- `SkeletonRequest`: per span only what trace assembly needs (ids, parent, name, times,
  flags) plus the status as raw bytes; attributes and events are skipped as unknown
  fields. Resource attributes are kept (one map per resource, read once per request).
- `RawRequest`: each span as its serialized bytes (`ScopeSpans.spans` declared as
  `repeated bytes`), kept so that a span's attributes and events can be decoded later,
  and only for the traces that are evaluated.
- `ColumnsRequest`: per scope, the skeleton's fields (but the times) of all its spans as
  columns, for reading a request (`read_protobuf`): `ScopeSpans.spans` is declared as a
  single message whose fields are repeated, and the parser merges the occurrences of a
  single message field into one, appending each span's values to the columns. A field a
  span omits (an empty parent, status or flags) adds nothing to its column, so only the
  columns of fields every valid span has (trace and span ids) line up with the spans.
  The spans asked for are read from their serialized bytes (`RawRequest`) as
  `SkeletonSpan`s.
- `LiteSpan`: one span with attributes and events, for that later decoding. The OTLP
  `KeyValue {string key = 1; AnyValue value = 2;}` has the same wire format as a
  protobuf map entry, so declaring `attributes` as `map<string, bytes>` lets the C parser
  build the key → serialized-`AnyValue` mapping in one step instead of allocating two
  message wrappers per attribute (about twice as fast on RAG-sized spans).

And of `ExportLogsServiceRequest`:

- `LogsRequest`: per log record its ids, times, event name, and its body and attributes
  still serialized (`body` as bytes, `attributes` as `map<string, bytes>`), so that a
  GenAI event becomes an event span as bytes (a `LiteSpan`) and its content is decoded
  only when read, for the traces that are evaluated, like a span's.

Fields the monitor never reads (trace_state, links, dropped counts, scope, severity) are
left out and skipped by the parser as unknown fields.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "rag_monitor.otlp_lite"

Field = tuple[str, int, int, bool, str | None]


def _message(
    file: descriptor_pb2.FileDescriptorProto, name: str, fields: list[Field], *, attrs: int = 0
) -> None:
    desc = file.message_type.add(name=name)
    if attrs:
        entry = desc.nested_type.add(name="AttributesEntry")
        entry.field.add(name="key", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
        entry.field.add(name="value", number=2, type=_F.TYPE_BYTES, label=_F.LABEL_OPTIONAL)
        entry.options.map_entry = True
        fields = [*fields, ("attributes", attrs, _F.TYPE_MESSAGE, True, f"{name}.AttributesEntry")]
    for field_name, number, kind, repeated, type_name in fields:
        field = desc.field.add(
            name=field_name,
            number=number,
            type=kind,
            label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL,
        )
        if type_name is not None:
            field.type_name = f".{file.package}.{type_name}"


def _span_ids() -> list[Field]:
    return [
        ("trace_id", 1, _F.TYPE_BYTES, False, None),
        ("span_id", 2, _F.TYPE_BYTES, False, None),
        ("parent_span_id", 4, _F.TYPE_BYTES, False, None),
        ("name", 5, _F.TYPE_STRING, False, None),
        ("start_time_unix_nano", 7, _F.TYPE_FIXED64, False, None),
        ("end_time_unix_nano", 8, _F.TYPE_FIXED64, False, None),
        ("flags", 16, _F.TYPE_FIXED32, False, None),
    ]


def _request(
    file: descriptor_pb2.FileDescriptorProto,
    span: tuple[int, str | None],
    *,
    resource: bool,
    spans_repeated: bool = True,
) -> None:
    kind, type_name = span
    _message(file, "ScopeSpans", [("spans", 2, kind, spans_repeated, type_name)])
    fields: list[Field] = [("scope_spans", 2, _F.TYPE_MESSAGE, True, "ScopeSpans")]
    if resource:
        _message(file, "Resource", [], attrs=1)
        fields.append(("resource", 1, _F.TYPE_MESSAGE, False, "Resource"))
    _message(file, "ResourceSpans", fields)
    _message(file, "Request", [("resource_spans", 1, _F.TYPE_MESSAGE, True, "ResourceSpans")])


def _logs(file: descriptor_pb2.FileDescriptorProto) -> None:
    _message(
        file,
        "LogRecord",
        [
            ("time_unix_nano", 1, _F.TYPE_FIXED64, False, None),
            ("body", 5, _F.TYPE_BYTES, False, None),
            ("trace_id", 9, _F.TYPE_BYTES, False, None),
            ("span_id", 10, _F.TYPE_BYTES, False, None),
            ("observed_time_unix_nano", 11, _F.TYPE_FIXED64, False, None),
            ("event_name", 12, _F.TYPE_STRING, False, None),
        ],
        attrs=6,
    )
    _message(file, "ScopeLogs", [("log_records", 2, _F.TYPE_MESSAGE, True, "LogRecord")])
    _message(file, "Resource", [], attrs=1)
    _message(
        file,
        "ResourceLogs",
        [
            ("resource", 1, _F.TYPE_MESSAGE, False, "Resource"),
            ("scope_logs", 2, _F.TYPE_MESSAGE, True, "ScopeLogs"),
        ],
    )
    _message(file, "Request", [("resource_logs", 1, _F.TYPE_MESSAGE, True, "ResourceLogs")])


def _build() -> tuple[type[Any], type[Any], type[Any], type[Any], type[Any], type[Any], type[Any]]:
    pool = descriptor_pool.DescriptorPool()

    skeleton = descriptor_pb2.FileDescriptorProto(
        name="rag_monitor_otlp_skeleton.proto", package=f"{_PACKAGE}.skeleton", syntax="proto3"
    )
    # The status stays serialized: almost always empty or {code: OK}, compared as bytes.
    skeleton_span = [*_span_ids(), ("status", 15, _F.TYPE_BYTES, False, None)]
    _message(skeleton, "Span", skeleton_span)
    _request(skeleton, (_F.TYPE_MESSAGE, "Span"), resource=True)
    pool.Add(skeleton)

    raw = descriptor_pb2.FileDescriptorProto(
        name="rag_monitor_otlp_raw.proto", package=f"{_PACKAGE}.raw", syntax="proto3"
    )
    _request(raw, (_F.TYPE_BYTES, None), resource=False)
    pool.Add(raw)

    columns = descriptor_pb2.FileDescriptorProto(
        name="rag_monitor_otlp_columns.proto", package=f"{_PACKAGE}.columns", syntax="proto3"
    )
    # The skeleton's fields but the times, each repeated: a body the skeleton refuses (a
    # span name or a resource attribute key that is not UTF-8) is refused here too.
    _message(
        columns,
        "Span",
        [(name, n, kind, True, t) for name, n, kind, _, t in skeleton_span if n not in (7, 8)],
    )
    _request(columns, (_F.TYPE_MESSAGE, "Span"), resource=True, spans_repeated=False)
    pool.Add(columns)

    full = descriptor_pb2.FileDescriptorProto(
        name="rag_monitor_otlp_span.proto", package=f"{_PACKAGE}.span", syntax="proto3"
    )
    _message(full, "Status", [("code", 3, _F.TYPE_INT32, False, None)])
    _message(
        full,
        "Event",
        [
            ("time_unix_nano", 1, _F.TYPE_FIXED64, False, None),
            ("name", 2, _F.TYPE_STRING, False, None),
        ],
        attrs=3,
    )
    _message(full, "Span", [("events", 11, _F.TYPE_MESSAGE, True, "Event")], attrs=9)
    pool.Add(full)

    logs = descriptor_pb2.FileDescriptorProto(
        name="rag_monitor_otlp_logs.proto", package=f"{_PACKAGE}.logs", syntax="proto3"
    )
    _logs(logs)
    pool.Add(logs)

    def cls(name: str) -> type[Any]:
        found: type[Any] = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
        return found

    return (
        cls(f"{_PACKAGE}.skeleton.Request"),
        cls(f"{_PACKAGE}.skeleton.Span"),
        cls(f"{_PACKAGE}.raw.Request"),
        cls(f"{_PACKAGE}.columns.Request"),
        cls(f"{_PACKAGE}.span.Span"),
        cls(f"{_PACKAGE}.span.Status"),
        cls(f"{_PACKAGE}.logs.Request"),
    )


SkeletonRequest, SkeletonSpan, RawRequest, ColumnsRequest, LiteSpan, LiteStatus, LogsRequest = (
    _build()
)
