"""Conventions are data: an SDK the monitor was never built for is read right once the
user's config declares its convention (`extraction.conventions`), with no code change; a
retriever that declares no kind gives its documents once the config names it. Without the
declaration the same traces give no record, or a record without its context."""

from __future__ import annotations

import json
from typing import Any

import pytest

from monitor.config import ConfigError, load_config
from monitor.extraction import SHIPPED_CONVENTIONS, conventions_from_config, extract_records
from monitor.records import EXTRACTION_SUSPECT, RagRecord
from monitor.spans import Span

TRACE = "ab" * 16
QUESTION = "When was the Eiffel Tower completed?"
DOCS = [
    ("kb/eiffel.md", "The Eiffel Tower stands in Paris and was completed in 1889."),
    ("kb/water.md", "At sea level, pure water boils at 100 degrees Celsius."),
]
ANSWER = "It was completed in 1889."

# Acme Tracer, an SDK invented here: its own kind attribute, JSON everywhere.
ACME_CONFIG = """
extraction:
  conventions:
    - name: acme-tracer
      kind:
        attribute: acme.kind
        values: {ask: request, fetch: retrieval, think: model}
      input: [{attribute: acme.in, encoding: json}]
      output: [{attribute: acme.out, encoding: json}]
      documents: [{attribute: acme.out, encoding: json, field: hits}]
      model: [acme.model]
      input_tokens: [{attribute: acme.usage, encoding: json, field: in}]
      output_tokens: [{attribute: acme.usage, encoding: json, field: out}]
      conversation: [acme.thread]
"""


def _span(
    span_id: int, parent: int | None, name: str, attributes: dict[str, Any], start: int
) -> Span:
    return Span(
        TRACE,
        f"{span_id:016x}",
        "" if parent is None else f"{parent:016x}",
        name,
        1_000 + start,
        2_000 - start,
        attributes=attributes,
        service="acme-app",
    )


def _acme_trace() -> list[Span]:
    documents = [{"uri": uri, "text": text, "rank": i} for i, (uri, text) in enumerate(DOCS)]
    messages = [
        {"role": "system", "content": "Answer from the documents."},
        {"role": "user", "content": QUESTION},
    ]
    return [
        _span(
            1,
            None,
            "ask",
            {
                "acme.kind": "ask",
                "acme.in": json.dumps({"question": QUESTION}),
                "acme.out": json.dumps(ANSWER),
                "acme.thread": "thread-7",
            },
            0,
        ),
        _span(
            2,
            1,
            "fetch",
            {
                "acme.kind": "fetch",
                "acme.in": json.dumps({"query": QUESTION}),
                "acme.out": json.dumps({"hits": documents, "took_ms": 3}),
            },
            1,
        ),
        _span(
            3,
            1,
            "think",
            {
                "acme.kind": "think",
                "acme.in": json.dumps(messages),
                "acme.out": json.dumps({"role": "assistant", "content": ANSWER}),
                "acme.model": "acme-large",
                "acme.usage": json.dumps({"in": 31, "out": 7}),
            },
            2,
        ),
    ]


def _conventions(tmp_path: Any, text: str) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return conventions_from_config(load_config(str(path)).extraction.conventions)


def test_an_sdk_declared_only_in_the_config_is_read_whole(tmp_path: Any) -> None:
    assert extract_records(_acme_trace()) == []  # unknown to the shipped table: not RAG
    (record,) = extract_records(_acme_trace(), conventions=_conventions(tmp_path, ACME_CONFIG))
    assert isinstance(record, RagRecord)
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert [(d.doc_uri, d.content) for d in record.retrieved_context] == DOCS
    assert (record.model, record.input_tokens, record.output_tokens) == ("acme-large", 31, 7)
    assert record.conversation == "thread-7"
    assert record.metadata["conventions"] == "acme-tracer"
    assert EXTRACTION_SUSPECT not in record.metadata


# GenAI chat spans, and a decorated retriever that declares no kind: its documents are
# where the app's decorator put them (the function's return value, JSON).
RETRIEVER_CONFIG = """
extraction:
  conventions:
    - name: kb-search
      match: {span_names: [search_kb], role: retrieval}
      input: [{attribute: app.arguments, encoding: json}]
      documents: [{attribute: app.returned, encoding: json}]
      conversation: [app.session]
"""


def _decorated_trace() -> list[Span]:
    returned = [{"id": uri, "text": text} for uri, text in DOCS]
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
        ),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
        ),
    }
    return [
        _span(1, None, "POST /ask", {"http.route": "/ask", "app.session": "s-1"}, 0),
        _span(
            2,
            1,
            "search_kb",
            {
                "app.arguments": json.dumps({"args": [QUESTION], "kwargs": {}}),
                "app.returned": json.dumps(returned),
            },
            1,
        ),
        _span(3, 1, "chat gpt-test", chat, 2),
    ]


def test_a_retriever_without_a_kind_gives_its_documents_once_the_config_names_it(
    tmp_path: Any,
) -> None:
    (bare,) = extract_records(_decorated_trace())
    assert (bare.query, bare.response, bare.retrieved_context) == (QUESTION, ANSWER, ())
    (record,) = extract_records(
        _decorated_trace(), conventions=_conventions(tmp_path, RETRIEVER_CONFIG)
    )
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert [(d.doc_uri, d.content) for d in record.retrieved_context] == DOCS
    assert record.conversation == "s-1"
    assert set(str(record.metadata["conventions"]).split(",")) == {"genai", "kb-search"}


def test_a_retriever_matched_by_an_attribute_it_carries(tmp_path: Any) -> None:
    config = RETRIEVER_CONFIG.replace(
        "match: {span_names: [search_kb], role: retrieval}",
        "match: {attributes: [app.returned], role: retrieval}",
    )
    (record,) = extract_records(_decorated_trace(), conventions=_conventions(tmp_path, config))
    assert [(d.doc_uri, d.content) for d in record.retrieved_context] == DOCS


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            "{name: acme, kind: {attribute: a.kind, values: {x: retriever}}}",
            "extraction.conventions.0.kind.values.x",
        ),
        ("{name: acme, documents: [{attribute: a.docs, encoding: yaml}]}", "encoding"),
        ("{name: mlflow, conversation: [a.thread]}", "is a shipped convention"),
        ("{name: acme}", "a convention needs a kind or a match"),
        ("{name: acme, match: {role: retrieval}}", "name the spans"),
        ("{name: acme, conversation: [x], colour: red}", "colour"),
        (
            "{name: beacon, input: [{attribute: text, role: user}]}",
            "role: names the message an event holds",
        ),
        (
            "{name: beacon, input: [{event: beacon.message, attribute: text, role: human}]}",
            "extraction.conventions.0.input.0.role",
        ),
        (
            "{name: beacon, model: [{event: beacon.answer, attribute: model}]}",
            "model.0.event",
        ),
        ("{name: beacon, input: [{event: '', attribute: text}]}", "input.0.event"),
        ("{name: acme, joins_messages: true}", "joins_messages: say how its traces are told"),
        ("{name: acme, rag_prompts: [{header: '  '}]}", "rag_prompts.0.header"),
        (
            "{name: acme, rag_prompts: [{header: '参考资料： ', line: true}]}",
            "a header on a line of its own",
        ),
        (
            "{name: acme, rag_prompts: [{header: '资料：', delimiter: ' == '}]}",
            "delimiter: the line around the documents",
        ),
        ("{name: acme, rag_prompts: [{header: h, question: after}]}", "rag_prompts.0.question"),
        ("{name: acme, marks: ['']}", "a mark is an attribute name"),
    ],
)
def test_check_config_names_a_wrong_convention(tmp_path: Any, entry: str, problem: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"extraction:\n  conventions:\n    - {entry}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    assert any(problem in line for line in raised.value.problems), raised.value.problems


def test_every_shipped_convention_has_a_name_the_config_knows() -> None:
    from monitor.config import SHIPPED_CONVENTIONS as KNOWN

    assert {c.name for c in SHIPPED_CONVENTIONS} == KNOWN
