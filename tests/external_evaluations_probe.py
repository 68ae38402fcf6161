"""A real library writing `gen_ai.evaluation.result` into an app's traces, against a running
monitor: pydantic-evals' online evaluation (`pydantic_evals.online.evaluate`) judges each
answer in the background and emits one OTLP log record per verdict, parented to the call
it judged; the monitor reads them as `external:<evaluator>` verdicts
(docs/external-evaluations.md). Not part of the suite: pydantic-evals is no dependency of
the monitor's. Run it from an environment of its own, beside a monitor:

    uv venv /tmp/evals && uv pip install --python /tmp/evals/bin/python \
        pydantic-evals opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
    rag-monitor run &        # OTLP/HTTP on 127.0.0.1:4318, metrics on :9464
    /tmp/evals/bin/python tests/external_evaluations_probe.py \
        --otlp http://127.0.0.1:4318 --metrics http://127.0.0.1:9464/metrics

It prints the `external:` series of `rag_monitor_evaluations_total` once the monitor has
counted the verdicts, and exits 1 if none came within `--wait` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import urllib.request
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic_evals.evaluators import Evaluator, EvaluatorContext
from pydantic_evals.online import evaluate, wait_for_evaluations

QUESTIONS = [
    ("埃菲尔铁塔是哪一年建成的？", "埃菲尔铁塔于1889年建成。", "它于1889年建成。"),
    ("Когда построили Эйфелеву башню?", "Башня построена в 1889 году.", "В 1930 году."),
]


@dataclass
class AnswerInContext(Evaluator[str, str]):
    """A toy judge: the answer's year is in the retrieved context."""

    context: str = ""
    evaluator_version: str | None = "probe-1"

    def evaluate(self, ctx: EvaluatorContext[str, str]) -> bool:
        year = "".join(ch for ch in ctx.output if ch.isdigit())
        return bool(year) and year in self.context


def _set_up(otlp: str, service: str) -> tuple[TracerProvider, LoggerProvider]:
    resource = Resource.create({"service.name": service})
    tracing = TracerProvider(resource=resource)
    tracing.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{otlp}/v1/traces")))
    trace.set_tracer_provider(tracing)
    logging = LoggerProvider(resource=resource)
    logging.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(f"{otlp}/v1/logs")))
    set_logger_provider(logging)
    return tracing, logging


async def _ask(question: str, context: str, answer: str) -> None:
    tracer = trace.get_tracer("probe-app")
    attributes = {
        "http.route": "/ask",
        "rag.query": question,
        "rag.context": f'["{context}"]',
        "rag.response": answer,
    }
    with tracer.start_as_current_span("POST /ask", attributes=attributes):

        @evaluate(AnswerInContext(context=context), target="answer")
        async def respond(q: str) -> str:
            return answer

        await respond(question)
        # The verdicts reach the monitor before the root span that releases the trace.
        await wait_for_evaluations(timeout=10)


def _external_series(metrics: str) -> list[str]:
    with urllib.request.urlopen(metrics, timeout=5) as response:
        text = response.read().decode()
    return [
        line
        for line in text.splitlines()
        if line.startswith("rag_monitor_evaluations_total{") and 'evaluator="external:' in line
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--otlp", default="http://127.0.0.1:4318")
    parser.add_argument("--metrics", default="http://127.0.0.1:9464/metrics")
    parser.add_argument("--service", default="probe-app")
    parser.add_argument("--wait", type=float, default=30.0)
    args = parser.parse_args()
    tracing, logging = _set_up(args.otlp.rstrip("/"), args.service)
    for question, context, answer in QUESTIONS:
        asyncio.run(_ask(question, context, answer))
    logging.shutdown()
    tracing.shutdown()
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        series = _external_series(args.metrics)
        if series:
            print("\n".join(series))
            return 0
        time.sleep(0.5)
    print("no external: verdicts counted", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
