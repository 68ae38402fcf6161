"""An AutoGen AgentChat `AssistantAgent` whose retrieval is a `search_kb` tool returning
two documents as `[{"id", "content"}]`, traced by OpenInference's AutoGen AgentChat
instrumentation (AutoGen's own spans, `invoke_agent` / `execute_tool`, carry no content),
exporting over OTLP/HTTP. Run as `python -m tests.frameworks.apps.autogen_app INSTRUMENTATION agent
ENDPOINT`: `openinference`, or `autogen` for AutoGen's own spans alone.

The model client is AutoGen's `OpenAIChatCompletionClient` pointed at the scripted server
on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`): the first turn calls `search_kb`, the second
answers from its result (`reflect_on_tool_use`). Prints one JSON line per question."""

from __future__ import annotations

import asyncio
import json
import sys

from opentelemetry.sdk.trace import TracerProvider

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    finish,
    report,
    search,
    tracer_provider,
)
from tests.frameworks.apps.openai_server import serve


def search_kb(query: str) -> str:
    """Search the knowledge base."""
    return json.dumps([{"id": uri, "content": KB[uri]} for uri in search(query)])


async def ask_each_question(provider: TracerProvider, instrumentation: str) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.models import ModelInfo
    from autogen_ext.models.openai import OpenAIChatCompletionClient
    from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

    if instrumentation == "openinference":
        AutogenAgentChatInstrumentor().instrument(tracer_provider=provider)
    client = OpenAIChatCompletionClient(
        model="scripted",
        base_url=serve(),
        api_key="scripted",
        model_info=ModelInfo(
            vision=False,
            function_calling=True,
            json_output=False,
            family="unknown",
            structured_output=False,
        ),
    )
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}) as span:
            trace_id = f"{span.get_span_context().trace_id:032x}"
            agent = AssistantAgent(  # one per request: its `create_agent` span is the request's
                "librarian",
                model_client=client,
                tools=[search_kb],
                system_message="Answer from the knowledge base.",
                reflect_on_tool_use=True,
            )
            result = await agent.run(task=question)
        answer = result.messages[-1].to_text()
        report(trace_id, question, answer, [KB[uri] for uri in search(question)])
    await client.close()


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    from opentelemetry import trace

    provider, roots = tracer_provider(f"autogen-{instrumentation}", endpoint)
    trace.set_tracer_provider(provider)  # AutoGen's own spans go to the global provider
    asyncio.run(ask_each_question(provider, instrumentation))
    # Only now, with the event loop closed, has the last run's `invoke_agent` span ended
    # (it ends when its stream, an async generator, is finalised).
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
