"""The fast OTLP protobuf decoder (reduced `_lite` schemas, lazy attributes, fast paths
for short strings) against `opentelemetry-proto`'s own classes: for any request the
official classes parse, both must see the same spans, values and flags.

The reference here converts the official messages itself, independently of the
decoder's code, so a shared mistake cannot hide."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from monitor.spans import decode_protobuf

_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_scalars = (
    st.builds(lambda v: AnyValue(string_value=v), st.text(max_size=200))
    | st.builds(lambda v: AnyValue(int_value=v), st.integers(-(2**63), 2**63 - 1))
    | st.builds(lambda v: AnyValue(double_value=v), st.floats(allow_nan=False))
    | st.builds(lambda v: AnyValue(bool_value=v), st.booleans())
    | st.builds(lambda v: AnyValue(bytes_value=v), st.binary(max_size=20))
    | st.just(AnyValue())
)
_keys = st.text(min_size=1, max_size=20)


def _array(values: list[AnyValue]) -> AnyValue:
    return AnyValue(array_value=ArrayValue(values=values))


def _kvlist(items: dict[str, AnyValue]) -> AnyValue:
    return AnyValue(
        kvlist_value=KeyValueList(values=[KeyValue(key=k, value=v) for k, v in items.items()])
    )


_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4).map(_array)
        | st.dictionaries(_keys, inner, max_size=4).map(_kvlist)
    ),
    max_leaves=12,
)
# Long strings cross the decoder's one- and two-byte length fast paths.
_long_text = st.builds(
    lambda n, c: AnyValue(string_value=c * n), st.integers(100, 20_000), st.sampled_from("aé€")
)
_attributes = st.dictionaries(_keys, _values | _long_text, max_size=6)
_ids = st.binary(min_size=8, max_size=8).filter(any)
_status_codes = st.sampled_from(
    [Status.STATUS_CODE_UNSET, Status.STATUS_CODE_OK, Status.STATUS_CODE_ERROR]
)
_trace_ids = st.binary(min_size=16, max_size=16).filter(any)


@st.composite
def _spans(draw: st.DrawFn) -> Span:
    events = [
        Span.Event(
            time_unix_nano=draw(st.integers(0, 2**63)),
            name=draw(st.text(max_size=20)),
            attributes=[KeyValue(key=k, value=v) for k, v in draw(_attributes).items()],
        )
        for _ in range(draw(st.integers(0, 2)))
    ]
    return Span(
        trace_id=draw(_trace_ids),
        span_id=draw(_ids),
        parent_span_id=draw(st.just(b"") | _ids),
        name=draw(st.text(max_size=30)),
        start_time_unix_nano=draw(st.integers(0, 2**63)),
        end_time_unix_nano=draw(st.integers(0, 2**63)),
        attributes=[KeyValue(key=k, value=v) for k, v in draw(_attributes).items()],
        events=events,
        flags=draw(st.sampled_from([0, 0x100, 0x300, 0x200, 0x1FF])),
        status=Status(code=draw(_status_codes), message=draw(st.text(max_size=10))),
    )


@st.composite
def _requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    resources = []
    for _ in range(draw(st.integers(1, 3))):
        attributes = draw(_attributes)
        if draw(st.booleans()):
            attributes["service.name"] = AnyValue(string_value=draw(st.text(max_size=10)))
        scopes = [
            ScopeSpans(
                scope=InstrumentationScope(name="lib"),
                spans=draw(st.lists(_spans(), max_size=4)),
            )
            for _ in range(draw(st.integers(1, 2)))
        ]
        resources.append(
            ResourceSpans(
                resource=Resource(
                    attributes=[KeyValue(key=k, value=v) for k, v in attributes.items()]
                ),
                scope_spans=scopes,
            )
        )
    return ExportTraceServiceRequest(resource_spans=resources)


def _value(value: AnyValue) -> Any:
    """The reference conversion of an official `AnyValue`."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)


def _attrs(entries: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in entries:  # the last of repeated keys wins, as in a protobuf map
        out[kv.key] = _value(kv.value)
    return out


def _reference(request: ExportTraceServiceRequest) -> list[dict[str, Any]]:
    spans = []
    for rs in request.resource_spans:
        resource = _attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                spans.append(
                    {
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "attributes": _attrs(span.attributes),
                        "events": [
                            (e.name, e.time_unix_nano, _attrs(e.attributes)) for e in span.events
                        ],
                        "error": span.status.code == Status.STATUS_CODE_ERROR,
                        "service": str(resource.get("service.name") or "unknown"),
                        "remote": bool(span.flags & 0x100 and span.flags & 0x200),
                        "resource": resource,
                    }
                )
    return spans


def _same(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to itself (doubles can be NaN on the wire)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@_SETTINGS
@given(_requests())
def test_the_fast_decoder_sees_what_the_official_classes_see(
    request: ExportTraceServiceRequest,
) -> None:
    body = request.SerializeToString()
    expected = _reference(ExportTraceServiceRequest.FromString(body))
    decoded = decode_protobuf(body, lazy=True)
    assert decoded.rejected == 0
    assert len(decoded.spans) == len(expected)
    for span, want in zip(decoded.spans, expected, strict=True):
        # One attribute at a time (the lazy path sampling uses) before full decoding.
        for key, value in want["attributes"].items():
            assert _same(span.attribute(key), value), key
        assert span.attribute("absent.key.never.set", "default") == "default"
        got = {
            "trace_id": span.trace_id,
            "span_id": span.span_id,
            "parent_span_id": span.parent_span_id,
            "name": span.name,
            "start": span.start_unix_nano,
            "end": span.end_unix_nano,
            "attributes": span.attributes,
            "events": [(e.name, e.time_unix_nano, e.attributes) for e in span.events],
            "error": span.error,
            "service": span.service,
            "remote": span.parent_is_remote,
            "resource": span.resource,
        }
        assert _same(got, want), (got, want)


@_SETTINGS
@given(_requests())
def test_eager_and_lazy_decoding_agree(request: ExportTraceServiceRequest) -> None:
    body = request.SerializeToString()
    eager = decode_protobuf(body)
    lazy = decode_protobuf(body, lazy=True)
    assert len(eager.spans) == len(lazy.spans)
    for a, b in zip(eager.spans, lazy.spans, strict=True):
        assert a.decoded and not b.decoded
        assert _same(a.attributes, b.attributes) and _same(
            [(e.name, e.attributes) for e in a.events], [(e.name, e.attributes) for e in b.events]
        )
