"""Traces that ask nothing — a store's indexing, embedding calls with no model call that
answers, health checks — make no record, are counted in `traces_not_rag_total` by reason,
and are never warned about as a broken extraction. The spans are shaped as each stack
writes them (files named per test), encoded as the OTel SDK's OTLP exporter does."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

from harness.otlp import otlp_bytes
from monitor.extraction import TraceRecords, Unreadable, extract_within
from monitor.processors.trace._assembler import FinishedTrace
from monitor.processors.trace._outcomes import Outcomes
from monitor.records.limits import SizeLimits
from monitor.spans import Span, decode_logs_protobuf, decode_protobuf
from monitor.telemetry import Telemetry
from tests.spans.test_jvm_dotnet_go_shapes import Stack, _genkit, _spring_ai

# Spring AI 1.1 / 2.0: spring-ai-model/.../embedding/observation/
# DefaultEmbeddingModelObservationConvention.java (`embedding <model>`, gen_ai.operation.name
# `embedding`: AiOperationType.EMBEDDING), spring-ai-vector-store/.../observation/
# DefaultVectorStoreObservationConvention.java (`<db.system> add`, db.operation.name `add`).
_SPRING_EMBEDDING = {
    "gen_ai.operation.name": "embedding",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "text-embedding-ada-002",
    "gen_ai.response.model": "text-embedding-ada-002",
    "gen_ai.request.embedding.dimensions": 1536,
    "gen_ai.usage.input_tokens": 9,
    "gen_ai.usage.total_tokens": 9,
}
_SPRING_ADD = {
    "db.system": "simple",
    "db.operation.name": "add",
    "spring.ai.kind": "vector_store",
    "db.collection.name": "SpringAiCollection",
}


def _spring_ai_indexing(stack: Stack) -> None:
    with stack.span("simple add", **_SPRING_ADD):
        for _ in range(2):
            with stack.span("embedding text-embedding-ada-002", **_SPRING_EMBEDDING):
                pass


def _spring_ai_dimension_probe(stack: Stack) -> None:
    with stack.span("embedding text-embedding-ada-002", **_SPRING_EMBEDDING):
        pass


def _genai_embeddings(stack: Stack) -> None:
    """opentelemetry-instrumentation-openai-v2 (and the GenAI conventions):
    `embeddings <model>`, gen_ai.operation.name `embeddings`."""
    attrs = {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "text-embedding-3-small",
        "gen_ai.usage.input_tokens": 7,
    }
    with stack.span("embeddings text-embedding-3-small", **attrs):
        pass


def _openinference_index_build(stack: Stack) -> None:
    """openinference-instrumentation-llama-index: a `VectorStoreIndex` build embeds each
    node under an EMBEDDING span."""
    with stack.span("VectorStoreIndex.build", **{"openinference.span.kind": "CHAIN"}):
        attrs = {
            "openinference.span.kind": "EMBEDDING",
            "embedding.model_name": "text-embedding-3-small",
            "embedding.embeddings.0.embedding.text": "The Eiffel Tower was completed in 1889.",
        }
        with stack.span("OpenAIEmbedding._get_text_embeddings", **attrs):
            pass


def _genkit_go_indexing(stack: Stack) -> None:
    """Genkit Go's `localvec` indexing (go/plugins/localvec/localvec.go: `Index` embeds the
    documents through `ai.Embed`): an embedder action span alone, a root."""
    request = {"input": [{"content": [{"text": "The Eiffel Tower was completed in 1889."}]}]}
    response = {"embeddings": [{"embedding": [0.1, 0.2, 0.3]}]}
    name = "openai/text-embedding-3-small"
    extra = {"genkit:isRoot": True}
    with stack.span(name, **_genkit(name, "embedder", request, response, **extra)):
        pass


def _genkit_indexer(stack: Stack) -> None:
    """Genkit's indexer actions (`genkit:metadata:subtype` `indexer`, js/ai/src/retriever.ts)."""
    request = {"documents": [{"content": [{"text": "The Eiffel Tower was completed in 1889."}]}]}
    with stack.span("devLocalVectorstore/kb", **_genkit("kb", "indexer", request, None)):
        with stack.span("embedder", **_genkit("embedder", "embedder", request, {})):
            pass


def _quarkus_langchain4j_embeddings(stack: Stack) -> None:
    """Quarkus LangChain4j 1.5 filling an embedding store: its OpenAI embedding model has no
    span of its own, only the REST client's HTTP client span, a root."""
    attrs = {
        "url.full": "http://127.0.0.1:8080/v1/embeddings",
        "http.request.method": "POST",
        "http.response.status_code": 200,
    }
    with stack.span("POST /embeddings", **attrs):
        pass


def _actuator_health(stack: Stack) -> None:
    attrs = {"http.request.method": "GET", "http.route": "/actuator/health/liveness"}
    with stack.span("GET /actuator/health/liveness", **attrs):
        pass


def _healthz_by_name(stack: Stack) -> None:
    with stack.span("GET /healthz", **{"http.request.method": "GET"}):
        pass


def _spans(stack: Stack) -> list[Span]:
    """The spans and the log lines joined to them, as the receivers decode them."""
    spans = decode_protobuf(otlp_bytes(list(stack.spans.get_finished_spans())))
    logs = encode_logs(list(stack.logs.get_finished_logs())).SerializeToString()
    return [*spans.spans, *decode_logs_protobuf(logs).spans]


def _extracted(stack: Stack) -> TraceRecords:
    out = extract_within(_spans(stack), "http.route", SizeLimits())
    assert not isinstance(out, Unreadable)
    return out


ASKING_NOTHING: list[tuple[Callable[[Stack], None], str, str]] = [
    (_spring_ai_indexing, "java", "indexing"),
    (_spring_ai_dimension_probe, "java", "embedding_only"),
    (_genai_embeddings, "python", "embedding_only"),
    (_openinference_index_build, "python", "embedding_only"),
    (_genkit_go_indexing, "go", "embedding_only"),
    (_genkit_indexer, "nodejs", "indexing"),
    (_quarkus_langchain4j_embeddings, "java", "embedding_only"),
    (_actuator_health, "java", "health_check"),
    (_healthz_by_name, "go", "health_check"),
]


@pytest.mark.parametrize(("shape", "language", "reason"), ASKING_NOTHING)
def test_a_trace_that_asks_nothing_makes_no_record_and_says_why(
    shape: Callable[[Stack], None], language: str, reason: str
) -> None:
    stack = Stack(language)
    shape(stack)
    out = _extracted(stack)
    assert out.records == [] and out.refused == []
    assert [(c.key, c.part) for c in out.causes] == [(reason, None)]


@pytest.mark.parametrize(("shape", "language", "reason"), ASKING_NOTHING)
def test_a_trace_that_asks_nothing_is_counted_by_reason_and_never_warned(
    shape: Callable[[Stack], None],
    language: str,
    reason: str,
    telemetry: Telemetry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The service's first traces are its startup indexing: no warning that its traces
    give no record, nor to turn content capture on."""
    outcomes = Outcomes(telemetry, None, SizeLimits())
    stack = Stack(language)
    shape(stack)
    spans = _spans(stack)
    with caplog.at_level(logging.DEBUG, logger="monitor.processors.trace"):
        outcomes.extracted(
            FinishedTrace(spans[0].trace_id, spans, "root_ended", "otlp_http"),
            "app",
            _extracted(stack),
        )
    assert caplog.records == []
    samples = {
        s.labels["reason"]: s.value
        for metric in telemetry.registry.collect()
        if metric.name == "rag_monitor_traces_not_rag"
        for s in metric.samples
        if s.name.endswith("_total")
    }
    assert samples == {reason: 1.0}
    assert (
        telemetry.registry.get_sample_value(
            "rag_monitor_dropped_total", {"stage": "assemble", "reason": "not_rag"}
        )
        == 1.0
    )


def test_a_trace_of_unknown_spans_is_still_warned_about(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """Not every trace without a record asks nothing: one whose spans no convention reads
    may be a request its instrumentation hides, and is logged so."""
    outcomes = Outcomes(telemetry, None, SizeLimits())
    stack = Stack("go")
    with stack.span("POST /ask", **{"http.route": "/ask"}):
        with stack.span("callModel", **{"app.prompt": "When was the Eiffel Tower completed?"}):
            pass
    spans = _spans(stack)
    with caplog.at_level(logging.WARNING, logger="monitor.processors.trace"):
        outcomes.extracted(
            FinishedTrace(spans[0].trace_id, spans, "root_ended", "otlp_http"),
            "app",
            _extracted(stack),
        )
    (line,) = [r.getMessage() for r in caplog.records]
    assert "gave no record" in line and "no span declares a role" in line
    assert (
        telemetry.registry.get_sample_value(
            "rag_monitor_traces_not_rag_total", {"service": "app", "reason": "unrecognised"}
        )
        == 1.0
    )


def test_indexing_beside_a_request_leaves_the_request_its_record() -> None:
    """Spring AI at startup: the store's `add` and the dimension probe, then a question;
    each in a trace of its own, and only the question gives a record (right, not
    suspect). A request that also writes to the store keeps its query's documents."""
    for shape in (_spring_ai_indexing, _spring_ai_dimension_probe):
        stack = Stack("java")
        shape(stack)
        assert _extracted(stack).records == []
    stack = Stack("java")
    with stack.span("POST /ask", **{"http.route": "/ask"}):
        with stack.span("simple add", **_SPRING_ADD):
            with stack.span("embedding text-embedding-ada-002", **_SPRING_EMBEDDING):
                pass
        _spring_ai(stack, "QuestionAnswerAdvisor", content=True)
    (record,) = _extracted(stack).records
    assert record.query == "When was the Eiffel Tower completed?"
    assert record.response == "The Eiffel Tower was completed in 1889."
    assert len(record.context_text) == 2 and "extraction_suspect" not in record.metadata


def test_a_retrieval_whose_operation_is_a_query_is_still_a_retrieval() -> None:
    """Only writes are indexing: Spring AI's `simple query` stays the request's retrieval
    (its documents from the store's content log line)."""
    stack = Stack("java")
    _spring_ai(stack, "QuestionAnswerAdvisor", content=True)
    (record,) = _extracted(stack).records
    assert record.context_source == "retrieval_span"
    assert len(record.context_text) == 2
