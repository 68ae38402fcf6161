"""Property tests: arbitrary bytes, JSON and attribute values never crash the OTLP path.

Decoders either decode or raise `DecodeError` (a counted 400); extraction of any span
mix returns records (possibly none) and never raises."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.otlp import CONVENTIONS, WATER, capture, otlp_bytes
from monitor.extraction._extraction_rule import extract_records
from monitor.processors.trace._sampling_view import sampling_view
from monitor.spans import DecodeError, Span, SpanEvent, decode_json, decode_protobuf

_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)

_KEYS = [
    "openinference.span.kind",
    "input.value",
    "output.value",
    "retrieval.documents.0.document.content",
    "retrieval.documents.0.document.score",
    "retrieval.documents.1.document.metadata",
    "reranker.output_documents.0.document.content",
    "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.role",
    "llm.output_messages.0.message.contents.0.message_content.text",
    "gen_ai.operation.name",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.retrieval.documents",
    "gen_ai.retrieval.query.text",
    "gen_ai.prompt",
    "gen_ai.completion",
    "gen_ai.prompt.0.role",
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.content",
    "gen_ai.usage.input_tokens",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "rag.query",
    "rag.response",
    "rag.context",
    "rag.context.0",
    "rag.feedback",
    "http.route",
]
_attr_values = (
    st.text(max_size=30)
    | st.integers(-5, 10**12)
    | st.floats(allow_nan=True)
    | st.booleans()
    | _json_values.map(json.dumps)
    | st.sampled_from(
        ["LLM", "RETRIEVER", "CHAIN", "RERANKER", "chat", "retrieval", "vector_db_retrieve"]
    )
    | st.lists(st.text(max_size=5), max_size=3)
)
_attrs = st.dictionaries(st.sampled_from(_KEYS), _attr_values, max_size=8)
_events = st.lists(
    st.builds(
        SpanEvent,
        st.sampled_from(
            [
                "gen_ai.user.message",
                "gen_ai.choice",
                "db.query.result",
                "gen_ai.content.prompt",
                "x",
            ]
        ),
        st.integers(0, 10),
        st.dictionaries(
            st.sampled_from(
                ["content", "message", "gen_ai.prompt", "db.query.result.document", "body"]
            ),
            _attr_values,
            max_size=3,
        ),
    ),
    max_size=3,
)


@st.composite
def _trace(draw: Any) -> list[Span]:
    count = draw(st.integers(1, 6))
    ids = [format(i + 1, "016x") for i in range(count)]
    spans = []
    for i, span_id in enumerate(ids):
        parent = "" if i == 0 else draw(st.sampled_from([*ids[:i], "ffffffffffffffff"]))
        start = draw(st.integers(0, 100))
        spans.append(
            Span(
                trace_id="ab" * 16,
                span_id=span_id,
                parent_span_id=parent,
                name=f"s{i}",
                start_unix_nano=start,
                end_unix_nano=start + draw(st.integers(0, 100)),
                attributes=draw(_attrs),
                events=draw(_events),
                error=draw(st.booleans()),
                service="svc",
            )
        )
    return spans


@_SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes_decode_or_raise_decode_error(body: bytes) -> None:
    try:
        decode_protobuf(body)
    except DecodeError as exc:
        assert exc.reason == "bad_protobuf"


_REAL = otlp_bytes(capture(CONVENTIONS["openinference"], WATER)[1])


@_SETTINGS
@given(st.data())
def test_mutated_real_payload_decodes_or_raises_decode_error(data: st.DataObject) -> None:
    body = bytearray(_REAL)
    for _ in range(data.draw(st.integers(1, 5))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    try:
        decoded = decode_protobuf(bytes(body))
    except DecodeError:
        return
    extract_records(decoded.spans)


@_SETTINGS
@given(st.data())
def test_mutated_real_payload_lazy_decode_fails_only_with_decode_error(
    data: st.DataObject,
) -> None:
    """The receivers decode attributes when first read: corruption inside a value then
    surfaces from extraction (or the sampling view), as the same `DecodeError`."""
    body = bytearray(_REAL)
    for _ in range(data.draw(st.integers(1, 5))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    try:
        spans = decode_protobuf(bytes(body), lazy=True).spans
        if spans:
            for trace_id in {s.trace_id for s in spans}:
                sampling_view([s for s in spans if s.trace_id == trace_id])
        extract_records(spans)
    except DecodeError as exc:
        assert exc.reason == "bad_protobuf"


@_SETTINGS
@given(_json_values)
def test_random_json_decodes_or_raises_decode_error(value: Any) -> None:
    try:
        decode_json(json.dumps(value).encode())
    except DecodeError as exc:
        assert exc.reason in ("bad_json", "bad_ids")


@_SETTINGS
@given(_trace())
def test_extraction_never_raises(spans: list[Span]) -> None:
    for record in extract_records(spans):
        assert record.trace_id == "ab" * 16
