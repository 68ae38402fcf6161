"""An Agno agent whose retrieval is a `search_docs` tool returning two documents as
`[{"id", "content"}]`, traced by OpenInference (`openinference-instrumentation-agno`),
exporting over OTLP/HTTP. Run as `python -m tests.frameworks.apps.agno_app openinference agent ENDPOINT`.

The model is Agno's `OpenAIChat` pointed at the scripted server on 127.0.0.1
(`tests/frameworks/apps/openai_server.py`): the first turn calls `search_docs`, the second answers from
its result. Prints one JSON line per question."""

from __future__ import annotations

import sys

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
    provider, roots = tracer_provider(f"agno-{instrumentation}", endpoint)
    from openinference.instrumentation.agno import AgnoInstrumentor

    AgnoInstrumentor().instrument(tracer_provider=provider)
    from agno.agent import Agent
    from agno.models.openai import OpenAIChat

    agent = Agent(
        model=OpenAIChat(id="scripted", base_url=serve(), api_key="scripted"),
        tools=[search_docs],
        instructions="Answer from the knowledge base.",
        telemetry=False,
    )
    ask_each_question(provider, lambda question: str(agent.run(question).content))
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
