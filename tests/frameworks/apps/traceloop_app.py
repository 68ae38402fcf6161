"""A RAG app traced by the Traceloop SDK (OpenLLMetry): `@workflow` on the request, its
retriever decorated `@task` (not `@tool`: a task's output is no retrieval to any
convention), the OpenAI calls by the SDK's own OpenAI instrumentation, and no
`extraction.conventions` entry. Run as
`python -m tests.frameworks.apps.traceloop_app traceloop task ENDPOINT`.

`Traceloop.init` is given the SDK's OTLP/HTTP exporter to the monitor, with its own
telemetry off. The model is the scripted server on 127.0.0.1
(`tests/frameworks/apps/openai_server.py`), planting three wrong facts. Prints one JSON
line per question."""

from __future__ import annotations

import json
import os
import sys

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    numbered_prompt,
    report,
    search,
    three_planted_answer,
)


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    os.environ["TRACELOOP_TELEMETRY"] = "false"
    from openai import OpenAI
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import task, workflow

    from tests.frameworks.apps.openai_server import serve

    Traceloop.init(
        app_name=f"{instrumentation}-{variant}",
        exporter=OTLPSpanExporter(endpoint=endpoint),
        disable_batch=True,
        telemetry_enabled=False,
    )
    client = OpenAI(base_url=serve(three_planted_answer), api_key="scripted")
    trace_ids: list[str] = []

    @task(name="retrieve")
    def retrieve(question: str) -> list[str]:
        return [KB[uri] for uri in search(question)]

    @workflow(name="answer")
    def answer(question: str) -> str:
        trace_ids.append(f"{trace.get_current_span().get_span_context().trace_id:032x}")
        documents = retrieve(question)
        completion = client.chat.completions.create(
            model="scripted",
            messages=[
                {"role": "system", "content": numbered_prompt(documents)},
                {"role": "user", "content": question},
            ],
        )
        return completion.choices[0].message.content or ""

    for question, _ in QUESTIONS:
        response = answer(question)
        report(trace_ids[-1], question, response, [KB[uri] for uri in search(question)])
    print(json.dumps({"traces": len(trace_ids)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
