"""A Strands Agents agent whose retrieval is a `search_docs` tool returning two documents
as `[{"id", "content"}]`, traced by Strands' own GenAI instrumentation, exporting over
OTLP/HTTP. Run as `python -m tests.frameworks.apps.strands_app strands VARIANT ENDPOINT`, VARIANT
`default` (content in `gen_ai.*.message` / `gen_ai.choice` span events) or `latest`
(`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`: content in
`gen_ai.client.inference.operation.details` span events).

The model is Strands' `OpenAIModel` (non-streaming) pointed at the scripted server on
127.0.0.1 (`tests/frameworks/apps/openai_server.py`): the first turn calls `search_docs`, the second
answers from its result. Prints one JSON line per question."""

from __future__ import annotations

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


def search_docs(query: str) -> list[dict[str, str]]:
    """Search the knowledge base.

    Args:
        query: what to look for
    """
    return [{"id": uri, "content": KB[uri]} for uri in search(query)]


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    if variant == "latest":
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    provider, roots = tracer_provider(f"strands-{variant}", endpoint)
    trace.set_tracer_provider(provider)  # Strands traces with the global provider
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    model = OpenAIModel(
        client_args={"base_url": serve(), "api_key": "scripted"},
        model_id="scripted",
        params={"stream": False},
    )
    agent = Agent(
        model=model,
        tools=[tool(search_docs)],
        system_prompt="Answer from the knowledge base.",
        callback_handler=None,
    )

    def ask(question: str) -> str:
        agent.messages.clear()  # one conversation per question
        return str(agent(question))

    ask_each_question(provider, ask)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
