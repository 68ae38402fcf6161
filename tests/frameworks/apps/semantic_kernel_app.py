"""A Semantic Kernel (Python) chat completion with automatic function calling: a
`search_kb` kernel function returning two documents as `[{"id", "content"}]`, traced by
Semantic Kernel's own GenAI diagnostics with sensitive data on. Its spans carry no text:
the messages are log records of the `semantic_kernel` logger, exported as OTLP logs by
OpenTelemetry's `LoggingHandler` on that logger only. Run as
`python -m tests.frameworks.apps.semantic_kernel_app semantic-kernel ORDER ENDPOINT`, ORDER
`spans-first` or `logs-first`. Both exporters keep their default batch delays, and the
one of the kind that goes second holds its sends (`HeldLogs`, `HeldSpans`) until every
record of the other kind was exported and acknowledged and the test, told so
(`hold_until_told`), lets it go: the order is certain whatever the machine's speed.

The model is the scripted server on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`): the first
turn calls `search_kb`, the second answers from its result. Prints one JSON line per
question."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    HeldLogs,
    HeldSpans,
    finish,
    hold_until_told,
    report,
    search,
    sent,
    tracer_provider,
)
from tests.frameworks.apps.openai_server import serve


async def main(instrumentation: str, order: str, endpoint: str) -> None:
    # Read when Semantic Kernel is imported.
    os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE"] = "true"
    from openai import AsyncOpenAI
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from semantic_kernel import Kernel
    from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
    from semantic_kernel.connectors.ai.open_ai import (
        OpenAIChatCompletion,
        OpenAIChatPromptExecutionSettings,
    )
    from semantic_kernel.contents import ChatHistory
    from semantic_kernel.functions import kernel_function

    logs_endpoint = endpoint.replace("/v1/traces", "/v1/logs")
    # The kind that goes second is held.
    held: HeldSpans | HeldLogs
    spans_out: OTLPSpanExporter
    logs_out: OTLPLogExporter
    if order == "spans-first":
        spans_out, logs_out = OTLPSpanExporter(endpoint=endpoint), HeldLogs(logs_endpoint)
        held = logs_out
    else:
        spans_out, logs_out = HeldSpans(endpoint), OTLPLogExporter(endpoint=logs_endpoint)
        held = spans_out
    provider, roots = tracer_provider(f"semantic-kernel-{order}", endpoint, spans_out)
    trace.set_tracer_provider(provider)  # Semantic Kernel traces with the global provider
    logs = LoggerProvider(resource=provider.resource)
    logs.add_log_record_processor(BatchLogRecordProcessor(logs_out))
    sk_logger = logging.getLogger("semantic_kernel")
    sk_logger.addHandler(LoggingHandler(logger_provider=logs))
    sk_logger.setLevel(logging.INFO)

    class KnowledgeBase:
        @kernel_function(name="search_kb", description="Search the knowledge base.")  # type: ignore[untyped-decorator]
        def search_kb(self, query: str) -> str:
            return json.dumps([{"id": uri, "content": KB[uri]} for uri in search(query)])

    kernel = Kernel()
    service = OpenAIChatCompletion(
        ai_model_id="scripted", async_client=AsyncOpenAI(base_url=serve(), api_key="scripted")
    )
    kernel.add_service(service)
    kernel.add_plugin(KnowledgeBase(), "kb")
    settings = OpenAIChatPromptExecutionSettings(
        function_choice_behavior=FunctionChoiceBehavior.Auto()
    )
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}) as span:
            trace_id = f"{span.get_span_context().trace_id:032x}"
            history = ChatHistory(system_message="Answer from the knowledge base.")
            history.add_user_message(question)
            answer = await service.get_chat_message_content(history, settings, kernel=kernel)
        report(trace_id, question, str(answer), [KB[uri] for uri in search(question)])
    if order == "spans-first":
        provider.shutdown()
        hold_until_told("logs")
        held.go.set()
        logs.shutdown()
        sent(roots)
    else:
        logs.shutdown()
        hold_until_told("spans")
        held.go.set()
        finish(provider, roots)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
