"""A LangGraph prebuilt ReAct agent whose retrieval is a `search_docs` tool returning two
documents as `[{"id", "content"}]` (LangGraph's tool node makes that list the JSON
content of a `ToolMessage`), exporting over OTLP/HTTP. Run as
`python -m tests.frameworks.apps.langgraph_tools_app INSTRUMENTATION agent ENDPOINT`, INSTRUMENTATION
`openinference` (`openinference-instrumentation-langchain`) or `langsmith` (LangSmith's
OTel mode: `LANGSMITH_OTEL_ENABLED`, `LANGSMITH_OTEL_ONLY`; its run inputs and outputs
as `gen_ai.prompt` / `gen_ai.completion` on every span).

The chat model is `tests.frameworks.apps.langgraph_app.ScriptedChatModel`: on a question it calls
`search_docs` with the question; given the tool's result it answers by `planted_answer`.
Prints one JSON line per question."""

from __future__ import annotations

import os
import sys

from opentelemetry import trace

from tests.frameworks.apps.framework_apps import KB, ask_each_question, finish, search
from tests.frameworks.apps.framework_apps import tracer_provider as make_provider


def search_docs(query: str) -> list[dict[str, str]]:
    """Search the knowledge base."""
    return [{"id": uri, "content": KB[uri]} for uri in search(query)]


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    if instrumentation == "langsmith":
        os.environ.update(
            {
                "LANGSMITH_TRACING": "true",
                "LANGSMITH_OTEL_ENABLED": "true",
                "LANGSMITH_OTEL_ONLY": "true",
                "LANGSMITH_API_KEY": "unused-in-otel-only-mode",
            }
        )
    provider, roots = make_provider(f"langgraph-tools-{instrumentation}", endpoint)
    trace.set_tracer_provider(provider)  # LangSmith's OTel mode uses the global provider
    if instrumentation == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langgraph.prebuilt import create_react_agent

    from tests.frameworks.apps.langgraph_app import ScriptedChatModel

    model = ScriptedChatModel(tool="search_docs", plan="", planted=True)
    agent = create_react_agent(model, [tool(search_docs)])

    def ask(question: str) -> str:
        state = agent.invoke({"messages": [HumanMessage(content=question)]})
        assert any(isinstance(m, ToolMessage) for m in state["messages"])
        return str(state["messages"][-1].content)

    ask_each_question(provider, ask)
    wait_for_all_tracers()
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
