"""A LlamaIndex `FunctionAgent` whose retrieval is a `search_docs` tool returning two
documents as `[{"id", "content"}]` (LlamaIndex wraps it in a `ToolOutput`), traced by
OpenInference (`openinference-instrumentation-llama-index`), exporting over OTLP/HTTP.
Run as `python -m tests.frameworks.apps.llama_index_agent_app openinference function-agent ENDPOINT`.

The model is LlamaIndex's `OpenAI` LLM (non-streaming) pointed at the scripted server on
127.0.0.1 (`tests/frameworks/apps/openai_server.py`): the first turn calls `search_docs`, the second
answers from its result. Prints one JSON line per question."""

from __future__ import annotations

import asyncio
import sys

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI

from tests.frameworks.apps.framework_apps import (
    KB,
    ask_each_question,
    finish,
    search,
    tracer_provider,
)
from tests.frameworks.apps.openai_server import serve


def search_docs(query: str) -> list[dict[str, str]]:
    """Search the knowledge base."""
    return [{"id": uri, "content": KB[uri]} for uri in search(query)]


async def _ask(agent: FunctionAgent, question: str) -> str:
    return str(await agent.run(user_msg=question))


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    provider, roots = tracer_provider(f"llama-index-agent-{instrumentation}", endpoint)
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    # A model name LlamaIndex knows to call functions; the scripted server answers for it.
    llm = OpenAI(model="gpt-4o-mini", api_base=serve(), api_key="scripted")
    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(search_docs)],
        llm=llm,
        system_prompt="Answer from the knowledge base.",
        streaming=False,
    )
    ask_each_question(provider, lambda question: asyncio.run(_ask(agent, question)))
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
