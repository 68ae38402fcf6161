"""A stand-in RAG service for the local stack: sends one OpenInference-shaped trace
(chain → retriever + LLM) per second to rag-monitor over OTLP/gRPC. About one answer in
five is not supported by its context, so the hallucination panels have something to show.
"""

from __future__ import annotations

import os
import random
import time

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

FACTS = [
    (
        "When was the Eiffel Tower completed?",
        "The Eiffel Tower was completed in 1889 for the World's Fair.",
    ),
    (
        "How tall is Mount Everest?",
        "Mount Everest is 8,849 metres tall according to the 2020 survey.",
    ),
    ("What is the boiling point of water?", "Water boils at 100 degrees Celsius at sea level."),
]
MADE_UP = "It was built by the Romans in 45 BC and painted bright green every winter."


def main() -> None:
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://rag-monitor:4317")
    provider = TracerProvider(resource=Resource.create({"service.name": "demo-rag"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True))
    )
    tracer = provider.get_tracer("demo-rag")
    while True:
        question, fact = random.choice(FACTS)
        answer = MADE_UP if random.random() < 0.2 else fact
        with tracer.start_as_current_span("rag.request") as root:
            root.set_attribute("openinference.span.kind", "CHAIN")
            root.set_attribute("http.route", "/ask")
            root.set_attribute("input.value", question)
            with tracer.start_as_current_span("retrieve") as retriever:
                retriever.set_attribute("openinference.span.kind", "RETRIEVER")
                retriever.set_attribute("input.value", question)
                retriever.set_attribute("retrieval.documents.0.document.content", fact)
                retriever.set_attribute("retrieval.documents.0.document.id", "kb-1")
            with tracer.start_as_current_span("generate") as llm:
                llm.set_attribute("openinference.span.kind", "LLM")
                llm.set_attribute("input.value", question)
                llm.set_attribute("output.value", answer)
            root.set_attribute("output.value", answer)
        time.sleep(1)


if __name__ == "__main__":
    main()
