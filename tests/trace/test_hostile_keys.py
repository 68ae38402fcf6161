"""Attribute names a sender controls cost the value they name, never the trace nor the
extraction: a `{placeholder}` key is filled once (`monitor/shared/placeholders.py`), so a
value holding a placeholder is a bad value (`metadata.unread_values: placeholder`), and an
indexed attribute whose index is no small ASCII number is left out (`bad_index`).
`check-config` (and `run`) refuse a user convention key that could fill in its own name."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from harness.wait import wait_until
from monitor.cli.check_config import check_config
from monitor.records import UNREAD_VALUES, RagRecord
from monitor.shared.placeholders import recursion
from tests.trace.test_extraction_rule import Trace

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
DOC = "The Eiffel Tower was completed in 1889 for the World Fair."


def _records_in_a_thread(t: Trace) -> list[RagRecord]:
    """`t.records()`, waited for as a condition: extraction that runs on for ever fails
    the test instead of hanging the run."""
    out: list[list[RagRecord]] = []
    worker = threading.Thread(target=lambda: out.append(t.records()), daemon=True)
    worker.start()
    wait_until(lambda: out, 60, "extraction to finish")
    return out[0]


@pytest.mark.parametrize("value", ["{mastra.span.type}", "x{mastra.span.type}y", "{", "}"])
def test_a_placeholder_in_a_placeholders_value_is_a_bad_value(value: str) -> None:
    """A Mastra container span whose `mastra.span.type` holds a placeholder: the
    substitution ends (it looped for ever on `{mastra.span.type}`), the request's input and
    output under it are not read, and the model call still gives the record."""
    t = Trace()
    agent = {"gen_ai.operation.name": "invoke_agent", "mastra.span.type": value}
    with t.tracer.start_as_current_span("invoke_agent kb", attributes=agent):
        out = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
        chat = {
            "gen_ai.operation.name": "chat",
            "mastra.span.type": "model_inference",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
            ),
            "gen_ai.output.messages": json.dumps(out),
            "gen_ai.request.model": "m",
        }
        with t.tracer.start_as_current_span("chat m", attributes=chat):
            pass
    (record,) = _records_in_a_thread(t)
    assert record.response == ANSWER
    if "{" in value:
        assert record.metadata[UNREAD_VALUES] == "placeholder"


@pytest.mark.parametrize("index", ["²", "1" * 5_000, "٣"])
def test_a_bad_index_costs_its_value_only(index: str) -> None:
    """An OpenInference retriever with one good document and one whose index `isdigit`
    takes and `int` refuses (it failed the whole trace): the good one is read."""
    t = Trace()
    with t.span("chain", openinference__span__kind="CHAIN", input__value=QUESTION):
        retriever = {
            "openinference.span.kind": "RETRIEVER",
            "input.value": QUESTION,
            "retrieval.documents.0.document.content": DOC,
            f"retrieval.documents.{index}.document.content": "forged",
        }
        with t.tracer.start_as_current_span("retrieve", attributes=retriever):
            pass
        llm = {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": QUESTION,
            f"llm.input_messages.{index}.message.role": "user",
            f"llm.input_messages.{index}.message.content": "forged",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        }
        with t.tracer.start_as_current_span("llm", attributes=llm):
            pass
    (record,) = t.records()
    assert (record.query, record.response, record.context_text) == (QUESTION, ANSWER, [DOC])
    if index.isascii():  # `٣` is a digit `int` reads: not ASCII, left out all the same
        assert record.metadata[UNREAD_VALUES] == "bad_index"


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("app.{app.kind}", "'app.{app.kind}' can name 'app.kind'"),
        ("{k}", "'{k}' can name 'k'"),
        ("a.{b}.{a.x.c}", "can name 'a.x.c'"),
        ("app.{kind", "a '{' never closed"),
        ("app.{a{b}}", "a placeholder inside a placeholder"),
        ("app.kind}", "a '}' closes no placeholder"),
        ("app.{}", "an empty placeholder"),
    ],
)
def test_recursive_or_malformed_keys_are_named(key: str, why: str) -> None:
    found = recursion(key)
    assert found is not None and why in found


def test_shipped_style_keys_are_fine() -> None:
    assert recursion("mastra.{mastra.span.type}.input") is None
    assert recursion("plain.key") is None


def test_check_config_refuses_a_self_filling_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "extraction:\n"
        "  conventions:\n"
        "    - name: app\n"
        "      kind: {attribute: app.kind, values: {answer: request}}\n"
        "      output: ['app.{app.kind}']\n"
    )
    assert check_config(config, ()) == 1
    err = capsys.readouterr().err
    assert (
        "extraction.conventions.0.output.0.attribute: 'app.{app.kind}' can name 'app.kind', "
        "the attribute that fills its own placeholder" in err
    )
