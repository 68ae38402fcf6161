"""Spans and GenAI log events of the same traces, exported by the OpenTelemetry SDK's own
batch processors with their default delays (logs every second, spans every five), in
either order: every question is one whole record. Logs first (what the default delays
give): the events wait for their spans. Spans first (an app that shuts its tracer
provider down before its logger provider, as Semantic Kernel's did): each whole trace,
its chat calls without output, waits for its events and is released as soon as they
come, never evaluated without them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from monitor.records import EXTRACTION_SUSPECT
from monitor.telemetry import Telemetry
from tests._pipeline import RecordingStage, started
from tests._wait import wait_until_async
from tests.receivers.test_otlp_receivers import _config, _value

QUESTIONS = [f"Question number {i}: when was the tower completed?" for i in range(6)]
DOC = "The Eiffel Tower was completed in 1889."


def _answer(i: int) -> str:
    return f"Answer {i}: it was completed in 1889."


class _HeldLogs(OTLPLogExporter):
    """The SDK's exporter, its sends held until `go` is set (a slow network): the spans
    reach the monitor first."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(endpoint=endpoint)
        self.go = threading.Event()

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self.go.wait(60)
        return super().export(batch)


def _app(port: int) -> tuple[TracerProvider, LoggerProvider, _HeldLogs, list[str]]:
    """Six chat calls whose messages are GenAI log events, each under a request span, with
    the SDK's batch processors at their defaults; the trace ids."""
    resource = Resource.create({"service.name": "events-app"})
    tracing = TracerProvider(resource=resource)
    url = f"http://127.0.0.1:{port}/v1"
    tracing.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/traces")))
    logging = LoggerProvider(resource=resource)
    logs = _HeldLogs(f"{url}/logs")
    logging.add_log_record_processor(BatchLogRecordProcessor(logs))
    tracer, logger = tracing.get_tracer("app"), logging.get_logger("genai")
    trace_ids = []
    for i, question in enumerate(QUESTIONS):
        with tracer.start_as_current_span("POST /ask") as root:
            trace_ids.append(f"{root.get_span_context().trace_id:032x}")
            chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
            with tracer.start_as_current_span("chat m", attributes=chat):
                logger.emit(event_name="gen_ai.system.message", body={"content": DOC})
                logger.emit(event_name="gen_ai.user.message", body={"content": question})
                logger.emit(
                    event_name="gen_ai.choice",
                    body={"index": 0, "finish_reason": "stop", "message": {"content": _answer(i)}},
                )
    return tracing, logging, logs, trace_ids


@pytest.mark.parametrize("order", ["logs-first", "spans-first"])
async def test_spans_and_log_events_in_either_order_make_whole_records(
    telemetry: Telemetry, order: str
) -> None:
    stage = RecordingStage()
    # A grace longer than any wait here, so that the test does not depend on speed.
    config = _config()
    config = config.model_copy(
        update={
            "trace_assembly": config.trace_assembly.model_copy(update={"log_events_wait_s": 120})
        }
    )
    receivers = await started(config, stage, telemetry)
    try:
        assert receivers.http is not None and receivers.http.port is not None
        tracing, logging, logs, trace_ids = _app(receivers.http.port)
        if order == "spans-first":
            await asyncio.to_thread(tracing.shutdown)
            # Every trace is whole, and waits: its chat call has no output yet.
            await wait_until_async(
                lambda: _value(telemetry, "spans_received_total", receiver="otlp_http") >= 12,
                30,
                "the spans",
            )
            assert stage.records == []
            logs.go.set()
            await asyncio.to_thread(logging.shutdown)
        else:
            logs.go.set()
            # The defaults send the logs within a second, the spans within five.
            await wait_until_async(
                lambda: _value(telemetry, "spans_received_total", receiver="otlp_http") >= 18,
                30,
                "the log events",
            )
            await asyncio.to_thread(tracing.shutdown)
            await asyncio.to_thread(logging.shutdown)
        for trace_id in trace_ids:
            await stage.wait_for(trace_id)
    finally:
        await receivers.shutdown(5)
    assert len(stage.records) == 6
    for i, trace_id in enumerate(trace_ids):
        ((_, record),) = await stage.wait_for(trace_id)
        assert (record.query, record.response) == (QUESTIONS[i], _answer(i))
        assert EXTRACTION_SUSPECT not in record.metadata
    assert _value(telemetry, "traces_assembled_total", trigger="root_ended") == 6
    assert _value(telemetry, "dropped_total", stage="assemble", reason="late_span") == 0
