"""The plain `openai` client in a hand-written tool loop, traced by the official
`opentelemetry-instrumentation-openai-v2`, exporting spans (and log events) over
OTLP/HTTP. Run as `python -m tests.frameworks.apps.openai_v2_app openai-v2 VARIANT ENDPOINT`:

- `span_only`: `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` and
  `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only`: the messages are span
  attributes (`gen_ai.input.messages`, `gen_ai.output.messages`);
- `events`: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (the default
  semantic conventions): the messages are OTel log events (`gen_ai.user.message`,
  `gen_ai.tool.message`, `gen_ai.choice`, ...) sent to `/v1/logs`;
- `event_only`: the latest conventions with `...=event_only`: one
  `gen_ai.client.inference.operation.details` log event per call.

The model is the scripted server on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`). Prints one
JSON line per question."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    finish,
    report,
    search,
    tracer_provider,
)

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam

SETTINGS = {
    "span_only": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
    },
    "events": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    "event_only": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "event_only",
    },
}
TOOLS: list[ChatCompletionFunctionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "search_kb",
            "description": "Search the knowledge base.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
]


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    os.environ.update(SETTINGS[variant])  # read by the instrumentation when it starts
    from openai import OpenAI
    from openai.types.chat import ChatCompletionMessageFunctionToolCall
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    from tests.frameworks.apps.openai_server import serve

    provider, roots = tracer_provider(f"openai-v2-{variant.replace('_', '-')}", endpoint)
    logs = LoggerProvider(resource=provider.resource)
    logs.add_log_record_processor(
        BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=endpoint.replace("/v1/traces", "/v1/logs"))
        )
    )
    OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=logs)  # type: ignore[no-untyped-call]
    client = OpenAI(base_url=serve(), api_key="scripted")
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
            messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": question}]
            first = client.chat.completions.create(model="scripted", messages=messages, tools=TOOLS)
            calls = first.choices[0].message.tool_calls or []
            call = calls[0]
            assert isinstance(call, ChatCompletionMessageFunctionToolCall), call
            query = json.loads(call.function.arguments)["query"]
            result = [{"id": uri, "content": KB[uri]} for uri in search(query)]
            messages.append(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.function.name,
                                "arguments": call.function.arguments,
                            },
                        }
                    ],
                }
            )
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
            second = client.chat.completions.create(
                model="scripted", messages=messages, tools=TOOLS
            )
        sources = [KB[uri] for uri in search(question)]
        report(trace_id, question, second.choices[0].message.content or "", sources)
        if question == QUESTIONS[0][0]:
            logs.force_flush()  # the first question's events arrive before its spans
    # The other questions' spans go first and their log events after them: each whole
    # trace whose chat calls have no output yet waits for them (`log_events_wait_s`).
    finish(provider, roots)
    logs.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
