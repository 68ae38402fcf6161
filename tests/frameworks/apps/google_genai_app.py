"""A RAG app calling its model through the Google Gen AI SDK (`google-genai`, below 3: the
instrumentation declares `google-genai < 3` and instruments nothing on a newer SDK),
traced by `opentelemetry-instrumentation-google-genai` with its content on the spans
(`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY` and the latest GenAI
conventions), its retriever a plain function with no span, and no `extraction.conventions`
entry. Run as `python -m tests.frameworks.apps.google_genai_app google-genai span-only
ENDPOINT`.

Each question is asked under the app's own `POST /ask` span, the documents as numbered
blocks of the system instruction. The model is the scripted server on 127.0.0.1
(`tests/frameworks/apps/openai_server.py`, its Gemini `generateContent` endpoint), planting
three wrong facts. Prints one JSON line per question."""

from __future__ import annotations

import os
import sys

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

SPAN_ONLY = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
}


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    os.environ.update(SPAN_ONLY)  # read by the instrumentation when it starts
    from google import genai
    from google.genai import types
    from opentelemetry import trace
    from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

    from tests.frameworks.apps.openai_server import serve

    provider, roots = tracer_provider(f"{instrumentation}-{variant}", endpoint)
    GoogleGenAiSdkInstrumentor().instrument(tracer_provider=provider)
    base = serve(three_planted_answer).removesuffix("/v1")
    client = genai.Client(
        api_key="scripted", http_options=types.HttpOptions(base_url=base, api_version="v1beta")
    )
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        documents = [KB[uri] for uri in search(question)]  # untraced
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
            response = client.models.generate_content(
                model="scripted",
                contents=question,
                config=types.GenerateContentConfig(system_instruction=numbered_prompt(documents)),
            )
        report(trace_id, question, response.text or "", documents)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
