"""Judge answer parsers, judge config checks and prompt fencing (no network)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.config import ConfigError, load_config
from monitor.evaluators.f1 import token_f1
from monitor.evaluators.registry import check_evaluators
from monitor.judge import parsers
from monitor.judge.definitions import DEFINITIONS
from monitor.judge.parsers import ParseError
from monitor.judge.templates import TemplateError, fence, load


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Score: 4", 4),
        ("4", 4),
        ("4.", 4),
        ("**4**", 4),
        ("[RESULT] 4", 4),
        ("Feedback: clear, but misses one point. [RESULT] 3", 3),
        ("The answer is fine.\n\nScore: 5/5", 5),
        ("score = 2", 2),
        ("Reasoning mentions 3 documents and 1931.\nScore: 2", 2),
        ("First guess Score: 3, on reflection\nScore: 4", 4),
        ("**Score:** 5", 5),
        ("Rating: 1", 1),
    ],
)
def test_score_formats(text: str, value: float) -> None:
    assert parsers.parse_score(text, 1, 5).value == value


@pytest.mark.parametrize("text", ["", "good", "Score: 9", "0", "It covers 3 of 4 points"])
def test_score_rejects(text: str) -> None:
    with pytest.raises(ParseError):
        parsers.parse_score(text, 1, 5)


def test_score_keeps_the_reasoning_as_explanation() -> None:
    parsed = parsers.parse_score("Every claim is in document 1.\nScore: 5", 1, 5)
    assert parsed.explanation == "Every claim is in document 1."


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Yes", True),
        ("yes.", True),
        ("NO", False),
        ("**No**", False),
        ("'Yes'", True),
        ("No, the document says 1950.", False),
        ("The claim matches.\nAnswer: YES", True),
        ("Final answer: no", False),
        ("Reasoning here.\n\nYES", True),
        ("Verdict - Yes!", True),
    ],
)
def test_yes_no_formats(text: str, value: bool) -> None:
    assert parsers.parse_yes_no(text).value is value


@pytest.mark.parametrize("text", ["", "maybe", "Not sure whether yes or no applies here"])
def test_yes_no_rejects(text: str) -> None:
    with pytest.raises(ParseError):
        parsers.parse_yes_no(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"REASONING": "all there", "SCORE": "PASS"}', True),
        ('```json\n{"reasoning": "missing date", "score": "fail"}\n```', False),
        ("The response is unsupported.\nFAIL", False),
        ("PASS", True),
    ],
)
def test_pass_fail_formats(text: str, value: bool) -> None:
    assert parsers.parse_pass_fail(text).value is value


def test_json_prefers_fenced_block_and_the_object_with_the_keys() -> None:
    text = (
        'An example of the format is {"score": 0.0, "feedback": "x"}.\n'
        '```json\n{"note": "draft"}\n{"score": 0.8, "feedback": "mostly supported"}\n```'
    )
    assert parsers.parse_unit_score(text).value == 0.8


def test_json_in_prose_is_found_past_unrelated_braces() -> None:
    text = 'Sets like {a, b} are not JSON. {"severity": 2, "reason": "mild"} That is all.'
    parsed = parsers.parse_severity(text)
    assert (parsed.value, parsed.explanation) == (2, "mild")


@pytest.mark.parametrize(
    "text",
    ['{"score": 1.5}', '{"score": "high"}', '{"feedback": "x"}', "score: 0.5", '{"score": 0.5'],
)
def test_unit_score_rejects(text: str) -> None:
    with pytest.raises(ParseError):
        parsers.parse_unit_score(text)


def test_severity_must_be_an_integer_in_range() -> None:
    for bad in ('{"severity": 8}', '{"severity": 2.5}', '{"severity": -1}'):
        with pytest.raises(ParseError):
            parsers.parse_severity(bad)


@pytest.mark.parametrize(
    "text",
    [
        '{"chunks": [{"id": Infinity, "relevant": true}]}',
        '{"chunks": [{"id": NaN, "relevant": true}]}',
        '{"chunks": [{"id": 1, "relevant": null}]}',
        '{"chunks": {"id": 1}}',
    ],
)
def test_chunks_reject_odd_json(text: str) -> None:
    with pytest.raises(ParseError):
        parsers.parse_chunks(text, 1)


def test_chunks_need_one_verdict_per_document() -> None:
    ok = '{"chunks": [{"id": 2, "relevant": "no"}, {"id": 1, "relevant": true}]}'
    assert parsers.parse_chunks(ok, 2).value == [True, False]
    with pytest.raises(ParseError, match="each of 3 chunks"):
        parsers.parse_chunks(ok, 3)


@given(st.text(max_size=200))
def test_parsers_raise_parse_error_or_return(text: str) -> None:
    for parse in (
        lambda t: parsers.parse_score(t, 1, 5),
        parsers.parse_yes_no,
        parsers.parse_pass_fail,
        parsers.parse_unit_score,
        parsers.parse_severity,
        lambda t: parsers.parse_chunks(t, 2),
        lambda t: parsers.parse_retrieval(t, 2),
    ):
        try:
            parse(text)
        except ParseError:
            pass


_JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "score",
                    "SCORE",
                    "severity",
                    "chunks",
                    "intents",
                    "documents",
                    "id",
                    "relevant",
                    "answered",
                    "reasoning",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@given(_JSON)
def test_parsers_survive_arbitrary_json(value: object) -> None:
    text = json.dumps(value)
    for parse in (
        parsers.parse_pass_fail,
        parsers.parse_unit_score,
        parsers.parse_severity,
        lambda t: parsers.parse_chunks(t, 2),
        lambda t: parsers.parse_retrieval(t, 2),
    ):
        try:
            parse(text)
        except ParseError:
            pass


@given(st.text(max_size=300))
def test_fenced_text_cannot_close_its_own_fence(text: str) -> None:
    block = fence("response", text)
    match = re.fullmatch(r"<<<RESPONSE (\w{12})\n(.*)\nRESPONSE \1>>>", block, re.S)
    assert match is not None
    assert f"RESPONSE {match.group(1)}>>>" not in match.group(2)


def test_every_builtin_template_has_its_placeholders() -> None:
    versions = set()
    for definition in DEFINITIONS.values():
        template = load(
            definition.name,
            None,
            definition.placeholders,
            definition.placeholders | definition.optional,
        )
        versions.add(template.version)
    assert len(versions) == len(DEFINITIONS)


def test_override_must_keep_placeholders() -> None:
    with pytest.raises(TemplateError, match="missing placeholder"):
        load("faithfulness", "Grade {{response}}", frozenset({"context", "response"}), frozenset())


def test_token_f1() -> None:
    assert token_f1("The bridge opened in 1931.", "the bridge opened in 1931") == 1.0
    assert token_f1("no overlap", "entirely different") == 0.0
    assert token_f1("", "") == 1.0


def test_bad_prompt_override_is_a_config_error_at_startup(tmp_path: Path) -> None:
    template = tmp_path / "g.txt"
    template.write_text("Judge {{response}} please.\nScore: N", encoding="utf-8")
    path = tmp_path / "c.yaml"
    path.write_text(
        f"judge: {{model: openai/x}}\nevaluators: [{{name: groundedness, prompt: {template}}}]\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as err:
        check_evaluators(load_config(path))
    assert err.value.problems == ["evaluators.0.prompt: missing placeholder {{context}}"]


def test_judge_without_a_model_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("evaluators: [{name: local_relevance}, {name: violence}]\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        check_evaluators(load_config(path))
    assert err.value.problems == [
        "evaluators.1.model: violence is an LLM judge; set evaluators[].model or judge.model"
    ]
    path.write_text("evaluators: [{name: violence, model: ollama/llama-guard}]\n", encoding="utf-8")
    assert load_config(path).evaluators[0].model == "ollama/llama-guard"


def test_run_without_the_judge_key_exits_with_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "judge: {model: openai/x, api_key_env: RAG_MONITOR_TEST_ABSENT_KEY}\n"
        "evaluators: [{name: groundedness}]\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k != "RAG_MONITOR_TEST_ABSENT_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "monitor", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 1
    assert (
        "config error: judge.api_key_env: environment variable RAG_MONITOR_TEST_ABSENT_KEY is not set"
        in done.stderr
    )
    assert "Traceback" not in done.stderr
