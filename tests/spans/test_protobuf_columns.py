"""`read_protobuf`'s column path (the ids of a scope's spans read as columns) gives what
the span-by-span path (each span's skeleton) gives, on requests of every shape, and
leaves a scope whose columns do not line up with its spans, or a body the column view
cannot parse, to the span-by-span path."""

from __future__ import annotations

import random

import pytest
from google.protobuf.message import DecodeError as ProtoDecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from monitor.spans import DecodeError, RequestSpans, read_protobuf
from monitor.spans._lite import ColumnsRequest, RawRequest
from monitor.spans._protobuf import _from_columns, _read

_STATUSES = {
    "unset": None,
    "ok": Status(code=Status.STATUS_CODE_OK),
    "ok with a message": Status(code=Status.STATUS_CODE_OK, message="fine"),
    "error": Status(code=Status.STATUS_CODE_ERROR),
    "error with a message": Status(code=Status.STATUS_CODE_ERROR, message="boom"),
}


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (the lengths here stay below 2**14)."""
    size = len(payload)
    length = bytes([size]) if size < 128 else bytes([size & 0x7F | 0x80, size >> 7])
    return bytes([number << 3 | 2]) + length + payload


_span_shapes = st.tuples(
    st.integers(0, 5),  # which trace
    st.sampled_from(["child", "root", "remote root", "explicit empty parent"]),
    st.sampled_from(sorted(_STATUSES)),
    st.sampled_from([0, 0x100]),  # flags besides the remote parent's
)
_requests = st.lists(  # resources, each a list of scopes, each a list of spans
    st.lists(st.lists(_span_shapes, max_size=12), min_size=1, max_size=2),
    min_size=1,
    max_size=2,
)


def _body(shape: list[list[list[tuple[int, str, str, int]]]], trace_ids: list[bytes]) -> bytes:
    resources = b""
    span_id = 0
    for r, scopes in enumerate(shape):
        resource = Resource(
            attributes=[KeyValue(key="service.name", value=AnyValue(string_value=f"svc-{r}"))]
        ).SerializeToString()
        scopes_bytes = b""
        for spans in scopes:
            spans_bytes = b""
            for trace, kind, status, flags in spans:
                span_id += 1
                has_parent = kind in ("child", "remote root")
                span = ProtoSpan(
                    trace_id=trace_ids[trace],
                    span_id=span_id.to_bytes(8, "big"),
                    parent_span_id=(999).to_bytes(8, "big") if has_parent else b"",
                    name=f"step {span_id}",
                    flags=flags | (0x300 if kind == "remote root" else 0),
                    status=_STATUSES[status],
                ).SerializeToString()
                if kind == "explicit empty parent":
                    span += _field(4, b"")  # what a non-canonical encoder may send
                spans_bytes += _field(2, span)
            scopes_bytes += _field(2, spans_bytes)
        resources += _field(1, _field(1, resource) + scopes_bytes)
    return resources


def _summary(request: RequestSpans, keep: set[bytes]) -> tuple[object, ...]:
    every, kept = request.build(), request.build(keep)
    return (
        [(s.trace_id, s.span_id, s.error, s.service, s.is_root, s.size) for s in every.spans],
        [s.span_id for s in kept.spans],
        kept.forgotten,
        kept.forgotten_roots,
        request.rejected,
        request.message,
        request.trace_ids,
        request.error_ids,
    )


def _paths(body: bytes) -> tuple[RequestSpans, RequestSpans]:
    """The body read by columns, and span by span."""
    raw = RawRequest.FromString(body).resource_spans
    absent = frozenset({"rag.feedback"})
    columns = ColumnsRequest.FromString(body).resource_spans
    return _read(raw, columns, body, absent), _read(raw, None, body, absent)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=_requests, seed=st.integers(0, 2**32), kept=st.sets(st.integers(0, 5)))
def test_the_column_path_agrees_with_the_span_by_span_path(
    shape: list[list[list[tuple[int, str, str, int]]]], seed: int, kept: set[int]
) -> None:
    rng = random.Random(seed)
    trace_ids = [rng.randbytes(16) for _ in range(6)]
    by_columns, span_by_span = _paths(_body(shape, trace_ids))
    keep = {trace_ids[t] for t in kept}
    assert _summary(by_columns, keep) == _summary(span_by_span, keep)


def test_malformed_ids_leave_the_scope_to_the_span_by_span_path() -> None:
    good = ProtoSpan(trace_id=b"\x02" * 16, span_id=b"\x01" * 8, name="ok")
    for bad in (
        ProtoSpan(trace_id=b"\x01" * 15, span_id=b"\x01" * 8),
        ProtoSpan(trace_id=bytes(16), span_id=b"\x01" * 8),
        ProtoSpan(trace_id=b"\x01" * 16, span_id=bytes(8)),
        ProtoSpan(trace_id=b"\x01" * 16, span_id=b"\x01" * 7),
        ProtoSpan(trace_id=b"\x01" * 16, span_id=b"\x01" * 8, parent_span_id=b"\x01" * 4),
        ProtoSpan(span_id=b"\x01" * 8),  # no trace id at all
    ):
        scope = _field(2, good.SerializeToString()) + _field(2, bad.SerializeToString())
        body = _field(1, _field(2, scope))
        column = ColumnsRequest.FromString(body).resource_spans[0].scope_spans[0].spans
        raws = RawRequest.FromString(body).resource_spans[0].scope_spans[0].spans
        assert _from_columns(column, raws) is None
        request = read_protobuf(body)
        assert request.rejected == 1
        assert [s.span_id for s in request.build().spans] == [good.span_id.hex()]


def test_bodies_the_column_view_cannot_parse_are_read_span_by_span() -> None:
    """Flags sent in packed form (a length-delimited field 16) are an unknown field to the
    skeleton, and malformed to the column view: the span-by-span path reads it."""
    span = ProtoSpan(trace_id=b"\x02" * 16, span_id=b"\x01" * 8, name="ok").SerializeToString()
    packed_flags = bytes([0x82, 0x01, 3]) + b"abc"  # field 16, length 3: not a fixed32 list
    body = _field(1, _field(2, _field(2, span + packed_flags)))
    with pytest.raises(ProtoDecodeError):
        ColumnsRequest.FromString(body)
    request = read_protobuf(body)
    assert len(request.build().spans) == 1
    unkept = request.build(set())
    assert (unkept.spans, unkept.forgotten, unkept.forgotten_roots) == ([], 1, {"unknown": 1})


def test_a_span_name_that_is_not_utf8_refuses_the_body() -> None:
    span = ProtoSpan(trace_id=b"\x02" * 16, span_id=b"\x01" * 8).SerializeToString()
    body = _field(1, _field(2, _field(2, span + _field(5, b"\xff\xfe"))))
    with pytest.raises(DecodeError):
        read_protobuf(body)
