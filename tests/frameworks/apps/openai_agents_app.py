"""An OpenAI Agents SDK agent whose retrieval is a function tool, traced by OpenInference
(`openinference-instrumentation-openai-agents`), exporting over OTLP/HTTP. Run as
`python -m tests.frameworks.apps.openai_agents_app openinference agent ENDPOINT`.

The model is the SDK's own `OpenAIChatCompletionsModel` over an `AsyncOpenAI` client
pointed at the scripted server on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`): the first turn
calls `search_kb`, the second answers from its result. Variant `mcp`: the tool is
`search_docs` of an MCP server over stdio (`tests/frameworks/apps/mcp_kb_server.py`), whose two text parts
each hold one document as JSON. Prints one JSON line per question."""

from __future__ import annotations

import asyncio
import json
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
from agents.mcp import MCPServerStdio, MCPServerStdioParams
from openai import AsyncOpenAI

from tests.frameworks.apps.framework_apps import (
    KB,
    ask_each_question,
    finish,
    search,
    tracer_provider,
)
from tests.frameworks.apps.openai_server import serve


@function_tool
def search_kb(query: str) -> str:
    """Search the knowledge base."""
    return json.dumps([{"id": uri, "content": KB[uri]} for uri in search(query)])


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    service = "openai-agents-openinference" + ("-mcp" if variant == "mcp" else "")
    provider, roots = tracer_provider(service, endpoint)
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    model = OpenAIChatCompletionsModel(
        model="scripted", openai_client=AsyncOpenAI(base_url=serve(), api_key="scripted")
    )
    instructions = "Answer from the knowledge base."
    loop = asyncio.new_event_loop()  # one loop for the whole run: the MCP session lives on it
    kb: MCPServerStdio | None = None
    if variant == "mcp":
        params: MCPServerStdioParams = {
            "command": sys.executable,
            "args": ["-m", "tests.frameworks.apps.mcp_kb_server"],
        }
        kb = MCPServerStdio(params=params)
        loop.run_until_complete(kb.connect())  # type: ignore[no-untyped-call]
        agent = Agent(name="kb-agent", instructions=instructions, model=model, mcp_servers=[kb])
    else:
        agent = Agent(name="kb-agent", instructions=instructions, model=model, tools=[search_kb])

    def ask(question: str) -> str:
        return str(loop.run_until_complete(Runner.run(agent, question)).final_output)

    ask_each_question(provider, ask)
    if kb is not None:
        loop.run_until_complete(kb.cleanup())  # type: ignore[no-untyped-call]
    loop.close()
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
