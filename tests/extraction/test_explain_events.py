"""`rag-monitor explain` on traces whose content is in span events only, and on records
that are whole but doubtful.

The fixtures in `testdata/` are real traces of LlamaIndex's own OpenTelemetry package
(`llama-index-observability-otel` 0.7.0, `llama-index-core` 0.14.25, OTel SDK 1.45.2; not
OpenInference), exported by the real OTLP/HTTP exporter and written as the Collector's file
exporter writes them: a `RetrieverQueryEngine` and a `CondensePlusContextChatEngine`, each
over a two-document retriever and a scripted chat model, asked one question. Every span
carries its content only as events (`QueryStartEvent`, `RetrievalEndEvent` with the
nodes as JSON, `LLMChatStartEvent` whose messages hold `blocks`), and none declares a
kind: no shipped convention reads them. The proposal explain prints is loaded into a
config file as a user would paste it and the trace extracted again."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf.json_format import MessageToDict
from opentelemetry.context import get_current
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from harness.otlp import collector_json, finished_spans
from monitor.cli.explain import explain
from monitor.config import load_config
from monitor.extraction import conventions_from_config, extract_records
from monitor.spans import decode_json

TESTDATA = Path(__file__).parent / "testdata"
QUESTION = "When was the Fjord Library founded?"
DOCS = (
    ("kb/fjord.md", "The Fjord Library was founded in 1911 by the harbour guild."),
    ("kb/hours.md", "The Fjord Library opens at nine every weekday."),
)
ANSWER = "The Fjord Library was founded in 1911."


def _explained(path: Path, config: Path | None = None) -> str:
    out, err = io.StringIO(), io.StringIO()
    user = load_config(config).extraction.conventions if config else ()
    assert explain(path, None, user, out, err) == 0, err.getvalue()
    return out.getvalue()


def _proposal(stdout: str) -> list[dict[str, Any]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("proposed entry"))
    end = next(i for i, line in enumerate(lines) if line.startswith("with it, records:"))
    entries = yaml.safe_load("\n".join(lines[start + 1 : end]))
    assert isinstance(entries, list)
    return entries


@pytest.mark.parametrize(
    "fixture", ["llamaindex_otel_query_engine.json", "llamaindex_otel_chat_engine.json"]
)
def test_explain_proposes_event_entries_that_read_llamaindex_otel(
    fixture: str, tmp_path: Path
) -> None:
    trace_file = TESTDATA / fixture
    spans = decode_json(trace_file.read_bytes().splitlines()[0]).spans
    every = [s for line in trace_file.read_bytes().splitlines() for s in decode_json(line).spans]
    # No shipped entry names these spans: the content model finds the call by its
    # messages, and the documents, if at all, by structure (texts that appear in the prompt).
    before = extract_records(every)
    assert spans and all(r.metadata["context_source"] == "structure" for r in before)

    out = _explained(trace_file)
    assert f"records: {len(before)}" in out
    assert "    events: RetrievalStartEvent, RetrievalEndEvent" in out  # where the text is
    entries = _proposal(out)
    roles = {entry["name"].rsplit("-", 1)[-1] for entry in entries}
    assert roles == {"request", "retrieval", "model"}
    sources = [
        s for e in entries for part in ("input", "output", "documents") for s in e.get(part, [])
    ]
    assert sources and all("event" in s for s in sources)  # the content is in events only

    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump({"extraction": {"conventions": entries}}))
    conventions = conventions_from_config(load_config(config_file).extraction.conventions)
    (record,) = extract_records(every, conventions=conventions)
    assert record.query == QUESTION
    assert record.response == ANSWER
    context = record.retrieved_context or ()
    assert [(d.doc_uri, d.content) for d in context] == list(DOCS)
    assert record.metadata["context_source"] == "retrieval_span"
    assert not record.missing()

    again = _explained(trace_file, config_file)
    assert "records: 1" in again and "proposed entry" not in again
    assert f"record {record.request_id}: whole, its context from retrieval_span" in again


def _chat(tracer: Tracer, system: str) -> None:
    """A GenAI chat span: `system`, the question, and the answer."""
    messages = [
        {"role": "system", "parts": [{"type": "text", "content": system}]},
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
    ]
    with tracer.start_as_current_span(
        "chat gpt-4o-mini",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
            ),
        },
    ):
        pass


# A record with every part, its documents split out of the prompt (no span carries them):
# explain no longer stops at "whole", it says where the context came from and that it is
# doubtful, and that nothing unread would read it better.
def _prompt_split(tracer: Tracer) -> None:
    documents = "\n\n".join(f"[{n}] {text}" for n, (_, text) in enumerate(DOCS, 1))
    system = f"Answer only from the numbered documents.\n\n{documents}"
    with tracer.start_as_current_span("POST /ask"):
        _chat(tracer, system)


def test_explain_diagnoses_a_whole_record_whose_documents_came_from_the_prompt(
    tmp_path: Path,
) -> None:
    trace_file = tmp_path / "trace.json"
    trace_file.write_text(collector_json(finished_spans("shop-rag", _prompt_split)) + "\n")
    (record,) = extract_records(decode_json(trace_file.read_bytes()).spans)
    assert not record.missing() and record.metadata["context_source"] == "prompt"

    out = _explained(trace_file)
    said = f"record {record.request_id}: doubtful: its documents were split out of"
    assert said in out
    assert "no entry proposed: no span the conventions leave unread carries documents" in out


# An SDK that writes its content only as OTLP log records of its spans (event names of its
# own, no convention names them), its spans carrying a kind attribute and nothing else: the
# file holds the traces request and then the logs request, as the Collector writes both.
def _beacon_logs(tmp_path: Path) -> Path:
    resource = Resource.create({"service.name": "beacon-rag"})
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracer, logger = tracer_provider.get_tracer("beacon"), logger_provider.get_logger("beacon")

    def log(name: str, **attributes: str) -> None:
        logger.emit(event_name=name, attributes=attributes, context=get_current())

    hits = [{"id": uri, "text": text} for uri, text in DOCS]
    prompt = [
        {"role": "system", "content": "Answer from the documents.\n\n" + DOCS[0][1]},
        {"role": "user", "content": QUESTION},
    ]
    with tracer.start_as_current_span("ask", attributes={"beacon.kind": "ask"}):
        log("beacon.question", text=QUESTION)
        with tracer.start_as_current_span("lookup", attributes={"beacon.kind": "lookup"}):
            log("beacon.lookup.query", text=QUESTION)
            log("beacon.hits", hits=json.dumps(hits))
        with tracer.start_as_current_span("generate", attributes={"beacon.kind": "generate"}):
            log("beacon.prompt", messages=json.dumps(prompt))
            log("beacon.completion", output=ANSWER)
        log("beacon.reply", output=ANSWER)
    tracer_provider.shutdown()
    logger_provider.shutdown()
    logs_json = MessageToDict(encode_logs(list(logs.get_finished_logs())))
    for resource_logs in logs_json["resourceLogs"]:
        for scope in resource_logs["scopeLogs"]:
            for record in scope["logRecords"]:
                for key in ("traceId", "spanId"):
                    record[key] = base64.b64decode(record[key]).hex()
    trace_file = tmp_path / "beacon.json"
    lines = [collector_json(list(spans.get_finished_spans())), json.dumps(logs_json)]
    trace_file.write_text("\n".join(lines) + "\n")
    return trace_file


def test_explain_reads_log_records_and_proposes_entries_that_read_them(tmp_path: Path) -> None:
    trace_file = _beacon_logs(tmp_path)
    out = _explained(trace_file)
    assert "records: 0" in out
    entries = _proposal(out)
    assert [e["kind"]["attribute"] for e in entries] == ["beacon.kind"] * 3
    sources = [
        s for e in entries for part in ("input", "output", "documents") for s in e.get(part, [])
    ]
    assert {s["event"] for s in sources} >= {"beacon.question", "beacon.hits", "beacon.prompt"}

    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump({"extraction": {"conventions": entries}}))
    again = _explained(trace_file, config_file)
    assert "records: 1" in again and "proposed entry" not in again
    assert "whole, its context from retrieval_span" in again
    assert f"query: {QUESTION}" in again and f"response: {ANSWER}" in again
    for uri, text in DOCS:
        assert f"[{uri}] {text}" in again


# A whole record whose only "document" is a system prompt of plain words: the extraction's
# sign of a wrong split is what explain names, worded, beside the split itself.
def _system_prompt_only(tracer: Tracer) -> None:
    system = "Fjord Library staff wrote this assistant for visitors of the harbour town."
    _chat(tracer, system)


def test_explain_names_each_sign_of_a_wrong_prompt_split(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.json"
    trace_file.write_text(collector_json(finished_spans("fjord", _system_prompt_only)) + "\n")
    (record,) = extract_records(decode_json(trace_file.read_bytes()).spans)
    doubts = str(record.metadata.get("context_doubt") or "").split(",")
    assert "document_is_system_prompt" in doubts

    out = _explained(trace_file)
    said = f"record {record.request_id}: doubtful: a document is the whole system prompt"
    assert f"{said} (document_is_system_prompt)" in out
