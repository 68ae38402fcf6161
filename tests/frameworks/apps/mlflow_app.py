"""A RAG app traced by MLflow's tracing SDK (`mlflow-tracing`): `mlflow.openai.autolog()`
traces the OpenAI chat calls, `@mlflow.trace(span_type=SpanType.RETRIEVER)` the retriever
(its output a list of `mlflow.entities.Document`), `@mlflow.trace` the request. MLflow
exports its spans over OTLP to `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, with gRPC unless
`OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`. (`OTEL_EXPORTER_OTLP_ENDPOINT` would also turn
on its span metrics, which fail in `mlflow-tracing` 3.17 without a tracking store and
take every span with them.) Run as `python -m tests.frameworks.apps.mlflow_app mlflow VARIANT ENDPOINT`:

- `default`: MLflow's own attributes (`mlflow.spanType`, `mlflow.spanInputs`,
  `mlflow.spanOutputs`, every value JSON);
- `genai-semconv`: `MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true`, MLflow's translation of its
  spans into the GenAI conventions.

The model is the scripted server on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`). Prints one
JSON line per question."""

from __future__ import annotations

import json
import os
import sys

from tests.frameworks.apps.framework_apps import KB, QUESTIONS, answer_from, report, search

# The session each question is asked in (`session.id` on the request span, which MLflow's
# span API writes JSON-encoded): the record's `conversation`.
SESSION = "session-{}"

SETTINGS = {
    "default": {},
    "genai-semconv": {"MLFLOW_ENABLE_OTEL_GENAI_SEMCONV": "true"},
}


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    os.environ.update(
        {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_SERVICE_NAME": f"{instrumentation}-{variant}",
            **SETTINGS[variant],
        }
    )
    import mlflow
    from mlflow.entities import Document, SpanType
    from openai import OpenAI

    from tests.frameworks.apps.openai_server import serve

    mlflow.openai.autolog()
    client = OpenAI(base_url=serve(), api_key="scripted")

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve(query: str) -> list[Document]:
        return [
            Document(page_content=KB[uri], metadata={"doc_uri": uri}, id=uri)
            for uri in search(query)
        ]

    trace_ids: list[str] = []

    @mlflow.trace(span_type=SpanType.CHAIN)
    def answer(question: str) -> str:
        span = mlflow.get_current_active_span()
        assert span is not None
        trace_ids.append(span.trace_id.removeprefix("tr-"))  # MLflow's id of the OTel trace
        span.set_attribute("session.id", SESSION.format(len(trace_ids) - 1))
        return answer_from(client, question, [d.page_content for d in retrieve(question)])

    for question, _ in QUESTIONS:
        response = answer(question)
        report(trace_ids[-1], question, response, [KB[uri] for uri in search(question)])
    print(json.dumps({"traces": len(trace_ids)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
