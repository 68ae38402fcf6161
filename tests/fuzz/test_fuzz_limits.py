"""Fuzzing the edges the other fuzz files leave open: the OTLP/HTTP body decoder with gzip
(`decode_request`, `gunzip_capped`), hostile nesting depth on every JSON entry point, and
judge answers built to be pathological (long repeats, deep braces).

The contract everywhere: decode, or raise the component's own error (`DecodeError`,
`TooLarge`, `RecordError`, `ParseError`, a counted rejection) — never another exception,
never output past the configured cap. The longer, unbounded run is `bench/fuzz_long.py`.

Findings, each kept as a regression test (a strict xfail while it was open):
- replay and the config loader ended with a traceback on a line nested past the
  recursion limit / an integer over 4,300 digits / a non-UTF-8 or too deeply nested
  config file (fixed; `bench/fuzz_long.py` found the last three);
- the Kafka decoder and the judge JSON parsers let the `ValueError` of an integer over
  4,300 digits escape (fixed);
- the OTLP/HTTP gzip decoder read only the first member of a multi-member gzip body and
  silently ignored the rest (spans accepted with 200 and lost) (fixed);
- the judge-answer parsers raised `RecursionError` on an answer like `{"a": {"a": ...`
  5,000 deep, bypassing the parser contract and the format-reminder retry (fixed);
- the Kafka message decoder raised `RecursionError` on a message nested deeper than the
  interpreter's recursion limit instead of returning a `bad_json` rejection (fixed).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.reliability import REPO, Trace, export_request, trace_ids
from monitor.config import ConfigError, load_config
from monitor.judge import parsers
from monitor.judge.parsers import ParseError
from monitor.receivers.kafka._messages import decode_message
from monitor.receivers.otlp._wire import TooLarge, decode_request, gunzip_capped
from monitor.records import RecordError, parse_record
from monitor.spans import DecodeError, RequestSpans, decode_json

pytestmark = pytest.mark.timeout(120)
_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GOOD = export_request([Trace(t) for t in trace_ids(1, 3)])
DEEP = 100_000


@_SETTINGS
@given(st.binary(max_size=400), st.booleans(), st.booleans())
def test_http_body_decoder_on_arbitrary_bytes(body: bytes, gz: bool, as_json: bool) -> None:
    try:
        decode_request(body, gzip=gz, as_json=as_json, limit=1 << 16)
    except (DecodeError, TooLarge):
        pass


@_SETTINGS
@given(st.data())
def test_http_body_decoder_on_mutated_gzip(data: st.DataObject) -> None:
    raw = bytearray(gzip.compress(GOOD))
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    try:
        decode_request(bytes(raw[:cut]), gzip=True, as_json=False, limit=1 << 20)
    except (DecodeError, TooLarge):
        pass


@_SETTINGS
@given(st.binary(max_size=2000), st.integers(1, 4096), st.integers(1, 9))
def test_gunzip_never_returns_more_than_the_cap(payload: bytes, limit: int, level: int) -> None:
    body = gzip.compress(payload * 50, compresslevel=level)
    try:
        out = gunzip_capped(body, limit)
    except TooLarge:
        assert len(payload) * 50 > limit
        return
    assert out == payload * 50 and len(out) <= limit


def test_concatenated_gzip_members_are_all_decoded() -> None:
    """RFC 1952 allows several members in one gzip body, and two serialized export
    requests concatenated are one valid request (repeated fields merge). All 12 spans
    must arrive, or the body must be refused — never 6 accepted and 6 silently lost."""
    more = export_request([Trace(t) for t in trace_ids(2, 3)])
    body = gzip.compress(GOOD) + gzip.compress(more)
    try:
        request = decode_request(body, gzip=True, as_json=False, limit=1 << 20)
    except DecodeError:
        return
    assert isinstance(request, RequestSpans)
    assert len(request.build().spans) == 12


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_deep_nesting_in_otlp_json_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decode_json(('{"resourceSpans": ' + _nested(DEEP) + "}").encode())


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 800), st.sampled_from(["request", "retrieved_context", "messages"]))
def test_record_normaliser_on_deep_structures(depth: int, key: str) -> None:
    value = json.loads(_nested(depth))
    try:
        parse_record({key: value, "response": "x"})
    except RecordError:
        pass


def test_replay_skips_a_line_nested_past_the_recursion_limit(tmp_path: Path) -> None:
    """Regression: such a line, or one with an integer over Python's 4,300-digit limit,
    used to raise (RecursionError / ValueError) and end the replay with exit 1."""
    path = tmp_path / "deep.jsonl"
    lines = [
        '{"request": "Where is the Eiffel Tower?", "response": "In Paris."}',
        '{"request": ' + _nested(DEEP) + ', "response": "x"}',
        '{"request": "How tall is it?", "response": "330 metres."}',
        '{"request": "q", "response": "r", "latency_ms": ' + "9" * 5000 + "}",
    ]
    path.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "monitor", "replay", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert "line 2: bad JSON" in output and "line 4: bad JSON" in output
    assert "2 records evaluated, 2 malformed" in output


def test_config_that_is_not_utf8_or_nested_too_deeply_is_a_config_error(tmp_path: Path) -> None:
    """Regression: these raised UnicodeDecodeError / RecursionError / ValueError out of
    load_config (the last found by `bench/fuzz_long.py`)."""
    path = tmp_path / "config.yaml"
    path.write_bytes(b"receivers: \xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path, environ={})
    path.write_text("receivers: " + _nested(DEEP))
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(path, environ={})
    path.write_text("pipeline: {workers: " + HUGE_INT + "}")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(path, environ={})


HUGE_INT = "9" * 5_000  # over Python's 4,300-digit int conversion limit: json raises ValueError


def test_kafka_message_with_a_huge_integer_is_a_rejection() -> None:
    message = '{"request": "q", "response": "r", "latency_ms": ' + HUGE_INT + "}"
    decoded = decode_message(message.encode(), "auto")
    assert decoded.problems and decoded.problems[0].reason == "bad_json"


def test_kafka_message_nested_past_the_recursion_limit_is_a_rejection() -> None:
    decoded = decode_message(('{"request": ' + _nested(DEEP) + "}").encode(), "auto")
    assert decoded.problems and decoded.problems[0].reason == "bad_json"


PATHOLOGICAL = {
    "open_braces": "{" * 20_000,
    "prose_braces": "x { y } " * 5_000,
    "repeated_score": "Score: " * 20_000,
    "long_number": "Score: " + "9" * 20_000,
    "fences": "```json\n" * 5_000,
    "repeated_answer": "Answer: " * 20_000,
    "repeated_result": "[RESULT] " * 20_000,
    "quotes": '{"' * 20_000,
}
PARSERS: dict[str, Callable[[str], parsers.ParsedVerdict]] = {
    "score": lambda t: parsers.parse_score(t, 1, 5),
    "yes_no": parsers.parse_yes_no,
    "pass_fail": parsers.parse_pass_fail,
    "json": lambda t: parsers.parse_json(t, ("score",)),
    "unit": parsers.parse_unit_score,
    "severity": parsers.parse_severity,
    "chunks": lambda t: parsers.parse_chunks(t, 2),
    "retrieval": lambda t: parsers.parse_retrieval(t, 2),
}


@pytest.mark.parametrize("parser", sorted(PARSERS))
@pytest.mark.parametrize("answer", sorted(PATHOLOGICAL))
def test_judge_parsers_on_pathological_answers(parser: str, answer: str) -> None:
    try:
        PARSERS[parser](PATHOLOGICAL[answer])
    except ParseError:
        pass


@pytest.mark.parametrize("parser", ["json", "unit", "severity", "chunks", "retrieval"])
def test_judge_parsers_on_deeply_nested_json_answer(parser: str) -> None:
    try:
        PARSERS[parser]('{"a": ' * 5_000)
    except ParseError:
        pass


@pytest.mark.parametrize("parser", ["json", "unit", "severity", "chunks", "retrieval"])
def test_judge_parsers_on_a_huge_integer_in_the_answer(parser: str) -> None:
    try:
        PARSERS[parser]('{"score": 1' + HUGE_INT + "}")
    except ParseError:
        pass


def test_zlib_bomb_ratio_is_what_the_cap_assumes() -> None:
    """The cap works on output size, whatever the ratio: 1 MiB of zeros → about 1 KiB."""
    assert len(zlib.compress(bytes(1 << 20), 9)) < 2048
    with pytest.raises(TooLarge):
        gunzip_capped(gzip.compress(bytes(1 << 20)), 1 << 16)
