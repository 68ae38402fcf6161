"""A record's conversation (session) id, from the attribute each convention writes it in
(the conventions table's `conversation`), on the answering call, its request or any span of
the trace; and `rag.*` values an SDK JSON-encoded (MLflow's span API) read as their text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from monitor.config import Config
from monitor.extraction import conventions_from_config, extract_records
from monitor.spans import Span

TRACE = "cd" * 16
QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "It was completed in 1889."
DOC = "The Eiffel Tower stands in Paris and was completed in 1889."


def _trace(root: dict[str, Any], chat: dict[str, Any]) -> list[Span]:
    call = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": QUESTION}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": ANSWER}]),
        **chat,
    }
    return [
        Span(TRACE, "1" * 16, "", "POST /ask", 1_000, 2_000, attributes=root),
        Span(TRACE, "2" * 16, "1" * 16, "chat", 1_100, 1_900, attributes=call),
    ]


@pytest.mark.parametrize(
    ("root", "chat", "conversation"),
    [
        ({}, {"gen_ai.conversation.id": "conv-1"}, "conv-1"),  # GenAI
        ({"session.id": "sess-2"}, {}, "sess-2"),  # OpenInference, Langfuse, the app's own
        ({"langfuse.session.id": "lf-3"}, {}, "lf-3"),  # Langfuse's older attribute
        ({"session.id": '"mlflow-4"'}, {}, "mlflow-4"),  # MLflow's span API: JSON-encoded
        ({"langsmith.metadata.thread_id": "thread-5"}, {}, "thread-5"),  # LangSmith
        ({}, {}, None),
    ],
)
def test_the_conversation_is_read_where_each_convention_writes_it(
    root: dict[str, Any], chat: dict[str, Any], conversation: str | None
) -> None:
    (record,) = extract_records(_trace(root, chat))
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert record.conversation == conversation


def test_the_answering_calls_own_conversation_comes_first() -> None:
    root = {"session.id": "outer"}
    (record,) = extract_records(_trace(root, {"gen_ai.conversation.id": "inner"}))
    assert record.conversation == "inner"


def test_rag_values_json_encoded_by_an_sdk_are_read_as_their_text() -> None:
    root = {
        "rag.query": json.dumps(QUESTION),
        "rag.response": json.dumps(ANSWER),
        "rag.context": json.dumps(json.dumps([{"content": DOC, "doc_uri": "kb/eiffel.md"}])),
    }
    (record,) = extract_records(_trace(root, {}))
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert [(d.doc_uri, d.content) for d in record.retrieved_context] == [("kb/eiffel.md", DOC)]


def test_an_attribute_the_config_names_comes_before_the_shipped_ones() -> None:
    config = Config.model_validate(
        {"extraction": {"conventions": [{"name": "app", "conversation": ["app.thread"]}]}}
    )
    conventions = conventions_from_config(config.extraction.conventions)
    chat = {"gen_ai.conversation.id": "conv-1", "app.thread": "thread-9"}
    (record,) = extract_records(_trace({}, chat), conventions=conventions)
    assert record.conversation == "thread-9"
    (shipped,) = extract_records(_trace({}, chat))
    assert shipped.conversation == "conv-1"
