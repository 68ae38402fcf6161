"""An OpenAI Agents SDK agent whose retrieval is a function tool, traced by OpenInference
(`openinference-instrumentation-openai-agents`), exporting over OTLP/HTTP. Run as
`python -m tests._openai_agents_app openinference agent ENDPOINT`.

The model is the SDK's own `OpenAIChatCompletionsModel` over an `AsyncOpenAI` client
pointed at the scripted server on 127.0.0.1 (`tests/_openai_server.py`): the first turn
calls `search_kb`, the second answers from its result. Prints one JSON line per question."""

from __future__ import annotations

import json
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
from openai import AsyncOpenAI
from opentelemetry import trace

from tests._framework_apps import KB, QUESTIONS, finish, report, search, tracer_provider
from tests._openai_server import serve


@function_tool
def search_kb(query: str) -> str:
    """Search the knowledge base."""
    return json.dumps([{"id": uri, "content": KB[uri]} for uri in search(query)])


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    provider, roots = tracer_provider("openai-agents-openinference", endpoint)
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    client = AsyncOpenAI(base_url=serve(), api_key="scripted")
    agent = Agent(
        name="kb-agent",
        instructions="Answer from the knowledge base.",
        model=OpenAIChatCompletionsModel(model="scripted", openai_client=client),
        tools=[search_kb],
    )
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
            result = Runner.run_sync(agent, question)
        sources = [KB[uri] for uri in search(question)]
        report(trace_id, question, str(result.final_output), sources)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
