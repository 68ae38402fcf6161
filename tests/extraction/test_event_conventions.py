"""Content carried in span events is table data too: an SDK invented here (Beacon), which
writes its question, documents, prompt and answer only as span events, is read right once
a test's config declares where (`extraction.conventions`, sources with `event`), with no
code change; and the config names a wrong event source's key."""

from __future__ import annotations

import json
from typing import Any

from monitor.config import load_config
from monitor.extraction import conventions_from_config, extract_records
from monitor.records import EXTRACTION_SUSPECT, RagRecord
from monitor.spans import Span, SpanEvent

TRACE = "cd" * 16
QUESTION = "When was the Eiffel Tower completed?"
DOCS = [
    ("kb/eiffel.md", "The Eiffel Tower stands in Paris and was completed in 1889."),
    ("kb/water.md", "At sea level, pure water boils at 100 degrees Celsius."),
]
ANSWER = "It was completed in 1889."
SYSTEM = "Answer only from the documents."

BEACON_CONFIG = """
extraction:
  conventions:
    - name: beacon
      kind:
        attribute: beacon.kind
        values: {ask: request, lookup: retrieval, generate: model}
      event_bodies: [beacon.payload]
      input:
        - {event: beacon.question, attribute: text}
        - {event: beacon.instruction, attribute: text, role: system}
        - {event: beacon.message, attribute: text, role: user}
      output:
        - {event: beacon.answer, attribute: text}
      documents:
        - {event: beacon.hit, attribute: hit, encoding: json}
      model: [beacon.model]
"""


def _span(
    span_id: int,
    parent: int | None,
    name: str,
    attributes: dict[str, Any],
    events: list[SpanEvent],
) -> Span:
    return Span(
        TRACE,
        f"{span_id:016x}",
        "" if parent is None else f"{parent:016x}",
        name,
        1_000 + span_id,
        2_000 - span_id,
        attributes=attributes,
        events=events,
        service="beacon-app",
    )


def _event(name: str, at: int, attributes: dict[str, Any]) -> SpanEvent:
    return SpanEvent(name, 1_000 + at, attributes)


def _beacon_trace() -> list[Span]:
    """The question and answer as events of the request; one event a document, in
    retrieval order; the prompt as one event a message, the answer in a JSON payload."""
    hits = [
        _event("beacon.hit", 10 + i, {"hit": json.dumps({"uri": uri, "text": text})})
        for i, (uri, text) in enumerate(DOCS)
    ]
    return [
        _span(
            1,
            None,
            "ask",
            {"beacon.kind": "ask"},
            [
                _event("beacon.question", 1, {"text": QUESTION}),
                _event("beacon.answer", 30, {"beacon.payload": json.dumps({"text": ANSWER})}),
            ],
        ),
        _span(2, 1, "lookup", {"beacon.kind": "lookup"}, hits),
        _span(
            3,
            1,
            "generate",
            {"beacon.kind": "generate", "beacon.model": "beacon-small"},
            [
                _event("beacon.instruction", 20, {"text": SYSTEM}),
                _event("beacon.message", 21, {"beacon.payload": json.dumps({"text": QUESTION})}),
                _event("beacon.answer", 22, {"text": ANSWER}),
            ],
        ),
    ]


def _conventions(tmp_path: Any, text: str) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return conventions_from_config(load_config(str(path)).extraction.conventions)


def test_an_sdk_writing_only_span_events_is_read_once_the_config_declares_them(
    tmp_path: Any,
) -> None:
    assert extract_records(_beacon_trace()) == []  # unknown to the shipped table: not RAG
    (record,) = extract_records(_beacon_trace(), conventions=_conventions(tmp_path, BEACON_CONFIG))
    assert isinstance(record, RagRecord)
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert [(d.doc_uri, d.content) for d in record.retrieved_context] == DOCS
    assert record.model == "beacon-small"
    assert record.metadata["conventions"] == "beacon"
    assert EXTRACTION_SUSPECT not in record.metadata


def test_events_of_another_name_are_not_read(tmp_path: Any) -> None:
    """The sources name their events: a hit event renamed is no document declared, and its
    texts are not in the prompt (no document by structure); the prompt holds only the
    instruction and the question, so the record has no context (never the instruction)."""
    spans = _beacon_trace()
    lookup = spans[1]
    renamed = [SpanEvent("beacon.other", e.time_unix_nano, e.attributes) for e in lookup.events]
    spans[1] = _span(2, 1, "lookup", dict(lookup.attributes), renamed)
    (record,) = extract_records(spans, conventions=_conventions(tmp_path, BEACON_CONFIG))
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert record.retrieved_context == ()
    assert record.context_source == "none"


def test_every_log_event_the_receivers_take_is_read_by_the_entry_that_declares_it() -> None:
    """The receivers take the log records the conventions table declares (`log_events`,
    `log_lines`, and the verdict vocabularies' events) as events of their span; what each
    carries is said by the entry that declares it (a source naming the event, a detail
    event, or a vocabulary's attributes), and the events it says carry a call's output are
    among its answers."""
    from dataclasses import fields

    from monitor.conventions import LOG_EVENTS, LOG_LINE_EVENTS, OUTPUT_EVENTS, VOCABULARIES
    from monitor.extraction import SHIPPED_CONVENTIONS

    declared: set[str] = set()
    for convention in SHIPPED_CONVENTIONS:
        read = {
            source.event
            for part in fields(convention)
            if part.type == "tuple[Source, ...]"
            for source in getattr(convention, part.name)
            if source.event is not None
        } | convention.detail_events
        taken = convention.log_events | set(convention.log_lines.values())
        assert taken <= read, (convention.name, taken - read)
        answers = {source.event for source in convention.model_output} | convention.detail_events
        assert convention.output_events <= answers, convention.name
        assert convention.output_events <= taken, convention.name
        declared |= taken
    # The app's own verdicts: each event is read by the verdict vocabulary declaring it.
    for vocabulary in VOCABULARIES:
        assert vocabulary.evaluator and (vocabulary.label or vocabulary.score), vocabulary.name
        declared |= vocabulary.events
    assert declared == LOG_EVENTS
    assert set(LOG_LINE_EVENTS.values()) <= LOG_EVENTS and OUTPUT_EVENTS <= LOG_EVENTS
    assert {"gen_ai.choice", "spring_ai.chat_model.completion"} <= OUTPUT_EVENTS


def _logs_request(records: list[tuple[str, int, dict[str, str]]]) -> bytes:
    """An OTLP/JSON logs request: each record an event name, the span it belongs to and
    its attributes."""
    log_records = [
        {
            "eventName": name,
            "traceId": TRACE,
            "spanId": f"{span_id:016x}",
            "timeUnixNano": str(1_500 + i),
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
        }
        for i, (name, span_id, attrs) in enumerate(records)
    ]
    request = {"resourceLogs": [{"scopeLogs": [{"logRecords": log_records}]}]}
    return json.dumps(request).encode()


def test_the_log_records_a_users_convention_names_are_taken_and_read(tmp_path: Any) -> None:
    """Beacon's answer and documents sent as log records, not span events: taken only under
    a table holding the convention that names them, then read as that span's events."""
    from monitor.extraction import log_events_taken
    from monitor.spans import decode_logs_json

    conventions = _conventions(tmp_path, BEACON_CONFIG)
    spans = _beacon_trace()
    logged = [
        (e.name, int(s.span_id, 16), e.attributes)
        for s in spans
        for e in s.events
        if e.name in {"beacon.answer", "beacon.hit"}
    ]
    spans = [
        _span(
            int(s.span_id, 16),
            int(s.parent_span_id, 16) if s.parent_span_id else None,
            s.name,
            dict(s.attributes),
            [e for e in s.events if e.name not in {"beacon.answer", "beacon.hit"}],
        )
        for s in spans
    ]
    request = _logs_request(logged)
    shipped_only = decode_logs_json(request)
    assert (shipped_only.spans, shipped_only.rejected) == ([], len(logged))
    taken = log_events_taken(conventions)
    assert {"beacon.answer", "beacon.hit", "gen_ai.choice"} <= taken
    decoded = decode_logs_json(request, taken)
    assert decoded.rejected == 0 and len(decoded.spans) == len(logged) == 4
    (record,) = extract_records([*spans, *decoded.spans], conventions=conventions)
    assert isinstance(record, RagRecord)
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert [(d.doc_uri, d.content) for d in record.retrieved_context] == DOCS
