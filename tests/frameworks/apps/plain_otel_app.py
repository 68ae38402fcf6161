"""A RAG app traced with the plain OpenTelemetry SDK, its model calls by an OpenAI
instrumentation, its retrieval traced by hand in a shape no convention names as holding the
documents, or not traced at all — and no `extraction.conventions` entry. Run as
`python -m tests.frameworks.apps.plain_otel_app INSTRUMENTATION VARIANT ENDPOINT`:

- `openai-v2 untraced-retriever`: the retriever is a plain function, no span; the model
  call by `opentelemetry-instrumentation-openai-v2` (content as span attributes);
- `openai-v2 genai-ids-only`: a GenAI `retrieval` span whose `gen_ai.retrieval.documents`
  holds `{id, score}` only (all the conventions require);
- `openai-v2 db-span`: the retrieval is a database client span (`db.system.name`,
  `db.query.text`), its rows not recorded;
- `openinference set-output`: an OpenInference retriever span (`OITracer`) that records
  its documents with `span.set_output(docs)` (so in `output.value`, not in
  `retrieval.documents`), the model call by `openinference-instrumentation-openai`.

Each question is asked under the app's own `POST /ask` span; the documents reach the model
as numbered blocks of its system message (`numbered_prompt`). The model is the scripted
server on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`), planting three wrong facts
(`three_planted_answer`). Prints one JSON line per question."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from tests.frameworks.apps.framework_apps import (
    KB,
    ask_under_app_spans,
    finish,
    numbered_prompt,
    search,
    three_planted_answer,
    tracer_provider,
)

# The official instrumentation with its content as span attributes.
OPENAI_V2 = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
}


def _scores(question: str) -> list[tuple[str, float]]:
    """The two documents `search` ranks first, with a score each (higher first)."""
    return [(uri, round(0.9 - n / 10, 2)) for n, uri in enumerate(search(question))]


def _untraced(tracer: Any, question: str) -> list[str]:
    return [KB[uri] for uri, _ in _scores(question)]


def _genai_ids_only(tracer: Any, question: str) -> list[str]:
    found = _scores(question)
    documents = [{"id": uri, "score": score} for uri, score in found]
    with tracer.start_as_current_span(
        "retrieval kb",
        attributes={
            "gen_ai.operation.name": "retrieval",
            "gen_ai.data_source.id": "kb",
            "gen_ai.retrieval.query.text": question,
            "gen_ai.retrieval.documents": json.dumps(documents),
        },
    ):
        return [KB[uri] for uri, _ in found]


def _db_span(tracer: Any, question: str) -> list[str]:
    from opentelemetry.trace import SpanKind

    with tracer.start_as_current_span(
        "SELECT kb",
        kind=SpanKind.CLIENT,
        attributes={
            "db.system.name": "postgresql",
            "db.operation.name": "SELECT",
            "db.collection.name": "kb",
            "db.query.text": "SELECT id, content FROM kb ORDER BY embedding <=> $1 LIMIT 2",
        },
    ):
        return [KB[uri] for uri, _ in _scores(question)]


def _set_output(tracer: Any, question: str) -> list[str]:
    with tracer.start_as_current_span("retrieve", openinference_span_kind="retriever") as span:
        span.set_input(question)
        documents = [{"id": uri, "content": KB[uri]} for uri, _ in _scores(question)]
        span.set_output(documents)
        return [d["content"] for d in documents]


RETRIEVERS: dict[str, Callable[[Any, str], list[str]]] = {
    "untraced-retriever": _untraced,
    "genai-ids-only": _genai_ids_only,
    "db-span": _db_span,
    "set-output": _set_output,
}


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    if instrumentation == "openai-v2":
        os.environ.update(OPENAI_V2)  # read by the instrumentation when it starts
    from openai import OpenAI

    from tests.frameworks.apps.openai_server import serve

    provider, roots = tracer_provider(f"{instrumentation}-{variant}", endpoint)
    tracer: Any = provider.get_tracer("app")
    if instrumentation == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    else:
        from openinference.instrumentation import OITracer, TraceConfig
        from openinference.instrumentation.openai import (
            OpenAIInstrumentor as OpenInferenceOpenAI,
        )

        OpenInferenceOpenAI().instrument(tracer_provider=provider)
        tracer = OITracer(tracer, config=TraceConfig())
    retrieve = RETRIEVERS[variant]
    client = OpenAI(base_url=serve(three_planted_answer), api_key="scripted")

    def ask(question: str) -> tuple[str, list[str]]:
        documents = retrieve(tracer, question)
        completion = client.chat.completions.create(
            model="scripted",
            messages=[
                {"role": "system", "content": numbered_prompt(documents)},
                {"role": "user", "content": question},
            ],
        )
        return completion.choices[0].message.content or "", documents

    ask_under_app_spans(provider, ask)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
