"""A LangGraph agent that answers from a knowledge base through a retriever tool,
instrumented by a real instrumentation package, exporting over OTLP/HTTP. Run as
`python -m tests.frameworks.apps.langgraph_app openinference|openllmetry agent ENDPOINT`.

The agent is LangGraph's prebuilt ReAct agent. Its chat model is built on LangChain's
`BaseChatModel`: on a question it says it will search and calls the `search_kb` tool
with the question (a planning turn that has text of its own); given the tool's result it
answers by `scripted_answer`. The tool wraps a `BaseRetriever` that ranks the knowledge
base by the hashing embedding. Prints one JSON line per question."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, create_retriever_tool
from langgraph.prebuilt import create_react_agent
from opentelemetry import trace

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    embed,
    finish,
    planted_answer,
    report,
    scripted_answer,
    tracer_provider,
)

PLAN = "Let me search the knowledge base."


class KnowledgeBase(BaseRetriever):
    k: int = 2

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        q = embed(query)
        ranked = sorted(
            KB.items(), key=lambda item: -sum(a * b for a, b in zip(q, embed(item[1]), strict=True))
        )
        return [
            Document(page_content=text, metadata={"source": uri}) for uri, text in ranked[: self.k]
        ]


class ScriptedChatModel(BaseChatModel):
    """Asked a question, calls `tool` with it after saying `plan`; given anything else,
    answers it by `answer_by` (`scripted_answer`, or `planted_answer`)."""

    tool: str = "search_kb"
    plan: str = PLAN
    planted: bool = False

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def bind_tools(
        self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[getattr(t, "name", str(t)) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        last = messages[-1]
        answer_by = planted_answer if self.planted else scripted_answer
        if isinstance(last, HumanMessage):
            call = {"name": self.tool, "args": {"query": last.content}, "id": "call-1"}
            message = AIMessage(content=self.plan, tool_calls=[call])
        elif isinstance(last, ToolMessage):
            message = AIMessage(content=answer_by(str(last.content)))
        else:
            message = AIMessage(content=answer_by(""))
        return ChatResult(generations=[ChatGeneration(message=message)])


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    provider, roots = tracer_provider(f"langgraph-{instrumentation}", endpoint)
    if instrumentation == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)
    retriever = KnowledgeBase()
    tool = create_retriever_tool(retriever, "search_kb", "Search the knowledge base.")
    agent = create_react_agent(ScriptedChatModel(), [tool])
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
            state = agent.invoke({"messages": [HumanMessage(content=question)]})
        response = str(state["messages"][-1].content)
        tool_results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        sources = str(tool_results[-1].content).split("\n\n")  # the tool joins documents so
        report(trace_id, question, response, sources)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
