"""Every input shape normalises to the same RagRecord; bad input names its field."""

from __future__ import annotations

import pytest

from monitor.records import RecordError, parse_record

CONTEXT = "The kettle has a two-year warranty."


def test_native_string_request() -> None:
    record = parse_record(
        {
            "request_id": "r1",
            "trace_id": "4BF92F3577B34DA6A3CE929D0E0E4736",
            "request": "How long is the warranty?",
            "retrieved_context": [{"content": CONTEXT, "doc_uri": "kb://1", "score": 0.8}],
            "response": "Two years.",
            "expected_response": "Two years",
        }
    )
    assert record.query == "How long is the warranty?"
    assert record.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert record.retrieved_context[0].doc_uri == "kb://1"
    assert record.retrieved_context[0].score == 0.8
    assert record.expected_response == "Two years"
    assert record.missing() == frozenset()


def test_native_messages_multi_turn_keeps_history() -> None:
    record = parse_record(
        {
            "request": {
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello"},
                    {"role": "user", "content": [{"type": "text", "text": "Warranty length?"}]},
                ]
            },
            "retrieved_context": [{"content": CONTEXT}],
            "response": "Two years.",
        }
    )
    assert record.query == "Warranty length?"
    assert [m.role for m in record.history] == ["system", "user", "assistant"]


def test_native_query_and_history() -> None:
    record = parse_record(
        {
            "request": {
                "query": "And the price?",
                "history": [{"role": "user", "content": "Kettle?"}],
            },
            "retrieved_context": [],
            "response": "Forty euros.",
        }
    )
    assert record.query == "And the price?"
    assert record.history[0].content == "Kettle?"
    assert record.missing() == frozenset({"context"})


def test_qa_shape() -> None:
    record = parse_record(
        {"question": "Q?", "context": [CONTEXT, "Second doc."], "answer": "A.", "ground_truth": "A"}
    )
    assert (record.query, record.response, record.expected_response) == ("Q?", "A.", "A")
    assert [d.content for d in record.retrieved_context] == [CONTEXT, "Second doc."]


def test_qa_shape_context_as_string() -> None:
    record = parse_record({"question": "Q?", "context": CONTEXT, "answer": "A."})
    assert record.context_text == [CONTEXT]


def test_conversation_shape_with_citations() -> None:
    record = parse_record(
        {
            "messages": [
                {"role": "user", "content": "First question"},
                {"role": "assistant", "content": "First answer"},
                {"role": "user", "content": "Warranty?"},
                {
                    "role": "assistant",
                    "content": "Two years.",
                    "context": {"citations": [{"id": "doc-9", "title": "W", "content": CONTEXT}]},
                },
            ]
        }
    )
    assert record.query == "Warranty?"
    assert record.response == "Two years."
    assert record.retrieved_context[0].doc_uri == "doc-9"
    assert len(record.history) == 2


def test_java_request_shape() -> None:
    record = parse_record(
        {"userText": "Q?", "dataList": [CONTEXT], "responseContent": "Two years."}
    )
    assert (record.query, record.response) == ("Q?", "Two years.")
    assert record.context_text == [CONTEXT]


def test_same_input_same_derived_id() -> None:
    data = {"question": "Q?", "context": CONTEXT, "answer": "A."}
    assert parse_record(data).request_id == parse_record(dict(data)).request_id


@pytest.mark.parametrize(
    ("data", "reason", "mentions"),
    [
        ([1, 2], "not_object", "JSON object"),
        ({"request": "q", "retrieved_context": []}, "no_response", "response"),
        ({"request": "q", "response": 5}, "invalid_field", "response"),
        ({"request": 7, "response": "a"}, "invalid_field", "request"),
        (
            {"request": "q", "response": "a", "retrieved_context": [{"uri": "x"}]},
            "invalid_field",
            "retrieved_context.0.content",
        ),
        ({"request": "q", "response": "a", "trace_id": "zz"}, "invalid_field", "trace_id"),
        ({"hello": "world"}, "unknown_shape", "hello"),
        (
            {"request": {"messages": [{"role": "robot", "content": "x"}]}, "response": "a"},
            "invalid_field",
            "request.messages.0.role",
        ),
    ],
)
def test_bad_input_names_the_problem(data: object, reason: str, mentions: str) -> None:
    with pytest.raises(RecordError) as info:
        parse_record(data)
    assert info.value.reason == reason
    assert mentions in info.value.detail


def test_keys_outside_the_schema_are_left_out() -> None:
    record = parse_record({"request": "q", "response": "a", "label": {"hallucinated": True}})
    assert record.response == "a" and "label" not in record.model_dump()
    with pytest.raises(RecordError) as info:
        parse_record({"request": "q", "reponse": "a"})
    assert info.value.reason == "no_response"


def test_incomplete_allowed_when_response_not_required() -> None:
    record = parse_record({"request": "q", "retrieved_context": [CONTEXT]}, require_response=False)
    assert record.missing() == frozenset({"response"})
