"""A RAG app whose model calls go through LiteLLM, traced by LiteLLM's own OpenTelemetry
callback (`litellm.callbacks = ["otel"]`), its retriever a plain function with no span, and
no `extraction.conventions` entry. Run as
`python -m tests.frameworks.apps.litellm_app litellm VARIANT ENDPOINT`:

- `callback`: the app makes no span of its own: each call is one `litellm_request` trace;
- `app-spans`: each question is asked under the app's own `POST /ask` span, and
  `USE_OTEL_LITELLM_REQUEST_SPAN=true` has the callback send its model span as a child of
  it — from the callback's thread, after the app's span (the trace's root) has ended.

The SDK's tracer provider (OTLP/HTTP to the monitor) is the global one, which the callback
uses. The model is the scripted server on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`,
through LiteLLM's `openai/` provider), planting three wrong facts. Prints one JSON line per
question."""

from __future__ import annotations

import os
import sys
import time

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    finish,
    numbered_prompt,
    report,
    search,
    three_planted_answer,
    tracer_provider,
)

# How long the app waits for the callback to end a call's span (it runs on another thread).
CALLBACK_WAIT_S = 60


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    if variant == "app-spans":
        os.environ["USE_OTEL_LITELLM_REQUEST_SPAN"] = "true"
    import litellm
    from opentelemetry import trace

    from tests.frameworks.apps.openai_server import serve

    provider, roots = tracer_provider(f"{instrumentation}-{variant}", endpoint)
    trace.set_tracer_provider(provider)  # the callback takes the global provider
    litellm.callbacks = ["otel"]
    base = serve(three_planted_answer)
    tracer = provider.get_tracer("app")
    for number, (question, _) in enumerate(QUESTIONS):
        documents = [KB[uri] for uri in search(question)]  # untraced
        messages = [
            {"role": "system", "content": numbered_prompt(documents)},
            {"role": "user", "content": question},
        ]
        if variant == "app-spans":
            with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
                trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
                response = litellm.completion(
                    model="openai/scripted", api_base=base, api_key="scripted", messages=messages
                )
            # The callback ends its model span on its own thread after the app's root ended; a
            # service keeps running meanwhile, so the app waits for it rather than exit first.
            deadline = time.monotonic() + CALLBACK_WAIT_S
            while roots.ended.get(trace_id, 0) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            response = litellm.completion(
                model="openai/scripted", api_base=base, api_key="scripted", messages=messages
            )
            # The callback ends the call's root span on its own thread.
            deadline = time.monotonic() + CALLBACK_WAIT_S
            while len(roots.trace_ids) <= number and time.monotonic() < deadline:
                time.sleep(0.01)
            trace_id = roots.trace_ids[number]
        report(trace_id, question, response.choices[0].message.content or "", documents)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
