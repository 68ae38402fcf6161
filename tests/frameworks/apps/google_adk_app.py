"""A Google Agent Development Kit (ADK, Python) `LlmAgent` whose retrieval is a `search_kb`
function tool returning two documents as `[{"id", "content"}]`, traced by ADK's own
OpenTelemetry instrumentation (the `gcp.vertex.agent` tracer, with the global tracer
provider), exporting over OTLP/HTTP. Run as
`python -m tests.frameworks.apps.google_adk_app google-adk VARIANT ENDPOINT`, VARIANT `span-only`
(`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`: messages and tool results
on the spans) or `no-content` (ADK's default: spans without text).

The model is a `BaseLlm` of its own (ADK's extension point for models): the first turn
calls `search_kb` with the user's question, the second answers from the tool's result by
`planted_answer`. Prints one JSON line per question."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncGenerator
from typing import Any

from opentelemetry import trace

from tests.frameworks.apps.framework_apps import (
    KB,
    ask_each_question,
    finish,
    planted_answer,
    search,
    tracer_provider,
)


def search_kb(query: str) -> list[dict[str, str]]:
    """Search the knowledge base."""
    return [{"id": uri, "content": KB[uri]} for uri in search(query)]


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    if variant == "span-only":
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    provider, roots = tracer_provider(f"google-adk-{variant}", endpoint)
    trace.set_tracer_provider(provider)  # ADK traces with the global provider
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    class Scripted(BaseLlm):
        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            parts = [p for c in llm_request.contents for p in c.parts or []]
            results = [p.function_response.response for p in parts if p.function_response]
            if results:
                part = types.Part(text=planted_answer(json.dumps(results)))
            else:
                question = [p.text for p in parts if p.text][-1]
                call = types.FunctionCall(name="search_kb", args={"query": question})
                part = types.Part(function_call=call)
            usage = types.GenerateContentResponseUsageMetadata(
                prompt_token_count=len(str(results or parts).split()), candidates_token_count=8
            )
            yield LlmResponse(
                content=types.Content(role="model", parts=[part]), usage_metadata=usage
            )

    agent = LlmAgent(
        name="librarian",
        model=Scripted(model="scripted"),
        instruction="Answer from the knowledge base.",
        tools=[search_kb],
    )
    runner = InMemoryRunner(agent=agent, app_name="kb")
    loop = asyncio.new_event_loop()

    async def run(question: str) -> str:
        # One conversation per question.
        session = await runner.session_service.create_session(app_name="kb", user_id="user")
        message = types.Content(role="user", parts=[types.Part(text=question)])
        answer: Any = None
        async for event in runner.run_async(
            user_id="user", session_id=session.id, new_message=message
        ):
            if event.is_final_response() and event.content and event.content.parts:
                answer = event.content.parts[0].text
        return str(answer)

    def ask(question: str) -> str:
        return loop.run_until_complete(run(question))

    ask_each_question(provider, ask)
    loop.close()
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
