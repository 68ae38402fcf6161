"""An SDK pointed at the monitor with one endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`) exports
every signal there: traces, metrics and logs. The monitor reads traces and GenAI log
events; metrics and other log records are accepted (no export error in the app) and
counted as discarded in `otlp_discarded_total{receiver,signal}`, over HTTP and gRPC."""

from __future__ import annotations

import asyncio
import logging

import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
    OTLPMetricExporter as GrpcMetrics,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
    OTLPMetricExporter as HttpMetrics,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from harness.pipeline import RecordingStage, Served, started
from harness.pipeline import metric_value as _value
from harness.pipeline import receiver_config as _config
from monitor.telemetry import Telemetry

QUESTION = "When was the Eiffel Tower completed?"
DOC = "The Eiffel Tower was completed in 1889."
ANSWER = "It was completed in 1889."


def _every_signal(protocol: str) -> str:
    """An app whose SDK exports traces, metrics and logs to one endpoint, each exporter
    configured only by `OTEL_EXPORTER_OTLP_ENDPOINT` (set by the test); the trace id."""
    resource = Resource.create({"service.name": "every-signal"})
    grpc = protocol == "grpc"
    tracing = TracerProvider(resource=resource)
    tracing.add_span_processor(SimpleSpanProcessor(GrpcSpans() if grpc else HttpSpans()))
    reader = PeriodicExportingMetricReader(
        GrpcMetrics() if grpc else HttpMetrics(), export_interval_millis=3_600_000
    )
    metering = MeterProvider(resource=resource, metric_readers=[reader])
    logging_ = LoggerProvider(resource=resource)
    logging_.add_log_record_processor(SimpleLogRecordProcessor(GrpcLogs() if grpc else HttpLogs()))
    requests = metering.get_meter("app").create_counter("app.requests")
    tracer, logger = tracing.get_tracer("app"), logging_.get_logger("app")
    with tracer.start_as_current_span("POST /ask") as root:
        requests.add(1, {"route": "/ask"})
        logger.emit(body="handling /ask")  # an application log line, not a GenAI event
        attributes = {
            "rag.query": QUESTION,
            "rag.context": f'["{DOC}"]',
            "rag.response": ANSWER,
        }
        with tracer.start_as_current_span("answer", attributes=attributes):
            pass
    tracing.shutdown()
    assert metering.force_flush()
    metering.shutdown()
    logging_.shutdown()
    return f"{root.get_span_context().trace_id:032x}"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
async def test_an_sdk_exporting_every_signal_to_one_endpoint_logs_no_export_error(
    telemetry: Telemetry,
    protocol: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="opentelemetry")
    stage = RecordingStage()
    receivers: Served = await started(_config(late_spans_wait_s=0), stage, telemetry)
    try:
        server = receivers.grpc if protocol == "grpc" else receivers.http
        assert server is not None
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.port}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
        trace_id = await asyncio.to_thread(_every_signal, protocol)
        ((_, record),) = await stage.wait_for(trace_id)
        receiver = f"otlp_{protocol}"
        metrics = _value(telemetry, "otlp_discarded_total", receiver=receiver, signal="metrics")
        logs = _value(telemetry, "otlp_discarded_total", receiver=receiver, signal="logs")
        refused = _value(
            telemetry, "records_rejected_total", receiver=receiver, reason="not_genai_event"
        )
    finally:
        await receivers.shutdown(5)
    errors = [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry")]
    assert errors == []
    assert (record.query, record.context_text, record.response) == (QUESTION, [DOC], ANSWER)
    assert metrics >= 1 and logs == 1 and refused == 0


async def test_metrics_are_counted_per_metric_and_a_body_that_is_none_is_refused(
    telemetry: Telemetry,
) -> None:
    import httpx

    metric = {"name": "app.requests", "sum": {"dataPoints": [{"asInt": "1"}]}}
    body = {"resourceMetrics": [{"scopeMetrics": [{"metrics": [metric, metric]}]}]}
    receivers = await started(_config(), RecordingStage(), telemetry)
    try:
        assert receivers.http is not None
        url = f"http://127.0.0.1:{receivers.http.port}/v1/metrics"
        async with httpx.AsyncClient() as client:
            taken = await client.post(url, json=body)
            refused = await client.post(
                url, content=b"\xff\xff", headers={"Content-Type": "application/x-protobuf"}
            )
    finally:
        await receivers.shutdown(5)
    assert (taken.status_code, taken.json()) == (200, {})
    assert _value(telemetry, "otlp_discarded_total", receiver="otlp_http", signal="metrics") == 2
    assert refused.status_code == 400
    assert (
        _value(telemetry, "records_rejected_total", receiver="otlp_http", reason="bad_protobuf")
        == 1
    )
