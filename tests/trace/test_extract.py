"""Span → record extraction on traces written by the real OpenTelemetry SDK and encoded
exactly as its OTLP exporters encode them (no network here; see test_otlp_receivers.py)."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer
from opentelemetry.util.types import AttributeValue

from harness.otlp import CONVENTIONS, WATER, Case, capture, otlp_bytes
from monitor.extraction._extraction_rule import extract_records
from monitor.extraction._span_values import loads
from monitor.records import RagRecord
from monitor.spans import decode_protobuf


def _records(spans: Sequence[ReadableSpan]) -> list[RagRecord]:
    decoded = decode_protobuf(otlp_bytes(spans))
    assert decoded.rejected == 0
    return extract_records(decoded.spans)


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_each_convention_yields_one_record_with_query_context_response(convention: str) -> None:
    trace_id, spans = capture(CONVENTIONS[convention], WATER)
    records = _records(spans)
    assert len(records) == 1, records
    record = records[0]
    assert record.trace_id == trace_id
    assert record.request_id == trace_id
    assert record.service == "rag-api"
    assert record.route == "/ask"
    assert record.query == WATER.query
    assert record.response == WATER.answer
    # With ids and scores only, the text exists only in the system prompt: split out of it
    # at its numbered blocks, each paired with the retrieval's id, the instruction left out.
    assert [d.content for d in record.retrieved_context] == WATER.contents
    if convention == "genai_ids_only":
        assert [d.doc_uri for d in record.retrieved_context] == [d[0] for d in WATER.docs]
        assert record.context_source == "prompt"
    else:  # the plain `rag.context` attribute is the app's own declaration
        assert record.context_source == (
            "convention" if convention.startswith("plain") else "retrieval_span"
        )
    assert record.missing() == frozenset()
    assert record.latency_ms is not None and record.latency_ms >= 0
    assert not record.error


@pytest.mark.parametrize(
    "convention", ["openinference", "genai", "openllmetry", "openllmetry_legacy"]
)
def test_model_tokens_and_doc_ids_are_carried(convention: str) -> None:
    _, spans = capture(CONVENTIONS[convention], WATER)
    record = _records(spans)[0]
    assert record.model == WATER.model
    if convention != "openllmetry":
        assert (record.input_tokens, record.output_tokens) == (120, 12)
    assert [d.doc_uri for d in record.retrieved_context] == [d[0] for d in WATER.docs]


def test_span_order_within_and_across_batches_does_not_matter() -> None:
    _, spans = capture(CONVENTIONS["openllmetry"], WATER)
    shuffled = list(spans)
    random.Random(7).shuffle(shuffled)
    halves = (
        decode_protobuf(otlp_bytes(shuffled[:3])).spans
        + decode_protobuf(otlp_bytes(shuffled[3:])).spans
    )
    (record,) = extract_records(halves)
    assert record.query == WATER.query
    assert [d.content for d in record.retrieved_context] == WATER.contents


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "chat"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _chat(
    tracer: Tracer, history: list[tuple[str, str]], output: str | None, **extra: AttributeValue
) -> None:
    messages = [{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in history]
    attrs: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps(messages),
    }
    if output is not None:
        attrs["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": output}]}]
        )
    attrs.update(extra)
    with tracer.start_as_current_span("chat", attributes=attrs):
        pass


def _retrieve(tracer: Tracer, query: str, docs: list[str]) -> None:
    with tracer.start_as_current_span(
        "retrieval",
        attributes={
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": query,
            "gen_ai.retrieval.documents": json.dumps(
                [{"id": str(i), "content": d} for i, d in enumerate(docs)]
            ),
        },
    ):
        pass


def test_two_turns_under_one_root_give_two_records_with_their_own_context() -> None:
    provider, exporter = _provider()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("session"):
        _retrieve(tracer, "Who wrote Hamlet?", ["Hamlet is a tragedy by William Shakespeare."])
        _chat(tracer, [("user", "Who wrote Hamlet?")], "Shakespeare wrote it.")
        _retrieve(tracer, "When was he born?", ["Shakespeare was born in 1564 in Stratford."])
        _chat(
            tracer,
            [
                ("user", "Who wrote Hamlet?"),
                ("assistant", "Shakespeare wrote it."),
                ("user", "When was he born?"),
            ],
            "He was born in 1564.",
        )
    records = _records(exporter.get_finished_spans())
    assert [r.query for r in records] == ["Who wrote Hamlet?", "When was he born?"]
    assert [r.response for r in records] == ["Shakespeare wrote it.", "He was born in 1564."]
    assert [[d.content for d in r.retrieved_context] for r in records] == [
        ["Hamlet is a tragedy by William Shakespeare."],
        ["Shakespeare was born in 1564 in Stratford."],
    ]
    assert [(m.role, m.content) for m in records[1].history] == [
        ("user", "Who wrote Hamlet?"),
        ("assistant", "Shakespeare wrote it."),
    ]
    assert len({r.request_id for r in records}) == 2


def test_rewriter_and_tool_call_round_trips_are_one_request() -> None:
    """A condense-question LLM call and an agent's tool-call turn are not answers."""
    provider, exporter = _provider()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("agent", attributes={"openinference.span.kind": "CHAIN"}):
        _chat(tracer, [("user", "and its height?")], "How tall is the Eiffel Tower?")
        _retrieve(tracer, "How tall is the Eiffel Tower?", ["The Eiffel Tower is 330 metres tall."])
        _chat(tracer, [("user", "and its height?")], None)  # answered with a tool call
        _chat(tracer, [("user", "and its height?"), ("tool", "330 m")], "It is 330 metres tall.")
    (record,) = _records(exporter.get_finished_spans())
    assert record.response == "It is 330 metres tall."
    assert record.query == "and its height?"
    assert [d.content for d in record.retrieved_context] == ["The Eiffel Tower is 330 metres tall."]


def test_trace_without_rag_signals_yields_nothing_and_llm_only_yields_incomplete() -> None:
    provider, exporter = _provider()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("GET /healthz", attributes={"http.route": "/healthz"}):
        pass
    assert _records(exporter.get_finished_spans()) == []
    exporter.clear()
    with tracer.start_as_current_span("POST /chat"):
        _chat(tracer, [("user", "hi")], "hello!")
    (record,) = _records(exporter.get_finished_spans())
    assert record.missing() == frozenset({"context"})


def test_error_status_and_feedback_are_carried() -> None:
    provider, exporter = _provider()
    tracer = provider.get_tracer("t")
    from opentelemetry.trace import Status, StatusCode

    with tracer.start_as_current_span(
        "rag", attributes={"rag.query": "q?", "rag.feedback": "negative"}
    ) as root:
        _retrieve(tracer, "q?", ["doc"])
        root.set_status(Status(StatusCode.ERROR, "boom"))
    (record,) = _records(exporter.get_finished_spans())
    assert record.error is True
    assert record.feedback == "negative"
    assert record.response is None
    assert record.missing() == frozenset({"response"})


def test_openinference_reranker_output_replaces_retrieved_order() -> None:
    case = Case(query="q?", docs=(("a", "alpha", 0.1), ("b", "beta", 0.2)), answer="ans")
    provider, exporter = _provider()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span(
        "root", attributes={"openinference.span.kind": "CHAIN", "input.value": "q?"}
    ):
        attrs: dict[str, AttributeValue] = {
            "openinference.span.kind": "RETRIEVER",
            "input.value": "q?",
        }
        for i, (_, c, _) in enumerate(case.docs):
            attrs[f"retrieval.documents.{i}.document.content"] = c
        with tracer.start_as_current_span("retrieve", attributes=attrs):
            pass
        with tracer.start_as_current_span(
            "rerank",
            attributes={
                "openinference.span.kind": "RERANKER",
                "reranker.query": "q?",
                "reranker.output_documents.0.document.content": "beta",
                "reranker.output_documents.0.document.score": 0.9,
            },
        ):
            pass
        with tracer.start_as_current_span(
            "llm",
            attributes={
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "q?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.contents.0.message_content.type": "text",
                "llm.output_messages.0.message.contents.0.message_content.text": "ans",
            },
        ):
            pass
    (record,) = _records(exporter.get_finished_spans())
    assert [(d.content, d.score) for d in record.retrieved_context] == [("beta", 0.9)]
    assert record.response == "ans"


def test_json_attribute_values_are_read_as_python_json_reads_them() -> None:
    """Attribute values holding JSON are parsed (orjson first); what orjson refuses and
    Python's json reads still parses, and what neither reads comes back unchanged."""
    assert loads(' {"a": [1, "b"]}') == {"a": [1, "b"]}
    parsed = loads("[1, NaN, Infinity]")
    assert parsed[0] == 1 and math.isnan(parsed[1]) and parsed[2] == math.inf
    assert loads('["\ud800"]') == ["\ud800"]  # a lone surrogate
    assert loads("[not json") == "[not json"
    assert loads("plain text") == "plain text"
    assert loads(7) == 7
