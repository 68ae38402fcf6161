"""A CrewAI crew of one agent whose retrieval is a `search_kb` tool returning two documents
as `[{"id", "content"}]`, traced by OpenInference (its CrewAI instrumentation for the crew,
agent and tool spans, its OpenAI instrumentation for the model calls CrewAI makes through
the openai SDK), exporting over OTLP/HTTP. Run as
`python -m tests.frameworks.apps.crewai_app openinference crew ENDPOINT`.

The model is the scripted server on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`): the first turn
calls `search_kb` with the user's message, the second answers from its result. Prints one
JSON line per question, its sources being what the tool returned (the model searches with
the whole task prompt CrewAI wraps the question in)."""

from __future__ import annotations

import json
import os
import sys

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    finish,
    report,
    search,
    tracer_provider,
)
from tests.frameworks.apps.openai_server import serve


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    # CrewAI's own telemetry would call out to its service.
    os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
    os.environ["CREWAI_DISABLE_TRACKING"] = "true"
    os.environ["OTEL_SDK_DISABLED"] = "false"
    from crewai import LLM, Agent, Crew, Task
    from crewai.tools import tool
    from openinference.instrumentation.crewai import CrewAIInstrumentor
    from openinference.instrumentation.openai import OpenAIInstrumentor

    provider, roots = tracer_provider(f"crewai-{instrumentation}", endpoint)
    CrewAIInstrumentor().instrument(tracer_provider=provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    returned: list[list[str]] = []

    @tool("search_kb")
    def search_kb(query: str) -> str:
        """Search the knowledge base."""
        found = search(query)
        returned.append(found)
        return json.dumps([{"id": uri, "content": KB[uri]} for uri in found])

    llm = LLM(model="openai/scripted", base_url=serve(), api_key="scripted")
    agent = Agent(
        role="Librarian",
        goal="Answer from the knowledge base.",
        backstory="You answer questions from the knowledge base only.",
        tools=[search_kb],
        llm=llm,
        verbose=False,
    )
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        task = Task(description="{question}", expected_output="The answer.", agent=agent)
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}) as span:
            trace_id = f"{span.get_span_context().trace_id:032x}"
            crew = Crew(agents=[agent], tasks=[task], verbose=False)
            result = crew.kickoff(inputs={"question": question})
        report(trace_id, question, str(result.raw), [KB[uri] for uri in returned[-1]])
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
