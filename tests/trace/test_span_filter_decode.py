"""The trace stage's span filter on OTLP protobuf requests (`SpanFilter.request` over
`read_protobuf`): the spans built are exactly those of the traces that may be sampled or
are forced, the others are counted, and what forces sampling (an ERROR status anywhere in
the request, `rag.feedback` anywhere in the body) is never skipped. The reference is the
full decode, filtered by the sampler's own decision."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Status
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from monitor.config import Config
from monitor.processors.sampler import Sampler
from monitor.processors.trace._filter import SpanFilter
from monitor.spans import Built, Span, decode_protobuf, read_protobuf

_REMOTE_PARENT = 0x300


def _filter(rate: float, **always: bool) -> tuple[SpanFilter, Sampler]:
    config = Config.model_validate({"sampling": {"rate": rate, "always": always}})
    sampler = Sampler(config.sampling, {e.name: e.sample_rate for e in config.evaluators})
    return SpanFilter(sampler, max_remembered=100, keep_all=False), sampler


def _kept(span_filter: SpanFilter, body: bytes) -> Built:
    return span_filter.request(read_protobuf(body))


def _span(
    trace_id: bytes,
    span_id: int,
    parent: int | None,
    *,
    error: bool = False,
    remote: bool = False,
    attributes: dict[str, str] | None = None,
) -> ProtoSpan:
    return ProtoSpan(
        trace_id=trace_id,
        span_id=span_id.to_bytes(8, "big"),
        parent_span_id=b"" if parent is None else parent.to_bytes(8, "big"),
        name=f"step {span_id}",
        start_time_unix_nano=span_id,
        end_time_unix_nano=span_id + 1,
        flags=_REMOTE_PARENT if remote else 0,
        status=Status(code=Status.STATUS_CODE_ERROR if error else Status.STATUS_CODE_OK),
        attributes=[
            KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in (attributes or {}).items()
        ],
    )


def _request(*by_service: tuple[str, list[ProtoSpan]]) -> bytes:
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(
                    attributes=[KeyValue(key="service.name", value=AnyValue(string_value=name))]
                ),
                scope_spans=[ScopeSpans(spans=spans)],
            )
            for name, spans in by_service
        ]
    ).SerializeToString()


def _ids(spans: list[Span]) -> list[tuple[str, str]]:
    return [(s.trace_id, s.span_id) for s in spans]


def _unsampled_trace(sampler: Sampler, rng: random.Random) -> bytes:
    while True:
        trace_id = rng.randbytes(16)
        if not sampler.may_sample(trace_id.hex()):
            return trace_id


_traces = st.lists(
    st.tuples(
        st.binary(min_size=16, max_size=16),
        st.integers(1, 5),  # spans
        st.booleans(),  # root included
        st.sets(st.integers(0, 4), max_size=2),  # spans with status ERROR
        st.sampled_from(["svc-a", "svc-b"]),
    ),
    max_size=30,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces=_traces, rate=st.sampled_from([0.0, 0.3, 1.0]), always_error=st.booleans())
def test_what_is_built_is_the_full_decode_of_the_traces_kept(
    traces: list[tuple[bytes, int, bool, set[int], str]], rate: float, always_error: bool
) -> None:
    span_filter, sampler = _filter(rate, error=always_error)
    by_service: dict[str, list[ProtoSpan]] = {"svc-a": [], "svc-b": []}
    for trace_id, count, with_root, errors, service in traces:
        for n in range(count):
            root = with_root and n == count - 1  # the root ends last
            by_service[service].append(
                _span(trace_id, n + 1, None if root else 100, error=n in errors)
            )
    body = _request(*by_service.items())
    full = decode_protobuf(body, lazy=True)
    built = _kept(span_filter, body)

    forced = {s.trace_id for s in full.spans if always_error and s.error}
    kept = [s for s in full.spans if sampler.may_sample(s.trace_id) or s.trace_id in forced]
    assert _ids(built.spans) == _ids(kept)
    assert built.spans == kept
    assert built.forgotten == len(full.spans) - len(kept)
    roots: dict[str, int] = {}
    for span in full.spans:
        if span.is_root and span not in kept:
            roots[span.service] = roots.get(span.service, 0) + 1
    assert built.forgotten_roots == roots
    request = read_protobuf(body)
    assert (request.rejected, request.message) == (full.rejected, full.message)


def test_an_error_forces_the_spans_before_it_and_after_it() -> None:
    span_filter, sampler = _filter(0.0, error=True)
    trace_id = _unsampled_trace(sampler, random.Random(1))
    other = _unsampled_trace(sampler, random.Random(2))
    body = _request(
        (
            "svc",
            [_span(trace_id, 2, 1), _span(other, 1, None), _span(trace_id, 1, None, error=True)],
        )
    )
    decoded = _kept(span_filter, body)
    assert _ids(decoded.spans) == [(trace_id.hex(), f"{2:016x}"), (trace_id.hex(), f"{1:016x}")]
    assert (decoded.forgotten, decoded.forgotten_roots) == (1, {"svc": 1})
    # A span of the forced trace that comes later, without an error, is kept too.
    later = _kept(span_filter, _request(("svc", [_span(trace_id, 3, 1)])))
    assert _ids(later.spans) == [(trace_id.hex(), f"{3:016x}")]


def test_errors_force_nothing_unless_configured() -> None:
    span_filter, sampler = _filter(0.0, error=False)
    trace_id = _unsampled_trace(sampler, random.Random(3))
    body = _request(("svc", [_span(trace_id, 1, None, error=True)]))
    decoded = _kept(span_filter, body)
    assert (decoded.spans, decoded.forgotten, decoded.forgotten_roots) == ([], 1, {"svc": 1})


@pytest.mark.parametrize("always_feedback", [True, False])
def test_a_body_with_feedback_is_decoded_whole_when_feedback_forces(
    always_feedback: bool,
) -> None:
    span_filter, sampler = _filter(0.0, negative_feedback=always_feedback)
    rng = random.Random(4)
    quiet, rated = _unsampled_trace(sampler, rng), _unsampled_trace(sampler, rng)
    body = _request(
        (
            "svc",
            [
                _span(quiet, 1, None),
                _span(rated, 1, None, attributes={"rag.feedback": "negative"}),
            ],
        )
    )
    decoded = _kept(span_filter, body)
    assert len(decoded.spans) == (2 if always_feedback else 0)


def test_a_root_under_a_remote_parent_counts_as_a_root() -> None:
    span_filter, sampler = _filter(0.0)
    trace_id = _unsampled_trace(sampler, random.Random(5))
    body = _request(("svc", [_span(trace_id, 2, 1), _span(trace_id, 1, 9, remote=True)]))
    decoded = _kept(span_filter, body)
    assert (decoded.forgotten, decoded.forgotten_roots) == (2, {"svc": 1})


def test_malformed_ids_are_rejected_as_in_the_full_decode() -> None:
    span_filter, _ = _filter(0.0)
    bad = _span(b"\x01" * 15, 1, None)
    zero = _span(bytes(16), 2, None)
    body = _request(("svc", [bad, zero, _span(b"\x02" * 16, 3, None)]))
    full = decode_protobuf(body, lazy=True)
    request = read_protobuf(body)
    assert (request.rejected, request.message) == (full.rejected, full.message) != (0, "")
    built = span_filter.request(request)
    assert built.spans == [] and built.forgotten == 1
