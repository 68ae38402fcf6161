"""A Pydantic AI agent whose retrieval is a tool, traced by Pydantic AI's own
instrumentation (GenAI conventions, content included), exporting over OTLP/HTTP. Run as
`python -m tests.frameworks.apps.pydantic_ai_app pydantic-ai agent ENDPOINT`.

The model is Pydantic AI's `FunctionModel` (its own hook for a scripted model): the first
turn calls the `search_kb` tool with the question, the second answers from the tool's
result by `planted_answer`. Prints one JSON line per question."""

from __future__ import annotations

import sys

from opentelemetry import trace
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    finish,
    planted_answer,
    report,
    search,
    tracer_provider,
)


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    if not returns:
        question = next(
            str(p.content)
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, UserPromptPart)
        )
        return ModelResponse(parts=[ToolCallPart("search_kb", {"query": question})])
    prompt = "\n".join(str(p.model_response_str()) for p in returns)
    return ModelResponse(parts=[TextPart(planted_answer(prompt))])


def search_kb(query: str) -> list[dict[str, str]]:
    """Search the knowledge base."""
    return [{"id": uri, "content": KB[uri]} for uri in search(query)]


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    provider, roots = tracer_provider("pydantic-ai", endpoint)
    agent = Agent(
        FunctionModel(model, model_name="scripted"),
        tools=[search_kb],
    )
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
            result = agent.run_sync(question)
        sources = [KB[uri] for uri in search(question)]
        report(trace_id, question, result.output, sources)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
