"""A Microsoft Agent Framework (Python) agent whose retrieval is a `search_kb` tool
returning two documents as `[{"id", "content"}]`, traced by the framework's own
OpenTelemetry instrumentation (`agent_framework.observability`, on by default, with the
global tracer provider), exporting over OTLP/HTTP. Run as
`python -m tests.frameworks.apps.agent_framework_app agent-framework VARIANT ENDPOINT`, VARIANT `agent`
(`ENABLE_SENSITIVE_DATA=true`: messages and tool results on the spans) or `no-content`
(the framework's default: spans without text).

The model is the framework's `OpenAIChatCompletionClient` pointed at the scripted server
on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`): the first turn calls `search_kb`, the second
answers from its result. Prints one JSON line per question."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from opentelemetry import trace

from tests.frameworks.apps.framework_apps import (
    KB,
    ask_each_question,
    finish,
    search,
    tracer_provider,
)
from tests.frameworks.apps.openai_server import serve


def search_kb(query: str) -> str:
    """Search the knowledge base."""
    return json.dumps([{"id": uri, "content": KB[uri]} for uri in search(query)])


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    if variant == "agent":
        # Read when the framework's observability settings are first loaded (its import).
        os.environ["ENABLE_SENSITIVE_DATA"] = "true"
    provider, roots = tracer_provider(f"agent-framework-{variant}", endpoint)
    trace.set_tracer_provider(provider)  # the framework traces with the global provider
    from agent_framework import Agent, tool
    from agent_framework.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(model="scripted", api_key="scripted", base_url=serve())
    agent = Agent(
        client=client,
        name="librarian",
        instructions="Answer from the knowledge base.",
        tools=[tool(search_kb)],
    )
    loop = asyncio.new_event_loop()

    def ask(question: str) -> str:
        return str(loop.run_until_complete(agent.run(question)).text)

    ask_each_question(provider, ask)
    loop.close()
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
