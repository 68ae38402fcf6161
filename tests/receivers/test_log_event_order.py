"""Spans and GenAI log events of the same traces, exported by the OpenTelemetry SDK's own
batch processors with their default delays (logs every second, spans every five), in
either order, made certain by holding the exporter of the kind that goes second until
every record of the other kind was acknowledged: every question is one whole record. Logs
first: the events wait for their spans. Spans first (an app that shuts its tracer
provider down before its logger provider, as Semantic Kernel's did): each whole trace,
its chat calls without output, waits for its events and is released as soon as they
come, never evaluated without them. The order is asserted from what the trace stage took
(`harness.arrivals`), events apart from spans, not from timing."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from harness.arrivals import Watched
from harness.pipeline import RecordingStage
from harness.pipeline import metric_value as _value
from harness.pipeline import receiver_config as _config
from monitor.records import EXTRACTION_SUSPECT
from monitor.telemetry import Telemetry
from tests.frameworks.apps.framework_apps import HeldLogs, HeldSpans

QUESTIONS = [f"Question number {i}: when was the tower completed?" for i in range(6)]
DOC = "The Eiffel Tower was completed in 1889."


def _answer(i: int) -> str:
    return f"Answer {i}: it was completed in 1889."


class _App:
    """Six chat calls whose messages are GenAI log events, each under a request span, with
    the SDK's batch processors at their defaults and both exporters held (`go`)."""

    def __init__(self, port: int) -> None:
        resource = Resource.create({"service.name": "events-app"})
        url = f"http://127.0.0.1:{port}/v1"
        self.spans, self.logs = HeldSpans(f"{url}/traces"), HeldLogs(f"{url}/logs")
        self.tracing = TracerProvider(resource=resource)
        self.tracing.add_span_processor(BatchSpanProcessor(self.spans))
        self.logging = LoggerProvider(resource=resource)
        self.logging.add_log_record_processor(BatchLogRecordProcessor(self.logs))
        tracer, logger = self.tracing.get_tracer("app"), self.logging.get_logger("genai")
        self.trace_ids: list[str] = []
        for i, question in enumerate(QUESTIONS):
            with tracer.start_as_current_span("POST /ask") as root:
                self.trace_ids.append(f"{root.get_span_context().trace_id:032x}")
                chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
                with tracer.start_as_current_span("chat m", attributes=chat):
                    logger.emit(event_name="gen_ai.system.message", body={"content": DOC})
                    logger.emit(event_name="gen_ai.user.message", body={"content": question})
                    logger.emit(
                        event_name="gen_ai.choice",
                        body={
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"content": _answer(i)},
                        },
                    )

    async def send_spans(self) -> None:
        """Every span, exported and acknowledged."""
        self.spans.go.set()
        await asyncio.to_thread(self.tracing.shutdown)

    async def send_logs(self) -> None:
        """Every log event, exported and acknowledged."""
        self.logs.go.set()
        await asyncio.to_thread(self.logging.shutdown)


SPANS, EVENTS = 2 * len(QUESTIONS), 3 * len(QUESTIONS)


@pytest.mark.parametrize("order", ["logs-first", "spans-first"])
async def test_spans_and_log_events_in_either_order_make_whole_records(
    telemetry: Telemetry, order: str
) -> None:
    stage = RecordingStage()
    # A grace longer than any wait here, so that the test does not depend on speed; no
    # wait for late spans, so that only this grace holds a trace whose events have not come.
    config = _config(late_spans_wait_s=0)
    config = config.model_copy(
        update={
            "trace_assembly": config.trace_assembly.model_copy(update={"log_events_wait_s": 120})
        }
    )
    served = Watched(config, stage, telemetry)
    arrivals = served.arrivals
    await served.start()
    try:
        assert served.http is not None and served.http.port is not None
        app = _App(served.http.port)
        if order == "spans-first":
            await app.send_spans()
            # Every span is in, no event: every trace is whole, and waits, its chat call
            # without output yet.
            assert (arrivals.spans, arrivals.events) == (SPANS, 0)
            assert _value(telemetry, "spans_received_total", receiver="otlp_http") == SPANS
            assert stage.records == []
            assert _value(telemetry, "traces_assembled_total", trigger="root_ended") == 0
            await app.send_logs()
        else:
            await app.send_logs()
            # Every event is in, no span (the stage's count of all it took agrees).
            assert (arrivals.spans, arrivals.events) == (0, EVENTS)
            assert _value(telemetry, "spans_received_total", receiver="otlp_http") == EVENTS
            await app.send_spans()
        for trace_id in app.trace_ids:
            await stage.wait_for(trace_id)
    finally:
        await served.shutdown(5)
    if order == "spans-first":
        assert arrivals.spans_before_first_event == SPANS
    else:
        assert arrivals.events_before_first_span == EVENTS
    assert len(stage.records) == 6
    for i, trace_id in enumerate(app.trace_ids):
        ((_, record),) = await stage.wait_for(trace_id)
        assert (record.query, record.response) == (QUESTIONS[i], _answer(i))
        assert EXTRACTION_SUSPECT not in record.metadata
    assert _value(telemetry, "traces_assembled_total", trigger="root_ended") == 6
    assert _value(telemetry, "dropped_total", stage="assemble", reason="late_span") == 0
