"""OTLP evaluation events: a trace made by the OpenTelemetry SDK is evaluated, and the
events arrive at a local OTLP receiver stub (a real gRPC TraceService and LogsService
server, or a real HTTP server for `http/protobuf`) in a span of the original trace,
parented to its span — or, with `signal: logs`, as log records carrying its span's ids."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness.servers import ClosedPort, rag_monitor
from harness.sleep import RecordedSleep
from harness.wait import wait_until
from monitor.__main__ import main
from monitor.component import Evaluated
from monitor.config import Redaction
from monitor.exporters.otlp_events import EVENT_NAME, OtlpEventsSink, create_exporter
from monitor.records import ContextDoc, RagRecord
from monitor.records.redaction import Redactor
from monitor.results import EvalResult
from monitor.shared.version import __version__
from monitor.telemetry import Telemetry, create_telemetry

# A deadline no test reaches: shutdown returns once the queue is exported.
DELIVER_ALL_S = 60.0


class Received:
    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.log_requests: list[logs_service_pb2.ExportLogsServiceRequest] = []
        self.lock = threading.Lock()

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self.lock:
            self.requests.append(request)

    def add_logs(self, request: logs_service_pb2.ExportLogsServiceRequest) -> None:
        with self.lock:
            self.log_requests.append(request)

    def spans(self) -> list[Any]:
        with self.lock:
            return [
                s
                for r in self.requests
                for rs in r.resource_spans
                for ss in rs.scope_spans
                for s in ss.spans
            ]

    def log_records(self) -> list[Any]:
        with self.lock:
            return [
                lr
                for r in self.log_requests
                for rl in r.resource_logs
                for sl in rl.scope_logs
                for lr in sl.log_records
            ]


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request: Any, context: Any) -> Any:
        self.received.add(request)
        return trace_service_pb2.ExportTraceServiceResponse()


class _LogsService(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request: Any, context: Any) -> Any:
        self.received.add_logs(request)
        return logs_service_pb2.ExportLogsServiceResponse()


def grpc_stub(received: Received) -> tuple[str, Any]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(received), server)  # type: ignore[no-untyped-call]
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_LogsService(received), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return f"http://127.0.0.1:{port}", lambda: server.stop(grace=1).wait()


def http_stub(received: Received) -> tuple[str, Any]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            assert self.path in ("/v1/traces", "/v1/logs"), self.path
            assert self.headers["Content-Type"] == "application/x-protobuf"
            response: Any
            if self.path == "/v1/traces":
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                received.add(request)
                response = trace_service_pb2.ExportTraceServiceResponse()
            else:
                logs = logs_service_pb2.ExportLogsServiceRequest()
                logs.ParseFromString(body)
                received.add_logs(logs)
                response = logs_service_pb2.ExportLogsServiceResponse()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()
            self.wfile.write(response.SerializeToString())

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


async def send_verdicts(sink: OtlpEventsSink, trace_id: str, span_id: str) -> None:
    """Two records through `sink`: "req-1" in the given span, with a failed verdict and an
    evaluation error; "no-trace" without trace context."""
    await sink.start()
    record = RagRecord(
        request_id="req-1",
        trace_id=trace_id,
        span_id=span_id,
        service="shop",
        response="x",
        retrieved_context=(ContextDoc(content="The wall was built by the Qin."),),
        metadata={"context_source": "prompt"},
    )
    sink.emit(
        [
            Evaluated(
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
                    "faithfulness": EvalResult.failed(
                        "faithfulness", "timeout: no verdict within 30s"
                    ),
                },
            )
        ]
    )
    sink.emit(
        [
            Evaluated(
                RagRecord(request_id="no-trace", response="x"),
                {"x": EvalResult(name="x", passed=True)},
            )
        ]
    )
    await sink.shutdown(DELIVER_ALL_S)


@pytest.mark.asyncio
async def test_evaluation_events_land_in_the_original_trace(
    receiver: tuple[str, str, Received],
) -> None:
    protocol, endpoint, received = receiver
    trace_id, span_id = original_trace()
    t = create_telemetry()
    exporter = create_exporter(endpoint, protocol)  # type: ignore[arg-type]
    sink = OtlpEventsSink(exporter, t, include_explanations=True)
    await send_verdicts(sink, trace_id, span_id)

    spans = {
        next(a.value.string_value for a in s.attributes if a.key == "rag.request_id"): s
        for s in received.spans()
    }
    assert set(spans) == {"req-1", "no-trace"}
    span = spans["req-1"]
    assert values(span.attributes)["rag.context_source"] == "prompt"
    assert values(spans["no-trace"].attributes)["rag.context_source"] == "none"
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
        "rag_monitor.version": __version__,
    }
    assert attrs(events["faithfulness"]) == {
        "gen_ai.evaluation.name": "faithfulness",
        "error.type": "timeout",
        "gen_ai.evaluation.explanation": "timeout: no verdict within 30s",
        "rag_monitor.version": __version__,
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


def values(attributes: Any) -> dict[str, Any]:
    """OTLP key-value attributes as a dict of plain values."""
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in attributes}


@pytest.mark.asyncio
async def test_with_signal_logs_each_event_is_a_log_record_of_the_evaluated_span(
    receiver: tuple[str, str, Received],
) -> None:
    protocol, endpoint, received = receiver
    trace_id, span_id = original_trace()
    t = create_telemetry()
    exporter = create_exporter(endpoint, protocol, signal="logs")  # type: ignore[arg-type]
    sink = OtlpEventsSink(exporter, t, include_explanations=True)
    await send_verdicts(sink, trace_id, span_id)

    assert received.spans() == []  # no synthetic span
    (request,) = received.log_requests
    (resource_logs,) = request.resource_logs
    assert values(resource_logs.resource.attributes)["service.name"] == "rag-monitor"
    records = {
        (values(r.attributes)["rag.request_id"], values(r.attributes)["gen_ai.evaluation.name"]): r
        for r in received.log_records()
    }
    assert set(records) == {
        ("req-1", "local_groundedness"),
        ("req-1", "faithfulness"),
        ("no-trace", "x"),
    }
    assert {r.event_name for r in records.values()} == {EVENT_NAME}
    for name in ("local_groundedness", "faithfulness"):
        joined = records["req-1", name]
        assert (joined.trace_id.hex(), joined.span_id.hex()) == (trace_id, span_id)
        assert joined.time_unix_nano > 0
    assert values(records["req-1", "local_groundedness"].attributes) == {
        "gen_ai.evaluation.name": "local_groundedness",
        "gen_ai.evaluation.score.value": 0.25,
        "gen_ai.evaluation.score.label": "fail",
        "gen_ai.evaluation.explanation": "unsupported: built by the Romans",
        "rag_monitor.version": __version__,
        "rag.request_id": "req-1",
        "rag.service": "shop",
        "rag.context_source": "prompt",
    }
    assert values(records["req-1", "faithfulness"].attributes) == {
        "gen_ai.evaluation.name": "faithfulness",
        "error.type": "timeout",
        "gen_ai.evaluation.explanation": "timeout: no verdict within 30s",
        "rag_monitor.version": __version__,
        "rag.request_id": "req-1",
        "rag.service": "shop",
        "rag.context_source": "prompt",
    }
    # No trace context: a log record without ids, not a drop.
    orphan = records["no-trace", "x"]
    assert orphan.trace_id == b"" and orphan.span_id == b""
    assert sink.exported == 2 and dropped(t, "queue_full") == dropped(t, "export_failed") == 0


@pytest.mark.asyncio
async def test_explanations_leave_only_when_asked_for_and_then_redacted(
    receiver: tuple[str, str, Received],
) -> None:
    """An explanation quotes the record's text: by default an event carries none (an
    evaluation's error still says what went wrong); asked for, it comes redacted."""
    protocol, endpoint, received = receiver
    trace_id, span_id = original_trace()
    redact = Redactor(Redaction(enabled=True, detectors=["email"]))
    explanation = "unsupported: write to ann@example.com"
    for include in (False, True):
        exporter = create_exporter(endpoint, protocol, signal="logs")  # type: ignore[arg-type]
        sink = OtlpEventsSink(
            exporter, create_telemetry(), include_explanations=include, redact=redact
        )
        await sink.start()
        record = RagRecord(
            request_id=f"req-{include}",
            trace_id=trace_id,
            span_id=span_id,
            service="shop",
            response="x",
        )
        failed = EvalResult.failed("faithfulness", "timeout: no verdict within 30s")
        verdict = EvalResult(
            name="local_groundedness",
            score=0.2,
            normalized=0.2,
            passed=False,
            explanation=explanation,
        )
        sink.emit([Evaluated(record, {"local_groundedness": verdict, "faithfulness": failed})])
        await sink.shutdown(DELIVER_ALL_S)
    shown = {
        (
            values(r.attributes)["rag.request_id"],
            values(r.attributes)["gen_ai.evaluation.name"],
        ): values(r.attributes).get("gen_ai.evaluation.explanation")
        for r in received.log_records()
    }
    assert shown == {
        ("req-False", "local_groundedness"): None,
        ("req-False", "faithfulness"): "timeout: no verdict within 30s",
        ("req-True", "local_groundedness"): "unsupported: write to [REDACTED:email]",
        ("req-True", "faithfulness"): "timeout: no verdict within 30s",
    }


@pytest.mark.asyncio
async def test_unreachable_endpoint_is_counted_not_raised() -> None:
    t = create_telemetry()
    with ClosedPort() as closed:
        exporter = create_exporter(f"127.0.0.1:{closed.port}", "http/protobuf", timeout_s=1)
        waits = RecordedSleep()
        sink = OtlpEventsSink(exporter, t, sleep=waits)
        await sink.start()
        trace_id, span_id = original_trace()
        sink.emit(
            [
                Evaluated(
                    RagRecord(request_id="r", trace_id=trace_id, span_id=span_id, response="x"),
                    {"local_relevance": EvalResult(name="local_relevance", score=1.0, passed=True)},
                )
            ]
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


def app_trace_through_monitor(
    tmp_path: Path,
    otlp: dict[str, str],
    arrived: Callable[[], object],
    what: str,
) -> tuple[str, set[str]]:
    """`rag-monitor run` with `exporters.otlp` set to `otlp` takes one RAG trace the app
    makes with the OpenTelemetry SDK (OTLP/HTTP into the monitor), until `arrived()`;
    returns the trace id and the ids of the app's spans."""
    config = tmp_path / "tmp.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "receivers": {
                    "otlp": {
                        "grpc": {"enabled": False},
                        "http": {"endpoint": "127.0.0.1:0"},
                    }
                },
                "exporters": {"prometheus": {"endpoint": "127.0.0.1:0"}, "otlp": otlp},
            }
        )
    )
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("app")
    try:
        with rag_monitor(tmp_path, config) as ports:
            provider.add_span_processor(
                SimpleSpanProcessor(
                    HttpExporter(endpoint=f"http://127.0.0.1:{ports.http}/v1/traces")
                )
            )
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
            wait_until(arrived, 60, what)
    finally:
        provider.shutdown()
    app_spans = {f"{s.context.span_id:016x}" for s in memory.get_finished_spans()}
    return f"{root.get_span_context().trace_id:032x}", app_spans


def test_running_monitor_puts_verdicts_into_the_apps_trace(tmp_path: Path) -> None:
    """`rag-monitor run` with `exporters.otlp` set: the app's trace (OTel SDK, OTLP/HTTP into
    the monitor) comes back to the OTLP receiver stub with the verdicts as events."""
    received = Received()
    endpoint, stop = grpc_stub(received)
    try:
        trace_id, app_spans = app_trace_through_monitor(
            tmp_path,
            {"endpoint": endpoint, "protocol": "grpc"},
            received.spans,
            "evaluation span at the OTLP stub",
        )
    finally:
        stop()
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


def test_running_monitor_with_signal_logs_joins_log_records_to_the_apps_spans(
    tmp_path: Path,
) -> None:
    """`rag-monitor run` with `exporters.otlp.signal: logs`: the verdicts on the app's trace
    reach the OTLP receiver stub as log records carrying the ids of the app's span."""
    received = Received()
    endpoint, stop = grpc_stub(received)
    try:
        trace_id, app_spans = app_trace_through_monitor(
            tmp_path,
            {"endpoint": endpoint, "protocol": "grpc", "signal": "logs"},
            lambda: len(received.log_records()) >= 4,
            "four log records at the OTLP stub",
        )
    finally:
        stop()
    records = received.log_records()
    assert received.spans() == []
    assert {r.event_name for r in records} == {EVENT_NAME}
    assert {r.trace_id.hex() for r in records} == {trace_id}
    assert {r.span_id.hex() for r in records} <= app_spans
    names = sorted(values(r.attributes)["gen_ai.evaluation.name"] for r in records)
    assert names == ["local_groundedness", "local_relevance", "local_retrieval", "local_safety"]


def test_check_config_names_the_signal_and_refuses_an_unknown_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("exporters:\n  otlp: {endpoint: 'collector:4317', signal: logs}\n")
    assert main(["check-config", str(config)]) == 0
    shown = capsys.readouterr().out
    assert "# evaluation events as OTLP log records to collector:4317 (grpc)" in shown
    assert yaml.safe_load(shown)["exporters"]["otlp"]["signal"] == "logs"
    config.write_text("exporters:\n  otlp: {endpoint: 'collector:4317', signal: metrics}\n")
    assert main(["check-config", str(config)]) == 1
    assert "exporters.otlp.signal:" in capsys.readouterr().err


@pytest.mark.asyncio
async def test_shutdown_is_safe_without_start_and_twice() -> None:
    t = create_telemetry()
    with ClosedPort() as closed:
        sink = OtlpEventsSink(create_exporter(f"127.0.0.1:{closed.port}", "grpc", timeout_s=1), t)
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
    sink.emit([Evaluated(*record(1))])
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
    sink.emit([Evaluated(*record(1))])
    await asyncio.to_thread(wait_until, lambda: sink.exporting, 10, "the first export")
    sink.emit([Evaluated(*record(2))])
    sink.emit([Evaluated(*record(3))])
    await sink.shutdown(0.2)
    assert dropped(t, "shutdown") == 3 and sink.exported == 0
