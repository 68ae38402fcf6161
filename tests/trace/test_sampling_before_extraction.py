"""Sampling before extraction in the trace stage: the decision made on a trace's sampling
view is the one the records would get, unsampled traces are counted and never extracted,
and priority traces (error status, negative feedback) are evaluated whatever the rate.
Spans come from the real OpenTelemetry SDK; the receivers and the trace stage run in
process over real HTTP; the evaluation stage is a recorder."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

import monitor.extraction._extract as extract_module
from harness.otlp import CONVENTIONS, WATER, finished_spans, otlp_bytes
from harness.pipeline import RecordingStage, started
from harness.wait import wait_until_async
from monitor.config import Config, Sampling
from monitor.extraction import extract_records
from monitor.processors.sampler import Sampler
from monitor.processors.trace._sampling_view import sampling_view
from monitor.receivers.otlp import OtlpReceivers
from monitor.records import RagRecord
from monitor.spans import Span, decode_protobuf
from monitor.telemetry import Telemetry, create_telemetry

EVALUATORS: dict[str, float | None] = {"local_groundedness": None, "local_relevance": 0.5}


def _emit_varied(tracer: Tracer, rng: random.Random) -> None:
    """One RAG trace with a random route, feedback, error status and shape."""
    route = rng.choice(["/ask", "/admin", "/chat"])
    feedback = rng.choice([None, None, "positive", "negative", "neutral"])
    with tracer.start_as_current_span(
        "handle", attributes={"rag.query": "q?", "http.route": route}
    ) as root:
        with tracer.start_as_current_span("search", attributes={"rag.context": '["doc"]'}):
            pass
        child: dict[str, Any] = {"rag.response": "a"}
        if feedback is not None:
            child["rag.feedback"] = feedback
        with tracer.start_as_current_span("generate", attributes=child) as gen:
            if rng.random() < 0.1:
                gen.set_status(Status(StatusCode.ERROR, "boom"))
        if rng.random() < 0.05:
            root.set_status(Status(StatusCode.ERROR, "boom"))
    if rng.random() < 0.2:  # a trace of another convention, with its own root
        CONVENTIONS[rng.choice(sorted(CONVENTIONS))](tracer, WATER, lambda: None)


def _traces(count: int) -> list[list[Span]]:
    rng = random.Random(7)
    spans: list[ReadableSpan] = []

    def emit(tracer: Tracer) -> None:
        for _ in range(count // 2):
            _emit_varied(tracer, rng)

    for service in ("svc-a", "svc-b"):
        spans += finished_spans(service, emit)
    by_trace: dict[str, list[Span]] = {}
    for span in decode_protobuf(otlp_bytes(spans), lazy=True).spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    return list(by_trace.values())


SAMPLINGS = {
    "base rate": Sampling(rate=0.3),
    "overrides by service and route, no error priority": Sampling.model_validate(
        {
            "rate": 0.05,
            "overrides": [
                {"service": "svc-b", "rate": 0.8},
                {"route": "/admin", "rate": 0.0},
                {"service": "svc-a", "route": "/ask", "rate": 0.5},
            ],
            "always": {"error": False},
        }
    ),
    "rate 0, priorities only": Sampling(rate=0.0),
    "rate 0, no priorities": Sampling.model_validate(
        {"rate": 0.0, "always": {"error": False, "negative_feedback": False}}
    ),
}


@pytest.fixture(scope="module")
def traces() -> list[list[Span]]:
    return _traces(600)


@pytest.mark.parametrize("name", sorted(SAMPLINGS))
def test_early_decision_equals_the_stage_decision(traces: list[list[Span]], name: str) -> None:
    sampling = SAMPLINGS[name]
    sampler = Sampler(sampling, EVALUATORS)
    # As the ingest does: the route is looked up only when an override names one.
    route_key = "http.route" if any(o.route is not None for o in sampling.overrides) else None
    kept = dropped = 0
    for spans in traces:
        records = extract_records(spans)
        early = sampler.sampled(sampling_view(spans, route_attribute=route_key))
        late = [sampler.sampled(record) for record in records]
        if len(records) == 1:
            assert early == late[0], spans[0].trace_id
        # The records carry the view's decision: never less than their own.
        assert all(decision <= early for decision in late), spans[0].trace_id
        if early:
            kept += 1
        else:
            dropped += 1
    assert len(traces) > 500
    if name != "rate 0, no priorities":
        assert kept > 10
    assert dropped > 10


def test_the_view_reads_the_same_route_feedback_and_error_as_extraction(
    traces: list[list[Span]],
) -> None:
    for spans in traces:
        view = sampling_view(spans)
        for record in extract_records(spans):
            assert (view.service, view.route, view.feedback) == (
                record.service,
                record.route,
                record.feedback,
            )
            assert view.sampling_key == record.sampling_key
            assert view.error or not record.error


def test_the_view_leaves_attributes_serialized() -> None:
    for spans in _traces(20):
        sampling_view(spans, route_attribute=None)
        sampling_view(spans)
        assert not any(span.decoded for span in spans)
        extract_records(spans)
        assert all(span.decoded for span in spans)


# --- through the receivers ------------------------------------------------------------


def _config(sampling: Sampling) -> Config:
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"endpoint": "127.0.0.1:0"}}
            },
            # Released as the root ends: each trace's spans are sent in one request.
            "trace_assembly": {"idle_timeout_s": 30, "late_spans_wait_s": 0},
            "sampling": sampling.model_dump(),
            "evaluators": [
                {"name": name, "sample_rate": rate} for name, rate in EVALUATORS.items()
            ],
        }
    )


@pytest.fixture
def extractions(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Trace ids that reached record extraction (a spy on the real one)."""
    seen: list[str] = []

    def spy(spans: list[Span], **kw: Any) -> list[RagRecord]:
        seen.append(spans[0].trace_id)
        return extract_records(spans, **kw)

    monkeypatch.setattr(extract_module, "extract_records", spy)
    yield seen


@pytest.fixture
def telemetry() -> Telemetry:
    return create_telemetry()


@asynccontextmanager
async def _serve(
    sampling: Sampling, telemetry: Telemetry
) -> AsyncIterator[tuple[str, RecordingStage]]:
    """The OTLP/HTTP receiver and the trace stage; yields the export URL and the records."""
    stage = RecordingStage()
    served = await started(_config(sampling), stage, telemetry)
    try:
        assert served.http is not None
        yield f"http://127.0.0.1:{served.http.port}/v1/traces", stage
    finally:
        await served.shutdown(5)


def _trace(*, error: bool = False, feedback: str | None = None) -> tuple[str, bytes]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-api"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")
    attrs = {"rag.query": "q?", "http.route": "/ask"}
    if feedback is not None:
        attrs["rag.feedback"] = feedback
    with tracer.start_as_current_span("handle", attributes=attrs) as root:
        with tracer.start_as_current_span("search", attributes={"rag.context": '["doc"]'}):
            pass
        with tracer.start_as_current_span("generate", attributes={"rag.response": "a"}) as gen:
            if error:
                gen.set_status(Status(StatusCode.ERROR, "upstream timeout"))
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.shutdown()
    return trace_id, otlp_bytes(list(exporter.get_finished_spans()))


async def _post(url: str, body: bytes) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            url, content=body, headers={"Content-Type": "application/x-protobuf"}
        )
    assert response.status_code == 200, response.text


async def _until(done: Callable[[], bool]) -> None:
    await wait_until_async(done, 10, "the trace stage")


def _value(telemetry: Telemetry, name: str, **labels: str) -> float:
    return telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0


async def test_unsampled_trace_is_counted_and_never_extracted(
    telemetry: Telemetry, extractions: list[str]
) -> None:
    async with _serve(Sampling(rate=0.0), telemetry) as (url, stage):
        trace_id, body = _trace()
        await _post(url, body)
        await _until(lambda: _value(telemetry, "traces_unsampled_total", service="rag-api") == 1)
        assert _value(telemetry, "traces_assembled_total", trigger="root_ended") == 1
    assert trace_id not in extractions
    assert stage.records == []


@pytest.mark.parametrize(
    "kind", ["error status", "negative feedback", "positive feedback (not a priority)"]
)
async def test_priority_trace_with_rate_zero_is_still_evaluated(
    telemetry: Telemetry, extractions: list[str], kind: str
) -> None:
    async with _serve(Sampling(rate=0.0), telemetry) as (url, stage):
        if kind == "error status":
            trace_id, body = _trace(error=True)
        else:
            trace_id, body = _trace(feedback=kind.split()[0])
        await _post(url, body)
        await _until(lambda: _value(telemetry, "traces_assembled_total", trigger="root_ended") == 1)
        if not kind.startswith("positive"):
            await _until(lambda: len(stage.records) == 1)
    if kind.startswith("positive"):
        assert _value(telemetry, "traces_unsampled_total", service="rag-api") == 1
        assert stage.records == [] and extractions == []
        return
    ((_, record),) = stage.records
    assert extractions == [trace_id] and record.trace_id == trace_id
    assert record.error if kind == "error status" else record.feedback == "negative"
    assert _value(telemetry, "traces_unsampled_total", service="rag-api") == 0


async def test_error_trace_is_dropped_when_errors_are_not_a_priority(
    telemetry: Telemetry, extractions: list[str]
) -> None:
    sampling = Sampling.model_validate({"rate": 0.0, "always": {"error": False}})
    async with _serve(sampling, telemetry) as (url, stage):
        _, body = _trace(error=True)
        await _post(url, body)
        await _until(lambda: _value(telemetry, "traces_unsampled_total", service="rag-api") == 1)
    assert stage.records == [] and extractions == []


async def test_whole_service_at_rate_zero_evaluates_only_the_error_trace() -> None:
    """The real service (evaluation stage, local evaluators, metrics) behind the OTLP/HTTP
    receiver: a plain trace is counted unsampled; an error trace is evaluated."""
    from monitor.service import Service

    config = Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"endpoint": "127.0.0.1:0"}}
            },
            "sampling": {"rate": 0.0},
            "trace_assembly": {"late_spans_wait_s": 0},
            # Scored in this process: which traces are scored is the question, not where.
            "pipeline": {"processes": 0},
        }
    )
    service = Service(config, serve_http=False)
    telemetry = service.telemetry
    await service.start()
    try:
        (receivers,) = [r for r in service.receivers if isinstance(r, OtlpReceivers)]
        assert receivers.http is not None
        url = f"http://127.0.0.1:{receivers.http.port}/v1/traces"
        _, plain = _trace()
        _, failing = _trace(error=True)
        await _post(url, plain)
        await _post(url, failing)
        await _until(lambda: service.stage.completed == 1)
        await _until(lambda: _value(telemetry, "traces_unsampled_total", service="rag-api") == 1)
    finally:
        await service.shutdown()
    assert _value(telemetry, "records_total", service="rag-api", source="otlp_http") == 1
    names = [spec.name for spec in config.evaluators]
    for name in names:
        sampled = _value(
            telemetry,
            "sampling_decisions_total",
            service="rag-api",
            evaluator=name,
            decision="sampled",
        )
        assert sampled == 1, name
    evaluated = [
        sample
        for metric in telemetry.registry.collect()
        if metric.name == "rag_monitor_evaluations"
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.value
    ]
    # One outcome per evaluator, all for the error trace (the only record).
    assert sorted(s.labels["evaluator"] for s in evaluated) == sorted(names)
    assert {s.labels["service"] for s in evaluated} == {"rag-api"}
