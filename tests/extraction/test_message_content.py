"""One content model for every message: a message's text is every text its parts hold, at
any depth, whatever they are called (`content`, `parts`, `blocks`, ...) or typed; parts that
are documents by kind (Anthropic's `document` and `search_result` blocks, a hosted file
search's results) are the record's documents (`context_source = message_documents`), and
the question is the message's plain text. The traces in `tests/testdata/traces/` were
captured from real apps under their real instrumentations (that folder's README says which);
the rest are shapes those and other SDKs write, built here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

from monitor.extraction import extract_records
from monitor.extraction._message_parts import message_documents
from monitor.extraction._prompt_templates import TEMPLATES
from monitor.extraction._span_values import PART_DEPTH, chat_messages, content_text
from monitor.records import CONTEXT_SOURCES, RagRecord
from monitor.spans import Span, SpanEvent, decode_json, decode_logs_protobuf
from tests.frameworks.apps.framework_apps import ANSWERS, KB, NO_ANSWER, QUESTIONS, search

TRACES = Path(__file__).parent.parent / "testdata" / "traces"
# The captured apps' scripted model plants a wrong fact in the answers of three documents.
PLANTED = {
    "kb/water.md": "Water boils at 70 degrees Celsius at sea level.",
    "kb/everest.md": "Mount Everest is the highest mountain, 5000 metres tall.",
    "kb/moon.md": "The Moon orbits the Earth every 3 days.",
}


def _answer(first_uri: str) -> str:
    return PLANTED.get(first_uri, ANSWERS.get(first_uri, NO_ANSWER))


def _traces(name: str) -> list[list[Span]]:
    """The fixture's spans, one list a trace, in the order the app asked its questions."""
    decoded = decode_json((TRACES / f"{name}.json").read_bytes())
    assert decoded.rejected == 0
    by_trace: dict[str, list[Span]] = {}
    for span in decoded.spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    return sorted(by_trace.values(), key=lambda spans: min(s.start_unix_nano for s in spans))


def _retrieved_by_llama_index(spans: list[Span]) -> list[str]:
    """What LlamaIndex's retriever handed back, as its `RetrievalEndEvent` says (read here
    from the raw event, apart from the extraction): the nodes' sources, in order."""
    for span in spans:
        for event in span.events:
            if event.name == "RetrievalEndEvent":
                nodes = json.loads(str(event.attributes["nodes"]))
                return [node["node"]["metadata"]["source"] for node in nodes]
    raise AssertionError("no retrieval event in the trace")


@pytest.fixture(autouse=True)
def _fresh_templates() -> Iterator[None]:
    TEMPLATES.clear()
    yield
    TEMPLATES.clear()


@pytest.mark.parametrize(
    ("fixture", "source"),
    [
        ("anthropic_search_result", "message_documents"),
        ("anthropic_document", "message_documents"),
        ("llama_query", "structure"),
        ("llama_chat", "structure"),
        # the documents in the system instructions, numbered: no ids to name them by
        ("agento11y_otel", "prompt"),
    ],
)
def test_captured_apps_give_one_right_record_per_question(fixture: str, source: str) -> None:
    traces = _traces(fixture)
    assert len(traces) == len(QUESTIONS)
    for spans, (question, answering) in zip(traces, QUESTIONS, strict=True):
        (record,) = extract_records(spans)
        llama = fixture.startswith("llama")
        uris = _retrieved_by_llama_index(spans) if llama else search(question, 2)
        assert uris[0] == answering
        assert record.query == question
        assert [d.content for d in record.retrieved_context] == [KB[u] for u in uris]
        named = [d.doc_uri for d in record.retrieved_context]
        assert named == (uris if source != "prompt" else [None, None])
        assert record.response == _answer(uris[0])
        assert record.context_source == source
        assert record.metadata.get("extraction_suspect") is None


def test_message_documents_is_a_context_source() -> None:
    assert "message_documents" in CONTEXT_SOURCES


# -- the text of a message ---------------------------------------------------------------------


def test_plain_text_parts_read_as_before() -> None:
    parts = [{"type": "text", "content": "one"}, {"type": "input_text", "text": "two"}, "three"]
    assert content_text(parts) == "one\ntwo\nthree"
    assert content_text(json.dumps(parts)) == "one\ntwo\nthree"


@pytest.mark.parametrize(
    ("content", "text"),
    [
        # LlamaIndex's blocks, Bedrock / Gemini parts without a type
        ([{"block_type": "text", "text": "a question"}], "a question"),
        ([{"text": "a question"}], "a question"),
        # a part of a kind no SDK named here, its text under `content` blocks
        ([{"type": "quote", "content": [{"type": "text", "text": "cited"}]}], "cited"),
        # OpenAI Assistants' `{"text": {"value": ...}}`
        ([{"type": "note", "text": {"value": "noted", "annotations": []}}], "noted"),
        # an OpenAI Responses input message holding input_text parts
        (
            [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}],
            "q",
        ),
        # blocks written as JSON text inside a part
        ([{"type": "group", "blocks": json.dumps([{"block_type": "text", "text": "b"}])}], "b"),
    ],
)
def test_text_is_every_text_the_parts_hold(content: list[Any], text: str) -> None:
    assert content_text(content) == text


@pytest.mark.parametrize(
    "part",
    [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "AAAA"},
        {"type": "tool_use", "id": "t1", "name": "search", "input": {"text": "args"}},
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "r"}]},
        {"type": "reasoning", "content": "let me think"},
        {"type": "thinking", "thinking": "let me think"},
        {"type": "search_result", "source": "kb/a", "content": [{"type": "text", "text": "d"}]},
        {"type": "document", "source": {"type": "text", "data": "d"}, "title": "a"},
    ],
)
def test_parts_that_are_no_words_of_the_message_are_left_out(part: dict[str, Any]) -> None:
    assert content_text([part, {"type": "text", "text": "the question"}]) == "the question"


def test_nested_parts_are_read_only_so_deep() -> None:
    def nested(depth: int) -> dict[str, Any]:
        part: dict[str, Any] = {"type": "text", "text": "deep"}
        for _ in range(depth):
            part = {"type": "wrapper", "content": [part]}
        return part

    assert content_text([nested(PART_DEPTH - 1)]) == "deep"
    assert content_text([nested(PART_DEPTH + 1)]) is None


def test_messages_with_blocks_are_read() -> None:
    messages = [
        {"role": "system", "blocks": [{"block_type": "text", "text": "Be brief."}]},
        {"role": "user", "content": None, "blocks": [{"block_type": "text", "text": "Hi?"}]},
    ]
    assert chat_messages(json.dumps(messages)) == [("system", "Be brief."), ("user", "Hi?")]


# -- documents by kind -------------------------------------------------------------------------


def test_document_parts_become_documents_named_by_source_or_title() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {
                    "type": "search_result",
                    "source": "https://kb/a",
                    "title": "A",
                    "content": [
                        {"type": "text", "text": "first"},
                        {"type": "text", "text": "more"},
                    ],
                },
                {
                    "type": "document",
                    "title": "B",
                    "source": {"type": "content", "content": [{"type": "text", "text": "second"}]},
                },
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
                },
                {"type": "document", "source": {"type": "url", "url": "https://kb/c.pdf"}},
                {"type": "text", "text": "the question"},
            ],
        }
    ]
    docs = message_documents(json.dumps(messages))
    assert [(d.content, d.doc_uri) for d in docs] == [
        ("first\nmore", "https://kb/a"),
        ("second", "B"),
    ]
    assert docs[0].metadata == {"title": "A"}


def test_hosted_file_search_results_are_documents() -> None:
    output = [
        {
            "type": "file_search_call",
            "id": "fs_1",
            "queries": ["boiling point"],
            "results": [
                {
                    "file_id": "file-1",
                    "filename": "water.md",
                    "score": 0.9,
                    "text": "Water boils at 100 C.",
                },
                {
                    "file_id": "file-2",
                    "filename": "moon.md",
                    "score": 0.4,
                    "text": "The Moon orbits.",
                },
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "100 C."}],
        },
    ]
    docs = message_documents(output)
    assert [(d.content, d.doc_uri, d.score) for d in docs] == [
        ("Water boils at 100 C.", "water.md", 0.9),
        ("The Moon orbits.", "moon.md", 0.4),
    ]
    assert content_text(output) == "100 C."


def test_a_tool_results_documents_stay_the_tools() -> None:
    block = {"type": "search_result", "source": "kb/a", "content": [{"type": "text", "text": "x"}]}
    messages = [{"role": "user", "content": [{"type": "tool_result", "content": [block]}]}]
    assert message_documents(messages) == []


def test_a_prompt_without_document_parts_is_not_walked() -> None:
    assert message_documents('[{"role": "user", "content": "no documents here"}]') == []


def _genai_events_call(documents: list[dict[str, Any]]) -> list[Span]:
    """Older GenAI message events on a chat span: the user's message content a list of
    parts, documents among them (as a span event, or a log record joined to its span)."""
    content = [*documents, {"type": "text", "text": "When was the Eiffel Tower completed?"}]
    events = [
        SpanEvent("gen_ai.user.message", 1_100, {"content": json.dumps(content)}),
        SpanEvent("gen_ai.choice", 1_900, {"message": json.dumps({"content": "In 1889."})}),
    ]
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude"}
    return [
        Span(
            "ab" * 16,
            "1" * 16,
            "",
            "chat claude",
            1_000,
            2_000,
            attributes=attributes,
            events=events,
        )
    ]


def test_document_parts_in_span_events_are_documents() -> None:
    blocks = [
        {"type": "document", "title": u, "source": {"type": "text", "data": KB[u]}}
        for u in ("kb/eiffel.md", "kb/water.md")
    ]
    (record,) = extract_records(_genai_events_call(blocks))
    _assert_eiffel(record)


def _assert_eiffel(record: RagRecord) -> None:
    assert record.query == "When was the Eiffel Tower completed?"
    assert [(d.doc_uri, d.content) for d in record.retrieved_context] == [
        ("kb/eiffel.md", KB["kb/eiffel.md"]),
        ("kb/water.md", KB["kb/water.md"]),
    ]
    assert record.response == "In 1889."
    assert record.context_source == "message_documents"


def test_document_parts_in_log_records_are_documents() -> None:
    """The same message as OTLP log records (GenAI events sent with
    `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only`), joined to their span."""
    (call,) = _genai_events_call([])
    blocks = [
        {"type": "search_result", "source": u, "content": [{"type": "text", "text": KB[u]}]}
        for u in ("kb/eiffel.md", "kb/water.md")
    ]
    content = [*blocks, {"type": "text", "text": "When was the Eiffel Tower completed?"}]
    bodies = [
        ("gen_ai.user.message", {"content": json.dumps(content)}),
        ("gen_ai.choice", {"message": json.dumps({"content": "In 1889."})}),
    ]
    records = [
        LogRecord(
            time_unix_nano=1_100 + n,
            event_name=name,
            trace_id=bytes.fromhex(call.trace_id),
            span_id=bytes.fromhex(call.span_id),
            body=AnyValue(
                kvlist_value=KeyValueList(
                    values=[
                        KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in body.items()
                    ]
                )
            ),
        )
        for n, (name, body) in enumerate(bodies)
    ]
    request = ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=records)])]
    )
    decoded = decode_logs_protobuf(request.SerializeToString())
    assert len(decoded.spans) == 2
    bare = Span(
        call.trace_id, call.span_id, "", call.name, 1_000, 2_000, attributes=call.attributes
    )
    (record,) = extract_records([bare, *decoded.spans])
    _assert_eiffel(record)


def test_hosted_file_search_results_in_a_responses_output_are_the_documents() -> None:
    """The Responses API with its hosted `file_search` tool, the results included
    (`include=["file_search_call.results"]`), on an OpenInference LLM span whose
    `output.value` is the whole response."""
    results = [
        {"file_id": "file-1", "filename": "eiffel.md", "score": 0.9, "text": KB["kb/eiffel.md"]},
        {"file_id": "file-2", "filename": "water.md", "score": 0.3, "text": KB["kb/water.md"]},
    ]
    response = {
        "id": "resp_1",
        "object": "response",
        "output": [
            {"type": "file_search_call", "id": "fs_1", "status": "completed", "results": results},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "In 1889.", "annotations": []}],
            },
        ],
    }
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o-mini",
        "input.value": json.dumps({"input": "When was the Eiffel Tower completed?"}),
        "output.value": json.dumps(response),
        "output.mime_type": "application/json",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "When was the Eiffel Tower completed?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "In 1889.",
    }
    span = Span("ab" * 16, "1" * 16, "", "Response", 1_000, 2_000, attributes=attributes)
    (record,) = extract_records([span])
    assert record.query == "When was the Eiffel Tower completed?"
    assert [(d.doc_uri, d.content, d.score) for d in record.retrieved_context] == [
        ("eiffel.md", KB["kb/eiffel.md"], 0.9),
        ("water.md", KB["kb/water.md"], 0.3),
    ]
    assert record.response == "In 1889."
    assert record.context_source == "message_documents"


# Message-shaped values: parts whose kinds are the ones the content model tells apart, and
# any other JSON, nested at will.
_KINDS = st.sampled_from(
    ["text", "document", "search_result", "file_search_call", "tool_result", "image", "x"]
)
_KEYS = st.sampled_from(["type", "block_type", "text", "content", "parts", "blocks", "source"])
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | _KINDS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(value=_VALUE | _VALUE.map(json.dumps))
@example(value={"type": ["document"]})  # a kind that is no string
@example(value=[{"type": "file_search_call", "results": "x"}])
def test_any_message_content_reads_into_text_and_documents_or_nothing(value: Any) -> None:
    """Whatever a message holds (JSON or not, any nesting, parts of any kind): its text is
    a string or nothing, its document parts documents with text; never an exception."""
    text = content_text(value)
    assert text is None or isinstance(text, str)
    for doc in message_documents(value):
        assert isinstance(doc.content, str) and doc.content.strip()
