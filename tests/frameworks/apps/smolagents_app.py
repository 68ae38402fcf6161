"""A smolagents `ToolCallingAgent` with a retriever tool, traced by OpenInference
(`openinference-instrumentation-smolagents`), exporting over OTLP/HTTP. Run as
`python -m tests.frameworks.apps.smolagents_app openinference agent ENDPOINT`.

The model is smolagents' own `OpenAIServerModel` pointed at the scripted server on
127.0.0.1 (`tests/frameworks/apps/openai_server.py`): the first step calls `search_kb`, the second ends
with `final_answer`. Prints one JSON line per question."""

from __future__ import annotations

import sys

from opentelemetry import trace
from smolagents import OpenAIServerModel, Tool, ToolCallingAgent

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    finish,
    report,
    search,
    tracer_provider,
)
from tests.frameworks.apps.openai_server import serve


class SearchKb(Tool):  # type: ignore[misc]
    name = "search_kb"
    description = "Search the knowledge base."
    inputs = {"query": {"type": "string", "description": "what to look for"}}
    output_type = "array"

    def forward(self, query: str) -> list[dict[str, str]]:
        return [{"id": uri, "content": KB[uri]} for uri in search(query)]


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    provider, roots = tracer_provider("smolagents-openinference", endpoint)
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    SmolagentsInstrumentor().instrument(tracer_provider=provider)
    model = OpenAIServerModel(model_id="scripted", api_base=serve(), api_key="scripted")
    agent = ToolCallingAgent(tools=[SearchKb()], model=model, max_steps=3, verbosity_level=0)
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
            output = agent.run(question)
        sources = [KB[uri] for uri in search(question)]
        report(trace_id, question, str(output), sources)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
