"""A LangGraph prebuilt ReAct agent whose retrieval is a `search_docs` tool returning two
documents as `[{"id", "content"}]` (LangGraph's tool node makes that list the JSON
content of a `ToolMessage`), exporting over OTLP/HTTP. Run as
`python -m tests._langgraph_tools_app INSTRUMENTATION agent ENDPOINT`, INSTRUMENTATION
`openinference` (`openinference-instrumentation-langchain`) or `langsmith` (LangSmith's
OTel mode: `LANGSMITH_OTEL_ENABLED`, `LANGSMITH_OTEL_ONLY`; its run inputs and outputs
as `gen_ai.prompt` / `gen_ai.completion` on every span).

The chat model is built on LangChain's `BaseChatModel`: on a question it calls
`search_docs` with the question; given the tool's result it answers by `planted_answer`.
Prints one JSON line per question."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry import trace

from tests._framework_apps import KB, QUESTIONS, finish, planted_answer, report, search
from tests._framework_apps import tracer_provider as make_provider


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
    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.language_models import BaseChatModel, LanguageModelInput
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.runnables import Runnable
    from langchain_core.tools import BaseTool, tool
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langgraph.prebuilt import create_react_agent

    class ScriptedChatModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted-chat"

        def bind_tools(
            self,
            tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
            **kwargs: Any,
        ) -> Runnable[LanguageModelInput, AIMessage]:
            return self.bind(**kwargs)

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: list[str] | None = None,
            run_manager: CallbackManagerForLLMRun | None = None,
            **kwargs: Any,
        ) -> ChatResult:
            last = messages[-1]
            if isinstance(last, HumanMessage):
                call = {"name": "search_docs", "args": {"query": last.content}, "id": "call-1"}
                message = AIMessage(content="", tool_calls=[call])
            else:
                message = AIMessage(content=planted_answer(str(last.content)))
            return ChatResult(generations=[ChatGeneration(message=message)])

    agent = create_react_agent(ScriptedChatModel(), [tool(search_docs)])
    app_tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        with app_tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
            state = agent.invoke({"messages": [HumanMessage(content=question)]})
        response = str(state["messages"][-1].content)
        assert any(isinstance(m, ToolMessage) for m in state["messages"])
        report(trace_id, question, response, [KB[uri] for uri in search(question)])
    wait_for_all_tracers()
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
