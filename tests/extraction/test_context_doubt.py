"""No doubtful context in silence: a record whose documents were split out of its prompt
is checked for signs of a wrong split; each sign is on the record, counted per service and
reason, and logged naming `rag-monitor explain`."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from opentelemetry.trace import Tracer

from monitor.extraction import CONTEXT_DOUBTS, context_doubts
from monitor.extraction._prompt_templates import TEMPLATES
from monitor.processors.trace._outcomes import Outcomes
from monitor.records import CONTEXT_DOUBT
from monitor.records.limits import SizeLimits
from monitor.telemetry import Telemetry
from tests.extraction.test_event_conventions import ANSWER, DOCS, QUESTION
from tests.extraction.test_structure_and_prompt import _genai_chat, _record

TEXTS = [text for _, text in DOCS]


@pytest.fixture(autouse=True)
def _fresh_templates() -> Iterator[None]:
    TEMPLATES.clear()
    yield
    TEMPLATES.clear()


@pytest.mark.parametrize(
    ("documents", "system", "reason"),
    [
        ([QUESTION, TEXTS[0]], [], "document_is_question"),
        (["Context:", TEXTS[0]], [], "heading_or_instruction"),
        (["## Sources", TEXTS[0]], [], "heading_or_instruction"),
        (["Answer only from the documents below.", TEXTS[0]], [], "heading_or_instruction"),
        ([TEXTS[0]], [TEXTS[0]], "document_is_system_prompt"),
        ([TEXTS[1]], [], "no_document_shares_answer_words"),
    ],
)
def test_each_sign_of_a_wrong_split_is_named(
    documents: list[str], system: list[str], reason: str
) -> None:
    answer = "The Eiffel Tower was completed in 1889."
    assert reason in CONTEXT_DOUBTS
    assert reason in context_doubts(QUESTION, documents, answer, system)


def test_a_right_split_raises_no_doubt() -> None:
    answer = "The Eiffel Tower was completed in 1889."
    assert context_doubts(QUESTION, TEXTS, answer, ["You are helpful.\n\n" + TEXTS[0]]) == ()
    assert context_doubts(QUESTION, TEXTS, "I don't know.", []) == ()


def test_a_doubtful_prompt_split_is_counted_and_logged_naming_explain(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """A plain-worded system prompt, the service's first record: the only "document" is
    the whole system prompt."""

    def emit(tracer: Tracer) -> None:
        _genai_chat(tracer, "Acme support desk, internal edition.")

    record = _record(emit)
    assert record.context_source == "prompt"
    doubts = record.metadata[CONTEXT_DOUBT].split(",")
    assert doubts == ["document_is_system_prompt"]
    outcomes = Outcomes(telemetry, None, SizeLimits())
    with caplog.at_level(logging.WARNING, logger="monitor.processors.trace"):
        outcomes.record(record, "otlp_http")
        outcomes.record(record, "otlp_http")  # the same sign again: counted, not logged
    for reason in doubts:
        labels = {"service": "kb-app", "reason": reason}
        value = telemetry.registry.get_sample_value(
            "rag_monitor_records_context_doubtful_total", labels
        )
        assert value == 2
    lines = [r.getMessage() for r in caplog.records if "records_context_doubtful" in r.getMessage()]
    assert len(lines) == 1
    assert all("'kb-app'" in line and "rag-monitor explain" in line for line in lines)
    assert record.response == ANSWER


def test_a_prompt_split_at_its_marks_raises_no_doubt() -> None:
    def emit(tracer: Tracer) -> None:
        _genai_chat(
            tracer,
            "You are a careful assistant.\n\n"
            + "\n\n".join(f"[{n}] {t}" for n, t in enumerate(TEXTS, 1)),
        )

    record = _record(emit)
    assert record.context_source == "prompt"
    assert CONTEXT_DOUBT not in record.metadata


def test_signs_of_a_wrong_split_are_read_in_any_script() -> None:
    """A label line of any script is a heading; Chinese, written without spaces, shares
    words with its answer by its pairs of characters."""
    doc = "埃菲尔铁塔于1889年建成，是世界博览会的入口。"
    assert "heading_or_instruction" in context_doubts(None, ["已知信息：", doc], None)
    assert "heading_or_instruction" in context_doubts(None, ["المصدر:", doc], None)
    assert context_doubts(None, [doc], "埃菲尔铁塔在1889年建成。") == ()
    assert context_doubts(None, [doc], "长城全长数千公里，横跨中国北方。") == (
        "no_document_shares_answer_words",
    )
