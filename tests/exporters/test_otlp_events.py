"""OTLP evaluation events: a trace made by the OpenTelemetry SDK is evaluated, and the
events arrive at a local OTLP receiver stub (a real gRPC TraceService server, or a real
HTTP server for `http/protobuf`) in a span of the original trace, parented to its span."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator, Sequence
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from monitor.exporters.otlp_events import EVENT_NAME, OtlpEventsSink, create_exporter
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry, create_telemetry
from tests._servers import free_port, rag_monitor
from tests._sleep import RecordedSleep
from tests._wait import wait_until

# A deadline no test reaches: shutdown returns once the queue is exported.
DELIVER_ALL_S = 60.0


class Received:
    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.lock = threading.Lock()

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self.lock:
            self.requests.append(request)

    def spans(self) -> list[Any]:
        with self.lock:
            return [
                s
                for r in self.requests
                for rs in r.resource_spans
                for ss in rs.scope_spans
                for s in ss.spans
            ]


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request: Any, context: Any) -> Any:
        self.received.add(request)
        return trace_service_pb2.ExportTraceServiceResponse()


def grpc_stub(received: Received) -> tuple[str, Any]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(received), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return f"http://127.0.0.1:{port}", lambda: server.stop(grace=1).wait()


def http_stub(received: Received) -> tuple[str, Any]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            assert self.path == "/v1/traces"
            assert self.headers["Content-Type"] == "application/x-protobuf"
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.add(request)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()
            self.wfile.write(trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"127.0.0.1:{server.server_address[1]}", stop


@pytest.fixture(params=["grpc", "http/protobuf"])
def receiver(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, Received]]:
    received = Received()
    endpoint, stop = (grpc_stub if request.param == "grpc" else http_stub)(received)
    try:
        yield request.param, endpoint, received
    finally:
        stop()


def original_trace() -> tuple[str, str]:
    """A RAG request traced by the application with the OpenTelemetry SDK."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("app").start_as_current_span("rag.request"):
        pass
    (span,) = memory.get_finished_spans()
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


@pytest.mark.asyncio
async def test_evaluation_events_land_in_the_original_trace(
    receiver: tuple[str, str, Received],
) -> None:
    protocol, endpoint, received = receiver
    trace_id, span_id = original_trace()
    t = create_telemetry()
    sink = OtlpEventsSink(create_exporter(endpoint, protocol), t)  # type: ignore[arg-type]
    await sink.start()
    record = RagRecord(
        request_id="req-1", trace_id=trace_id, span_id=span_id, service="shop", response="x"
    )
    sink.emit(
        record,
        {
            "local_groundedness": EvalResult(
                name="local_groundedness",
                score=0.25,
                normalized=0.25,
                label="fail",
                passed=False,
                explanation="unsupported: built by the Romans",
            ),
            "faithfulness": EvalResult.failed("faithfulness", "timeout: no verdict within 30s"),
        },
    )
    sink.emit(
        RagRecord(request_id="no-trace", response="x"), {"x": EvalResult(name="x", passed=True)}
    )
    await sink.shutdown(DELIVER_ALL_S)

    spans = {
        next(a.value.string_value for a in s.attributes if a.key == "rag.request_id"): s
        for s in received.spans()
    }
    assert set(spans) == {"req-1", "no-trace"}
    span = spans["req-1"]
    assert span.trace_id.hex() == trace_id
    assert span.parent_span_id.hex() == span_id
    assert span.span_id.hex() != span_id
    events = {e.attributes[0].value.string_value: e for e in span.events}
    assert [e.name for e in span.events] == [EVENT_NAME, EVENT_NAME]

    def attrs(event: Any) -> dict[str, Any]:
        return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in event.attributes}

    assert attrs(events["local_groundedness"]) == {
        "gen_ai.evaluation.name": "local_groundedness",
        "gen_ai.evaluation.score.value": 0.25,
        "gen_ai.evaluation.score.label": "fail",
        "gen_ai.evaluation.explanation": "unsupported: built by the Romans",
    }
    assert attrs(events["faithfulness"]) == {
        "gen_ai.evaluation.name": "faithfulness",
        "error.type": "timeout",
        "gen_ai.evaluation.explanation": "timeout: no verdict within 30s",
    }
    # No trace context: a root span in a trace of its own, not a drop.
    orphan = spans["no-trace"]
    assert orphan.parent_span_id == b"" and orphan.trace_id.hex() != trace_id
    assert sink.exported == 2
    assert (
        t.registry.get_sample_value(
            "rag_monitor_dropped_total", {"stage": "otlp_events", "reason": "no_trace_context"}
        )
        is None
    )


@pytest.mark.asyncio
async def test_unreachable_endpoint_is_counted_not_raised() -> None:
    t = create_telemetry()
    exporter = create_exporter(f"127.0.0.1:{free_port()}", "http/protobuf", timeout_s=1)
    waits = RecordedSleep()
    sink = OtlpEventsSink(exporter, t, sleep=waits)
    await sink.start()
    trace_id, span_id = original_trace()
    sink.emit(
        RagRecord(request_id="r", trace_id=trace_id, span_id=span_id, response="x"),
        {"local_relevance": EvalResult(name="local_relevance", score=1.0, passed=True)},
    )
    await sink.shutdown(DELIVER_ALL_S)
    assert sink.exported == 0
    assert len(waits) == 2  # three exports in all, full jitter between them
    assert 0 <= waits[0] <= 2 and 0 <= waits[1] <= 4
    assert (
        t.registry.get_sample_value(
            "rag_monitor_dropped_total", {"stage": "otlp_events", "reason": "export_failed"}
        )
        == 1
    )


def test_running_monitor_puts_verdicts_into_the_apps_trace(tmp_path: Path) -> None:
    """`rag-monitor run` with `exporters.otlp` set: the app's trace (OTel SDK, OTLP/HTTP into
    the monitor) comes back to the OTLP receiver stub with the verdicts as events."""
    received = Received()
    endpoint, stop = grpc_stub(received)
    metrics_port, otlp_port = free_port(), free_port()
    config = tmp_path / "tmp.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "receivers": {
                    "otlp": {
                        "grpc": {"enabled": False},
                        "http": {"endpoint": f"127.0.0.1:{otlp_port}"},
                    }
                },
                "exporters": {
                    "prometheus": {"endpoint": f"127.0.0.1:{metrics_port}"},
                    "otlp": {"endpoint": endpoint, "protocol": "grpc"},
                },
            }
        )
    )
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(
        SimpleSpanProcessor(HttpExporter(endpoint=f"http://127.0.0.1:{otlp_port}/v1/traces"))
    )
    tracer = provider.get_tracer("app")
    try:
        with rag_monitor(tmp_path, config, metrics_port):
            with tracer.start_as_current_span(
                "rag.request",
                attributes={"openinference.span.kind": "CHAIN", "input.value": "How tall is it?"},
            ) as root:
                with tracer.start_as_current_span(
                    "retrieve",
                    attributes={
                        "openinference.span.kind": "RETRIEVER",
                        "retrieval.documents.0.document.content": "The Eiffel Tower is 330 metres tall.",
                    },
                ):
                    pass
                root.set_attribute("output.value", "The Eiffel Tower is 330 metres tall.")
            wait_until(received.spans, 60, "evaluation span at the OTLP stub")
    finally:
        provider.shutdown()
        stop()
    app_spans = {f"{s.context.span_id:016x}" for s in memory.get_finished_spans()}
    trace_id = f"{root.get_span_context().trace_id:032x}"
    (span,) = received.spans()
    assert span.trace_id.hex() == trace_id
    assert span.parent_span_id.hex() in app_spans
    names = sorted(
        a.value.string_value
        for e in span.events
        for a in e.attributes
        if a.key == "gen_ai.evaluation.name"
    )
    assert names == ["local_groundedness", "local_relevance", "local_retrieval", "local_safety"]
    assert {e.name for e in span.events} == {EVENT_NAME}


@pytest.mark.asyncio
async def test_shutdown_is_safe_without_start_and_twice() -> None:
    t = create_telemetry()
    sink = OtlpEventsSink(create_exporter(f"127.0.0.1:{free_port()}", "grpc", timeout_s=1), t)
    await sink.shutdown(1)
    await sink.shutdown(1)
    assert sink.exported == 0


class Flaky(SpanExporter):
    """Fails its first `failures` exports (a collector restarting), then takes them all."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.spans: list[ReadableSpan] = []
        self.release = threading.Event()  # set: exports do not block
        self.release.set()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait()
        if self.failures:
            self.failures -= 1
            return SpanExportResult.FAILURE
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def dropped(t: Telemetry, reason: str) -> float:
    labels = {"stage": "otlp_events", "reason": reason}
    return t.registry.get_sample_value("rag_monitor_dropped_total", labels) or 0.0


def record(i: int) -> tuple[RagRecord, dict[str, EvalResult]]:
    return RagRecord(request_id=f"r{i}", response="x"), {"x": EvalResult(name="x", passed=True)}


@pytest.mark.asyncio
async def test_a_batch_that_fails_is_exported_again_after_a_backoff() -> None:
    t = create_telemetry()
    exporter = Flaky(failures=2)
    waits = RecordedSleep()
    sink = OtlpEventsSink(exporter, t, sleep=waits, rng=random.Random(1))
    await sink.start()
    sink.emit(*record(1))
    await sink.shutdown(DELIVER_ALL_S)
    assert [s.attributes["rag.request_id"] for s in exporter.spans] == ["r1"]  # type: ignore[index]
    assert sink.exported == 1 and dropped(t, "export_failed") == 0
    assert len(waits) == 2 and 0 <= waits[0] <= 2 and 0 <= waits[1] <= 4


@pytest.mark.asyncio
async def test_shutdown_deadline_counts_the_batch_in_export_and_the_queue() -> None:
    t = create_telemetry()
    exporter = Flaky(failures=0)
    exporter.release.clear()  # the endpoint hangs
    sink = OtlpEventsSink(exporter, t)
    await sink.start()
    sink.emit(*record(1))
    await asyncio.to_thread(wait_until, lambda: sink.exporting, 10, "the first export")
    sink.emit(*record(2))
    sink.emit(*record(3))
    await sink.shutdown(0.2)
    assert dropped(t, "shutdown") == 3 and sink.exported == 0
