"""GenAI content sent as OTLP log events (`/v1/logs`, gRPC `LogsService/Export`): the
SDK's own log exporters send `gen_ai.*.message` / `gen_ai.choice` events inside a chat
span; the trace stage joins them to that span by trace and span id, and the record has
the question, the tool's result as context and the answer. Other log records are accepted
and counted as discarded (`otlp_discarded_total`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.util.types import AnyValue

from harness.pipeline import RecordingStage, Served, started
from harness.pipeline import metric_value as _value
from harness.pipeline import receiver_config as _config
from monitor.telemetry import Telemetry
from tests.receivers.test_otlp_receivers import _exporter

QUESTION = "When was the Eiffel Tower completed?"
DOC = "The Eiffel Tower was completed in 1889."
ANSWER = "It was completed in 1889."


def _log_exporter(receivers: Served, protocol: str) -> LogRecordExporter:
    if protocol == "grpc":
        assert receivers.grpc is not None
        return GrpcLogs(endpoint=f"127.0.0.1:{receivers.grpc.port}", insecure=True)
    assert receivers.http is not None
    return HttpLogs(endpoint=f"http://127.0.0.1:{receivers.http.port}/v1/logs")


def _send(receivers: Served, protocol: str) -> str:
    """One chat call whose content is log events, as the SDK sends them; its trace id."""
    resource = Resource.create({"service.name": "events-app"})
    tracing = TracerProvider(resource=resource)
    tracing.add_span_processor(SimpleSpanProcessor(_exporter(receivers, protocol)))
    logging = LoggerProvider(resource=resource)
    logging.add_log_record_processor(SimpleLogRecordProcessor(_log_exporter(receivers, protocol)))
    tracer, logger = tracing.get_tracer("app"), logging.get_logger("openai-v2")
    with tracer.start_as_current_span("POST /ask") as root:
        with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
            logger.emit(event_name="gen_ai.user.message", body={"content": QUESTION})
            calls: AnyValue = [{"id": "c1", "type": "function", "function": {"name": "search_kb"}}]
            logger.emit(event_name="gen_ai.assistant.message", body={"tool_calls": calls})
            logger.emit(event_name="gen_ai.tool.message", body={"content": DOC, "id": "c1"})
            logger.emit(
                event_name="gen_ai.choice",
                body={"index": 0, "finish_reason": "stop", "message": {"content": ANSWER}},
            )
            logger.emit(body="a plain application log line")  # not a GenAI event
    tracing.shutdown()
    logging.shutdown()
    return f"{root.get_span_context().trace_id:032x}"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
async def test_genai_log_events_are_joined_to_their_span(
    telemetry: Telemetry, protocol: str
) -> None:
    stage = RecordingStage()
    receivers = await started(_config(late_spans_wait_s=0), stage, telemetry)
    try:
        trace_id = await asyncio.to_thread(_send, receivers, protocol)
        ((_, record),) = await stage.wait_for(trace_id)
        receiver = f"otlp_{protocol}"
        discarded = _value(telemetry, "otlp_discarded_total", receiver=receiver, signal="logs")
    finally:
        await receivers.shutdown(5)
    assert (record.query, record.response, record.context_text) == (QUESTION, ANSWER, [DOC])
    assert record.retrieved_context[0].doc_uri == "search_kb"
    assert discarded == 1


async def test_other_logs_are_accepted_and_counted_as_discarded(telemetry: Telemetry) -> None:
    import httpx

    stage = RecordingStage()
    receivers = await started(_config(late_spans_wait_s=0), stage, telemetry)
    try:
        assert receivers.http is not None
        body = {
            "resourceLogs": [
                {
                    "scopeLogs": [
                        {"logRecords": [{"body": {"stringValue": "GET /health 200"}}]},
                    ]
                }
            ]
        }
        async with httpx.AsyncClient() as client:
            response = await client.post(
                f"http://127.0.0.1:{receivers.http.port}/v1/logs",
                content=json.dumps(body),
                headers={"Content-Type": "application/json"},
            )
    finally:
        await receivers.shutdown(5)
    assert response.status_code == 200
    assert response.json() == {}  # a full success: nothing the SDK would report
    assert _value(telemetry, "otlp_discarded_total", receiver="otlp_http", signal="logs") == 1
    assert stage.records == []


def _kv(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": _any(value)}


def _any(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_any(v) for v in value]}}
    return {"kvlistValue": {"values": [_kv(k, v) for k, v in value.items()]}}


async def test_otlp_json_operation_details_event_fills_the_chat_spans_messages(
    telemetry: Telemetry,
) -> None:
    """The newer form: one `gen_ai.client.inference.operation.details` event per call, its
    messages as structured attributes, sent as OTLP/JSON (hex ids)."""
    import httpx

    trace_id, root_id, chat_id = "ab" * 16, "01" * 8, "02" * 8
    resource = {"attributes": [_kv("service.name", "json-app")]}
    spans = {
        "resourceSpans": [
            {
                "resource": resource,
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": chat_id,
                                "parentSpanId": root_id,
                                "name": "chat m",
                                "startTimeUnixNano": "2",
                                "endTimeUnixNano": "3",
                                "attributes": [_kv("gen_ai.operation.name", "chat")],
                            },
                            {
                                "traceId": trace_id,
                                "spanId": root_id,
                                "name": "POST /ask",
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "4",
                            },
                        ]
                    }
                ],
            }
        ]
    }
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": DOC}]},
    ]
    output = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
    logs = {
        "resourceLogs": [
            {
                "resource": resource,
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": "3",
                                "eventName": "gen_ai.client.inference.operation.details",
                                "traceId": trace_id,
                                "spanId": chat_id,
                                "attributes": [
                                    _kv("gen_ai.input.messages", messages),
                                    _kv("gen_ai.output.messages", output),
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }
    stage = RecordingStage()
    receivers = await started(_config(late_spans_wait_s=0), stage, telemetry)
    try:
        assert receivers.http is not None
        base = f"http://127.0.0.1:{receivers.http.port}"
        headers = {"Content-Type": "application/json"}
        async with httpx.AsyncClient() as client:
            sent_logs = await client.post(f"{base}/v1/logs", json=logs, headers=headers)
            sent_spans = await client.post(f"{base}/v1/traces", json=spans, headers=headers)
        ((_, record),) = await stage.wait_for(trace_id)
    finally:
        await receivers.shutdown(5)
    assert (sent_logs.status_code, sent_logs.content) == (200, b"{}")
    assert sent_spans.status_code == 200
    assert (record.query, record.response, record.context_text) == (QUESTION, ANSWER, [DOC])
    assert record.service == "json-app"
