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

from tests.frameworks.apps import framework_apps as apps

SPAN_ONLY = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
}


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    os.environ.update(SPAN_ONLY)  # read by the instrumentation when it starts
    from google import genai
    from google.genai import types
    from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

    from tests.frameworks.apps.openai_server import serve

    provider, roots = apps.tracer_provider(f"{instrumentation}-{variant}", endpoint)
    GoogleGenAiSdkInstrumentor().instrument(tracer_provider=provider)
    base = serve(apps.three_planted_answer).removesuffix("/v1")
    client = genai.Client(
        api_key="scripted", http_options=types.HttpOptions(base_url=base, api_version="v1beta")
    )

    def ask(question: str) -> tuple[str, list[str]]:
        documents = [apps.KB[uri] for uri in apps.search(question)]  # untraced
        response = client.models.generate_content(
            model="scripted",
            contents=question,
            config=types.GenerateContentConfig(system_instruction=apps.numbered_prompt(documents)),
        )
        return response.text or "", documents

    apps.ask_under_app_spans(provider, ask)
    apps.finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
