"""A RAG app traced by Langfuse's Python SDK (OpenTelemetry-based): `@observe` on the
request, `@observe(as_type="retriever")` on the retriever, and the `langfuse.openai`
drop-in client for the model calls, each question in a session
(`propagate_attributes(session_id=...)`). Langfuse's span processor exports to Langfuse's
own endpoint unless given an exporter: here the SDK's OTLP/HTTP exporter to the monitor
(`span_exporter`). Run as `python -m tests.frameworks.apps.langfuse_app langfuse VARIANT ENDPOINT`
(`VARIANT`: `observe`).

The model is the scripted server on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`). Prints one
JSON line per question."""

from __future__ import annotations

import json
import os
import sys

from tests.frameworks.apps.framework_apps import KB, QUESTIONS, answer_from, report, search

# The session each question is asked in: the record's `conversation`.
SESSION = "session-{}"


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    os.environ["OTEL_SERVICE_NAME"] = f"{instrumentation}-{variant}"
    from langfuse import Langfuse, observe, propagate_attributes
    from langfuse.openai import OpenAI
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from tests.frameworks.apps.openai_server import serve

    langfuse = Langfuse(
        public_key="pk-lf-monitor",
        secret_key="sk-lf-monitor",
        span_exporter=OTLPSpanExporter(endpoint=endpoint),
    )
    client = OpenAI(base_url=serve(), api_key="scripted")

    @observe(as_type="retriever")
    def retrieve(query: str) -> list[dict[str, str]]:
        return [{"id": uri, "content": KB[uri]} for uri in search(query)]

    trace_ids: list[str] = []

    @observe()
    def answer(question: str) -> str:
        trace_ids.append(str(langfuse.get_current_trace_id()))
        return answer_from(client, question, [d["content"] for d in retrieve(question)])

    for number, (question, _) in enumerate(QUESTIONS):
        with propagate_attributes(session_id=SESSION.format(number)):
            response = answer(question)
        report(trace_ids[-1], question, response, [KB[uri] for uri in search(question)])
    langfuse.shutdown()
    print(json.dumps({"traces": len(trace_ids)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
