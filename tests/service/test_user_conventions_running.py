"""A convention declared only in the config of a running `rag-monitor run`: an SDK
invented for the test (its own kind attribute, JSON values) exported with the real
OpenTelemetry SDK is read whole, and `/debug/records` names the convention it matched; and
one whose documents and answer travel only as OTLP log records, which the receivers take
because the convention names their events."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from harness.servers import rag_monitor
from harness.wait import wait_until
from tests.trace.test_user_conventions import ACME_CONFIG, ANSWER, DOCS, QUESTION


def _send(endpoint: str) -> str:
    """The invented SDK's trace: a request, a retrieval and a model call; its trace id."""
    provider = TracerProvider(resource=Resource.create({"service.name": "acme-app"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    tracer = provider.get_tracer("acme")
    documents = [{"uri": uri, "text": text} for uri, text in DOCS]
    ask = {
        "acme.kind": "ask",
        "acme.in": json.dumps({"question": QUESTION}),
        "acme.out": json.dumps(ANSWER),
        "acme.thread": "thread-7",
    }
    with tracer.start_as_current_span("ask", attributes=ask) as root:
        fetch = {"acme.kind": "fetch", "acme.out": json.dumps({"hits": documents})}
        with tracer.start_as_current_span("fetch", attributes=fetch):
            pass
        think = {
            "acme.kind": "think",
            "acme.in": json.dumps([{"role": "user", "content": QUESTION}]),
            "acme.out": json.dumps({"role": "assistant", "content": ANSWER}),
        }
        with tracer.start_as_current_span("think", attributes=think):
            pass
    provider.shutdown()
    return f"{root.get_span_context().trace_id:032x}"


def test_a_convention_declared_in_the_config_is_read_and_named(tmp_path: Path) -> None:
    entry = _extracted(tmp_path, ACME_CONFIG, lambda http: _send(f"{http}/v1/traces"))
    assert entry["conventions"] == "acme-tracer"
    assert (entry["query"], entry["response"], entry["conversation"]) == (
        QUESTION,
        ANSWER,
        "thread-7",
    )
    assert [(d["doc_uri"], d["content"]) for d in entry["context"]] == DOCS
    assert entry["missing"] == [] and entry["suspect"] is None


QUILL_CONFIG = """
extraction:
  conventions:
    - name: quill
      kind: {attribute: quill.kind, values: {ask: request, find: retrieval}}
      input: [quill.question]
      output: [{event: quill.answer, attribute: text}]
      documents: [{event: quill.hit, attribute: hit, encoding: json}]
"""


def _send_logged(endpoint: str) -> str:
    """An invented SDK whose spans hold only the question: each document and the answer are
    log records in their span's scope (no span events); its trace id."""
    resource = Resource.create({"service.name": "quill-app"})
    tracing = TracerProvider(resource=resource)
    tracing.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{endpoint}/v1/traces")))
    logging = LoggerProvider(resource=resource)
    logging.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs"))
    )
    tracer, logger = tracing.get_tracer("quill"), logging.get_logger("quill")
    ask = {"quill.kind": "ask", "quill.question": QUESTION}
    with tracer.start_as_current_span("ask", attributes=ask) as root:
        with tracer.start_as_current_span("find", attributes={"quill.kind": "find"}):
            for uri, text in DOCS:
                hit = json.dumps({"uri": uri, "text": text})
                logger.emit(event_name="quill.hit", attributes={"hit": hit})
        logger.emit(event_name="quill.answer", attributes={"text": ANSWER})
    tracing.shutdown()
    logging.shutdown()
    return f"{root.get_span_context().trace_id:032x}"


def test_a_conventions_log_records_are_taken_as_events_of_their_span(tmp_path: Path) -> None:
    entry = _extracted(tmp_path, QUILL_CONFIG, _send_logged)
    assert entry["conventions"] == "quill"
    assert (entry["query"], entry["response"]) == (QUESTION, ANSWER)
    assert [(d["doc_uri"], d["content"]) for d in entry["context"]] == DOCS


def _extracted(tmp_path: Path, conventions: str, send: Callable[[str], str]) -> dict[str, Any]:
    """Runs `rag-monitor` with `conventions`, has `send` (given the OTLP/HTTP base URL)
    send one trace, and returns the trace's record as `/debug/records` shows it."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "receivers:\n  otlp:\n"
        "    grpc: {endpoint: '127.0.0.1:0'}\n"
        "    http: {endpoint: '127.0.0.1:0'}\n"
        # Released as the root ends: each span and log record is exported before the root.
        "trace_assembly: {late_spans_wait_s: 0}\n"
        "exporters:\n  prometheus: {endpoint: '127.0.0.1:0', debug_records: 10}\n" + conventions
    )
    with rag_monitor(tmp_path, config) as ports:
        trace_id = send(f"http://127.0.0.1:{ports.http}")

        def extracted() -> dict[str, Any] | None:
            url = f"http://127.0.0.1:{ports.metrics}/debug/records"
            with urllib.request.urlopen(url, timeout=5) as response:
                page = json.loads(response.read())
            return next((e for e in page["extracted"] if e["trace_id"] == trace_id), None)

        entry = wait_until(extracted, 30, "the trace's record in /debug/records")
    assert entry is not None
    return entry
