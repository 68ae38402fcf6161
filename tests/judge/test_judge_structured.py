"""Structured output: the judge client sends each judge's JSON schema as `response_format`
when `judge.structured_output` says so, validates the answer against the pydantic schema,
falls back to the tolerant parsers, asks once more for the format, and accounts tokens
and cost the same way as for free-form answers.

The remote model is the scripted stub (`harness/judge_stub.py`), so faults are exact;
`tests/judge/test_judge_real_model.py` runs the same path against a real model.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any, get_args

import pytest
import pytest_asyncio

from harness.judge_stub import Reply, StubJudge
from monitor.judge import parsers, schemas
from monitor.judge.definitions import ANSWER_SCHEMAS, DEFINITIONS, Answer
from monitor.judge.parsers import ParsedVerdict, ParseError
from tests.judge.test_judge_evaluators import MODEL, RECORD, Harness


@pytest_asyncio.fixture
async def stub() -> AsyncIterator[StubJudge]:
    async with StubJudge() as server:
        yield server


def _answers(h: Harness, fmt: str) -> dict[str, float]:
    return {
        result: h.metric("judge_answers_total", model=MODEL, format=fmt, result=result)
        for result in ("valid", "fallback", "repaired", "parse", "truncated")
    }


# -- the schemas --------------------------------------------------------------------------


def _walk(node: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found += _walk(value)
    elif isinstance(node, list):
        for value in node:
            found += _walk(value)
    return found


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_wire_schema_is_strict_portable_subset(name: str) -> None:
    schema = schemas.wire_schema(DEFINITIONS[name].answer_schema)
    for node in _walk(schema):
        assert not {"minimum", "maximum", "minLength", "maxLength", "minItems"} & set(node)
        if node.get("type") == "object":
            # Strict mode: every property required, nothing else allowed.
            assert node["additionalProperties"] is False
            assert set(node["required"]) == set(node["properties"])
    fmt = schemas.response_format(DEFINITIONS[name].answer_schema, name)
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True


def test_categorical_verdicts_are_literals() -> None:
    for kind, model in ANSWER_SCHEMAS.items():
        verdict_field = list(model.model_fields.values())[-1]
        if kind in ("score5", "rubric", "yes_no", "pass_fail", "severity"):
            assert get_args(verdict_field.annotation), kind  # a Literal, not str/int


# The same verdict as a structured answer and as the free-form text the tolerant parser
# reads: both must give the evaluator the same value.
SAME_VERDICT: list[tuple[Answer, dict[str, Any], str, Callable[[str], ParsedVerdict]]] = [
    (
        "score5",
        {"reasoning": "all in document 1", "score": 4},
        "all in document 1\nScore: 4",
        lambda t: parsers.parse_score(t, 1, 5),
    ),
    (
        "yes_no",
        {"reasoning": "matches", "answer": "NO"},
        "matches\nAnswer: NO",
        parsers.parse_yes_no,
    ),
    (
        "unit",
        {"feedback": "half supported", "score": 0.5},
        '{"score": 0.5, "feedback": "half supported"}',
        parsers.parse_unit_score,
    ),
    (
        "pass_fail",
        {"REASONING": "in the context", "SCORE": "PASS"},
        '{"REASONING": "in the context", "SCORE": "PASS"}',
        parsers.parse_pass_fail,
    ),
    (
        "severity",
        {"reason": "graphic", "severity": 5},
        '{"severity": 5, "reason": "graphic"}',
        parsers.parse_severity,
    ),
    (
        "chunks",
        {
            "chunks": [
                {"id": 2, "reason": "population", "relevant": "no"},
                {"id": 1, "reason": "the date", "relevant": "yes"},
            ]
        },
        '{"chunks": [{"id": 1, "relevant": "yes"}, {"id": 2, "relevant": "no"}]}',
        lambda t: parsers.parse_chunks(t, 2),
    ),
    (
        "retrieval",
        {
            "intents": [{"intent": "date", "answered": True}],
            "documents": [{"id": 1, "relevant": True}, {"id": 2, "relevant": False}],
        },
        '{"intents": [{"intent": "date", "answered": true}], '
        '"documents": [{"id": 1, "relevant": true}, {"id": 2, "relevant": false}]}',
        lambda t: parsers.parse_retrieval(t, 2),
    ),
]


@pytest.mark.parametrize(("kind", "structured", "text", "parse"), SAME_VERDICT)
def test_structured_and_free_form_give_the_same_value(
    kind: Answer, structured: dict[str, Any], text: str, parse: Callable[[str], ParsedVerdict]
) -> None:
    parsed = schemas.read(ANSWER_SCHEMAS[kind], json.dumps(structured), 2)
    assert parsed.value == parse(text).value


@pytest.mark.parametrize(
    ("kind", "answer"),
    [
        ("score5", {"reasoning": "x", "score": 6}),
        ("score5", {"reasoning": "x", "score": "4"}),
        ("unit", {"feedback": "x", "score": 1.5}),
        ("yes_no", {"reasoning": "x", "answer": "MAYBE"}),
        ("severity", {"reason": "x", "severity": 8}),
        ("chunks", {"chunks": [{"id": 1, "reason": "x", "relevant": "yes"}]}),  # 2 documents
        ("retrieval", {"intents": [], "documents": []}),
        ("score5", {"reasoning": "x", "score": 3, "extra": 1}),
    ],
)
def test_structured_answers_outside_the_schema_are_parse_errors(
    kind: Answer, answer: dict[str, Any]
) -> None:
    with pytest.raises(ParseError, match=r"structured answer invalid|expected a verdict"):
        schemas.read(ANSWER_SCHEMAS[kind], json.dumps(answer), 2)


# -- the client ---------------------------------------------------------------------------


async def test_structured_on_sends_the_schema_and_reads_the_answer(stub: StubJudge) -> None:
    h = Harness(stub, judge={"structured_output": "on"})
    stub.queue(
        Reply(
            content='{"reasoning": "the year is in document 1", "score": 5}',
            prompt_tokens=150,
            completion_tokens=15,
        )
    )
    result = await h.evaluator("groundedness").evaluate(RECORD)
    assert (result.score, result.passed, result.error) == (5, True, None)
    assert result.explanation == "the year is in document 1"
    body = stub.received[0].body
    sent = body["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "groundedness"
    assert sent["json_schema"]["schema"]["properties"]["score"]["enum"] == [1, 2, 3, 4, 5]
    assert "Reply with one JSON object" in body["messages"][-1]["content"]
    assert _answers(h, "structured")["valid"] == 1
    assert (result.input_tokens, result.output_tokens) == (150, 15)


async def test_structured_off_sends_no_schema(stub: StubJudge) -> None:
    h = Harness(stub, judge={"structured_output": "off", "model": "openai/gpt-4o-mini"})
    stub.queue("Score: 3")
    result = await h.evaluator("coherence").evaluate(RECORD)
    assert result.score == 3
    assert "response_format" not in stub.received[0].body
    assert (
        h.metric(
            "judge_answers_total", model="openai/gpt-4o-mini", format="free_form", result="valid"
        )
        == 1
    )


async def test_auto_asks_for_a_schema_only_where_litellm_knows_it_works(stub: StubJudge) -> None:
    h = Harness(stub)  # structured_output: auto
    stub.default = Reply(content='{"reasoning": "fine", "answer": "YES"}')
    known = await h.evaluator("relevancy", model="openai/gpt-4o-mini").evaluate(RECORD)
    assert known.label == "yes"
    assert "response_format" in stub.received[-1].body
    stub.default = Reply(content="Answer: YES")
    unknown = await h.evaluator("relevancy").evaluate(RECORD)  # openai/judge-stub
    assert unknown.label == "yes"
    assert "response_format" not in stub.received[-1].body


async def test_answer_outside_the_schema_falls_back_to_the_tolerant_parser(
    stub: StubJudge,
) -> None:
    """A server that ignores response_format still gets its free-form answer read."""
    h = Harness(stub, judge={"structured_output": "on"})
    stub.queue("The response is backed by document 1.\nScore: 4")
    result = await h.evaluator("groundedness").evaluate(RECORD)
    assert (result.score, result.error) == (4, None)
    assert len(stub.received) == 1
    assert _answers(h, "structured")["fallback"] == 1


async def test_unreadable_structured_answer_gets_one_follow_up_with_the_schema(
    stub: StubJudge,
) -> None:
    h = Harness(stub, judge={"structured_output": "on"})
    stub.queue(
        Reply(
            content='{"reason": "graphic", "severity": 9}', prompt_tokens=100, completion_tokens=9
        ),
        Reply(
            content='{"reason": "graphic", "severity": 6}', prompt_tokens=140, completion_tokens=9
        ),
    )
    result = await h.evaluator("violence").evaluate(RECORD)
    assert (result.score, result.severity, result.passed) == (6, "high", False)
    assert len(stub.received) == 2
    assert "response_format" in stub.received[1].body
    follow_up = stub.received[1].body["messages"]
    assert follow_up[-2]["content"] == '{"reason": "graphic", "severity": 9}'
    assert follow_up[-1]["content"].startswith("Your answer could not be read")
    # Tokens and cost of both calls are the result's, as for free-form answers.
    assert (result.input_tokens, result.output_tokens) == (240, 18)
    assert h.metric("judge_tokens_total", model=MODEL, direction="input") == 240
    assert _answers(h, "structured")["repaired"] == 1


async def test_unreadable_twice_is_a_parse_error_never_a_verdict(stub: StubJudge) -> None:
    h = Harness(stub, judge={"structured_output": "on"})
    stub.queue('{"reasoning": "hm", "answer": "PERHAPS"}', "I cannot say.")
    result = await h.evaluator("jailbreak").evaluate(RECORD)
    assert result.outcome == "error" and result.passed is None and result.severity is None
    assert result.error is not None and result.error.startswith("parse:")
    assert _answers(h, "structured")["parse"] == 1


async def test_structured_answer_cut_off_at_max_tokens_is_truncated(stub: StubJudge) -> None:
    h = Harness(stub, judge={"structured_output": "on", "max_output_tokens": 16})
    stub.queue(Reply(content='{"REASONING": "the answer says the bri', finish_reason="length"))
    result = await h.evaluator("pass_fail_faithfulness").evaluate(RECORD)
    assert result.error is not None and result.error.startswith("truncated")
    assert len(stub.received) == 1  # a cut-off answer gets no follow-up
    assert stub.received[0].body["max_tokens"] == 16  # judge.max_output_tokens caps 600
    assert _answers(h, "structured")["truncated"] == 1


async def test_provider_refusing_response_format_is_asked_free_form_from_then_on(
    stub: StubJudge,
) -> None:
    h = Harness(stub, judge={"structured_output": "on", "breaker_failures": 1})
    stub.queue(
        Reply(status=400, error="response_format 'json_schema' is not supported by this model"),
        "Score: 2",
        "Score: 5",
    )
    first = await h.evaluator("fluency").evaluate(RECORD)
    assert (first.score, first.error) == (2, None)
    assert "response_format" in stub.received[0].body
    assert "response_format" not in stub.received[1].body
    assert h.metric("judge_retries_total", model=MODEL, reason="structured_unsupported") == 1
    # The refusal is no failure of the model: the breaker (one failure opens it) stays shut.
    assert h.metric("judge_circuit_open", model=MODEL) == 0
    later = await h.evaluator("coherence").evaluate(RECORD)
    assert later.score == 5
    assert "response_format" not in stub.received[2].body


async def test_other_client_errors_are_not_taken_for_a_schema_refusal(stub: StubJudge) -> None:
    h = Harness(stub, judge={"structured_output": "on"})
    stub.queue(Reply(status=400, error="context length exceeded"))
    result = await h.evaluator("fluency").evaluate(RECORD)
    assert result.outcome == "error" and result.error is not None
    assert len(stub.received) == 1


async def test_cost_is_accounted_for_structured_answers(stub: StubJudge) -> None:
    model = "openai/in-house-judge"
    h = Harness(
        stub,
        judge={"structured_output": "on", "prices": {model: {"input": 2.0, "output": 10.0}}},
    )
    stub.queue(
        Reply(
            content='{"feedback": "supported", "score": 0.75}',
            prompt_tokens=1000,
            completion_tokens=100,
        )
    )
    result = await h.evaluator("faithfulness", model=model).evaluate(RECORD)
    assert result.score == 0.75
    assert result.cost == pytest.approx((1000 * 2.0 + 100 * 10.0) / 1e6)
    assert h.metric("judge_cost_usd_total", model=model) == pytest.approx(result.cost)
