"""`rag-monitor send-sample`: two RAG traces to a running monitor over OTLP/HTTP, so that a
first verdict shows on `/metrics` without a RAG app: one faithful answer (a `pass` from
the local evaluators) and one that states facts its documents do not contain (a `fail`).

The traces are what an OpenInference-instrumented app sends (a request span, a retriever
span with its documents, a chat span), written with the OpenTelemetry SDK and sent by its
OTLP/HTTP exporter. The content is that of `examples/records.jsonl`'s first two records."""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SERVICE = "rag-monitor-sample"
SERVICE_VERSION = "1.0"  # the sample app's `service.version`: the `version` label
QUESTION = "How long is the warranty on the Model X kettle?"
DOCUMENTS = (
    (
        "kb://warranty/model-x",
        "The Model X kettle comes with a two-year limited warranty covering manufacturing defects.",
    ),
    ("kb://warranty/claims", "Warranty claims require the original receipt."),
)
FAITHFUL = "The Model X kettle has a two-year limited warranty that covers manufacturing defects."
HALLUCINATED = (
    "The Model X kettle is covered for ten years, including accidental damage, and Samsung "
    "replaces it free of charge in Berlin."
)


@dataclass(frozen=True)
class Sent:
    endpoint: str
    faithful_trace_id: str
    hallucinated_trace_id: str


def default_endpoint() -> str:
    """`OTEL_EXPORTER_OTLP_ENDPOINT` as the SDK reads it, else the monitor's default port."""
    return os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")


def _trace(provider: TracerProvider, answer: str) -> str:
    tracer = provider.get_tracer("rag-monitor.sample")
    with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}) as root:
        retriever: dict[str, str | float] = {
            "openinference.span.kind": "RETRIEVER",
            "input.value": QUESTION,
        }
        for i, (uri, text) in enumerate(DOCUMENTS):
            retriever[f"retrieval.documents.{i}.document.id"] = uri
            retriever[f"retrieval.documents.{i}.document.content"] = text
        with tracer.start_as_current_span("retrieve", attributes=retriever):
            pass
        system = "Answer from these documents only.\n" + "\n".join(t for _, t in DOCUMENTS)
        chat = {
            "openinference.span.kind": "LLM",
            "llm.model_name": "sample-model",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": system,
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": QUESTION,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer,
        }
        with tracer.start_as_current_span("chat sample-model", attributes=chat):
            pass
        return f"{root.get_span_context().trace_id:032x}"


def _reachable(url: str, timeout_s: float = 3.0) -> None:
    """Raises `ConnectionError` at once when nothing listens at `url`'s host and port (the
    exporter would otherwise retry with warnings until its timeout)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", port), timeout_s).close()
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else "no answer"
        raise ConnectionError(
            f"{url}: the monitor did not take the sample traces (is it running?): {reason}"
        ) from None


class _Held(logging.Filter):
    """The exporter's own log lines, held back: what went wrong is told in send-sample's
    one line instead."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.lines.append(record.getMessage())
        return False


def send_sample(endpoint: str, timeout_s: float = 10.0) -> Sent:
    """Send the two traces to `endpoint` (an OTLP/HTTP base URL, `/v1/traces` added when it
    has no path). Raises `ConnectionError` naming the endpoint if the export fails."""
    url = endpoint.rstrip("/")
    if not url.endswith("/v1/traces"):
        url += "/v1/traces"
    _reachable(url)
    spans = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": SERVICE, "service.version": SERVICE_VERSION})
    )
    provider.add_span_processor(SimpleSpanProcessor(spans))
    faithful = _trace(provider, FAITHFUL)
    hallucinated = _trace(provider, HALLUCINATED)
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout_s)
    held = _Held()
    exporter_log = logging.getLogger(OTLPSpanExporter.__module__)
    exporter_log.addFilter(held)
    try:
        result = exporter.export(spans.get_finished_spans())
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
        exporter_log.removeFilter(held)
    if result is not SpanExportResult.SUCCESS:
        # Something listens there (`_reachable`): what it answered, if the exporter said.
        said = f": {held.lines[-1]}" if held.lines else ""
        raise ConnectionError(
            f"{url}: the monitor did not take the sample traces (is this the monitor's "
            f"OTLP/HTTP endpoint?){said}"
        )
    return Sent(url, faithful, hallucinated)
