"""A record's dimensions (`monitor.records.where`): what a page's attribution looks at, and what a
results line carries for `rag-monitor backtest`."""

from __future__ import annotations

import pytest

from monitor.alerts.rule import Origin
from monitor.exporters.results_file import results_line
from monitor.records import ContextDoc, RagRecord
from monitor.records.where import DIMENSIONS, LINE_DIMENSIONS, MAX_CHARS, Where, language


def doc(uri: str | None, content: str = "text", **metadata: str) -> ContextDoc:
    return ContextDoc(content=content, doc_uri=uri, metadata=metadata or None)


def values(record: RagRecord) -> dict[str, str]:
    return dict(zip(DIMENSIONS, Where.of(record).values, strict=True))


def test_a_record_gives_each_dimension_its_value() -> None:
    record = RagRecord(
        request_id="r1",
        trace_id="ab" * 16,
        version="1.4",
        route="/ask",
        model="gpt-4o",
        conversation="c9",
        query="How long is the warranty on the kettle?",
        retrieved_context=(
            doc("https://KB.example.com/kettle", "x" * 300),
            doc("kb.example.com/other", "x" * 300),
            doc("https://kb.example.com/warranty", "x" * 300, tool="search_kb"),
        ),
        response="Two years.",
        metadata={"topic": "warranty"},
    )
    assert values(record) == {
        "version": "1.4",
        "model": "gpt-4o",
        "route": "/ask",
        "source": "kb.example.com",
        "documents": "2-3",
        "context": "500-2k",
        "tool": "search_kb",
        "language": "en",
        "topic": "warranty",
    }
    where = Where.of(record)
    assert (where.trace_id, where.unit) == ("ab" * 16, "c9")
    assert Where.of(record) is where  # asked twice in a row: computed once


@pytest.mark.parametrize(
    ("uri", "metadata", "source"),
    [
        ("s3://manuals/kettle.pdf", {}, "manuals"),
        ("kb/eiffel.md", {}, "kb"),
        ("/kb/eiffel.md", {}, "kb"),
        ("doc-123", {}, ""),
        ("https://user@wiki.internal:8443/page", {}, "wiki.internal:8443"),
        ("doc-123", {"collection": "tickets"}, "tickets"),
        (None, {"source": "crm"}, "crm"),
    ],
)
def test_a_documents_source(uri: str | None, metadata: dict[str, str], source: str) -> None:
    record = RagRecord(request_id="r", query="q", retrieved_context=(doc(uri, **metadata),))
    assert values(record)["source"] == source


def test_no_documents_and_no_question_have_no_values_to_name() -> None:
    got = values(RagRecord(request_id="r", response="a"))
    assert (got["documents"], got["context"], got["source"], got["language"]) == ("0", "0", "", "")
    assert got["version"] == got["model"] == got["topic"] == ""


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("How do I reset my password?", "en"),
        ("Wie lange dauert der Versand nach Österreich?", "de"),
        ("Comment est-ce que je peux annuler ma commande ?", "fr"),
        ("¿Cómo puedo cancelar mi pedido?", "es"),
        ("Qual é o prazo de entrega para o meu pedido?", "pt"),
        ("配送にはどのくらいかかりますか", "ja"),
        ("退货政策是什么", "zh"),
        ("Как сбросить пароль?", "ru"),
        ("12345", ""),
    ],
)
def test_the_questions_language(text: str, name: str) -> None:
    assert language(text) == name


def test_long_values_are_cut_and_a_results_line_carries_the_rest() -> None:
    record = RagRecord(
        request_id="r", route="/" + "a" * 500, query="q", retrieved_context=(doc("kb/x"),)
    )
    assert len(values(record)["route"]) == MAX_CHARS
    line = results_line(record, {})
    assert set(line["dimensions"]) == set(LINE_DIMENSIONS)
    assert line["dimensions"]["source"] == "kb"
    back = Where.from_line(
        line["version"], line["model"], line["route"], line["dimensions"], None, None
    )
    assert back.values == Where.of(record).values
    with pytest.raises(ValueError, match=r"dimensions\.topic"):
        Where.from_line(None, None, "", {"topic": 3}, None, None)


def test_a_value_no_label_shows_is_named_with_those_characters_replaced() -> None:
    """Controls, bidi overrides and line separators never reach a `Where` alert's label:
    each reads as U+FFFD, in records and results lines alike; other text is kept."""
    hostile = "\u0000\n\u202e<b>x</b>\u2028é"
    record = RagRecord(request_id="r", model=hostile, route="/ask", query="q")
    assert values(record)["model"] == "\ufffd\ufffd\ufffd<b>x</b>\ufffdé"
    back = Where.from_line(None, hostile, "/ask", {"topic": "a\u200bb"}, None, None)
    assert back.values == (
        "",
        "\ufffd\ufffd\ufffd<b>x</b>\ufffdé",
        "/ask",
        *[""] * 5,
        "a\ufffdb",
    )


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("/models/SmolLM2-135M-Instruct-Q8_0.gguf", "SmolLM2-135M-Instruct-Q8_0"),
        ("./weights/Phi-3-mini.Q4_K_M.gguf", "Phi-3-mini.Q4_K_M"),
        ("C:\\models\\mistral-7b.safetensors", "mistral-7b"),
        ("/srv/models/Llama-3-8B-Instruct/", "Llama-3-8B-Instruct"),
        ("qwen2.5-7b-instruct-q4.gguf", "qwen2.5-7b-instruct-q4"),
        ("gpt-4o", "gpt-4o"),
        ("openai/gpt-4o", "openai/gpt-4o"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
        ("qwen2.5:7b", "qwen2.5:7b"),
    ],
)
def test_a_model_served_from_a_file_is_named_by_the_file(model: str, name: str) -> None:
    """A model server that serves a file (llama.cpp) reports its path as the model: the
    page, the results line's dimension and a cohort by model all name the file's stem;
    a provider's model id, slashes and all, stays as it is."""
    record = RagRecord(request_id="r1", model=model, query="q", response="a")
    assert values(record)["model"] == name
    from_line = Where.from_line(None, model, "/ask", None, None, None)
    assert dict(zip(DIMENSIONS, from_line.values, strict=True))["model"] == name
    assert Origin.of(record).model == name
