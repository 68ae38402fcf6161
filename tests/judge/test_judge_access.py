"""Judges checked before the monitor starts, and their failures named at run time.

`check-config` (and `run`, `replay` before anything starts) finds the credentials litellm
will look for; `check-config --probe` asks each judge one question against a scripted
OpenAI-compatible server over real HTTP (`harness/judge_stub.py`) answering 401, 404, 429
or too late; at run time an auth or not-found failure is its own outcome, counted and
logged once with the fix; `replay` fails when an evaluator returned nothing but errors.
litellm's log lines, at every level, go through the monitor's log like the rest.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from harness.children import forget, spawn_async
from harness.judge_stub import Reply, StubJudge
from monitor.__main__ import main
from monitor.config import Config, EvaluatorConfig
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.probe import probe
from monitor.evaluators.registry import build
from monitor.judge.client import JudgeClient
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry
from tests.judge.test_judge_evaluators import KEY_ENV, MODEL, RECORD, SECRET, Harness

PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", KEY_ENV)


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # And RAG_MONITOR_* variables of the shell: check-config names each one it does not read.
    for name in [*PROVIDER_KEYS, *(k for k in os.environ if k.startswith("RAG_MONITOR_"))]:
        monkeypatch.delenv(name, raising=False)
    yield


@pytest_asyncio.fixture
async def stub() -> AsyncIterator[StubJudge]:
    async with StubJudge() as server:
        yield server


def _write(tmp_path: Path, judge: dict[str, Any], evaluators: list[dict[str, Any]]) -> Path:
    path = tmp_path / "config.yaml"
    config = {
        "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
        "judge": judge,
        "evaluators": evaluators,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["check-config", str(path)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    ("model", "variable"),
    [("openai/gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic/claude-3-5-haiku", "ANTHROPIC_API_KEY")],
)
def test_check_config_names_the_provider_key_a_judge_lacks(
    model: str, variable: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, {"model": model}, [{"name": "groundedness"}])
    code, out, err = _check(path, capsys)
    assert code == 1 and out == ""
    assert err.splitlines() == [
        f"judge.model: judge {model} (groundedness) needs {variable}, which is not set: "
        "set it, or name the variable holding the key in judge.api_key_env"
    ]


def test_check_config_names_an_unset_api_key_env(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judge = {"model": "openai/gpt-4o-mini", "api_key_env": KEY_ENV}
    path = _write(tmp_path, judge, [{"name": "groundedness"}])
    code, _, err = _check(path, capsys)
    assert code == 1
    assert err.splitlines() == [f"judge.api_key_env: environment variable {KEY_ENV} is not set"]


def test_a_judge_keyed_by_api_key_env_is_checked_without_importing_litellm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key `judge.api_key_env` names is all its judges need, set or not: litellm
    (seconds to import) is not imported to say so, and `run` and `check-config` answer at
    once."""

    def refused() -> None:
        raise AssertionError("litellm imported")

    monkeypatch.setattr("monitor.judge.access.import_litellm", refused)
    keyed = {"model": "openai/gpt-4o-mini", "api_key_env": KEY_ENV}
    path = _write(tmp_path, keyed, [{"name": "groundedness"}, {"name": "violence"}])
    code, _, err = _check(path, capsys)
    assert (code, err.splitlines()) == (
        1,
        [f"judge.api_key_env: environment variable {KEY_ENV} is not set"],
    )
    monkeypatch.setenv(KEY_ENV, SECRET)
    code, _, err = _check(path, capsys)
    assert (code, err) == (0, "")


def test_check_config_passes_a_judge_with_its_key_or_a_local_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An OpenAI-compatible server of the user's own needs no key.
    local = {"model": "openai/smollm2", "api_base": "http://127.0.0.1:9/v1"}
    code, out, err = _check(_write(tmp_path, local, [{"name": "groundedness"}]), capsys)
    assert (code, err) == (0, "") and out.startswith("# ")
    # The variable judge.api_key_env names stands for the provider's.
    monkeypatch.setenv(KEY_ENV, SECRET)
    keyed = {"model": "openai/gpt-4o-mini", "api_key_env": KEY_ENV}
    code, _, err = _check(_write(tmp_path, keyed, [{"name": "groundedness"}]), capsys)
    assert (code, err) == (0, "")
    # An evaluator's own endpoint never gets that key: its provider's variable is needed.
    own = {"model": "anthropic/claude", "api_base": "http://127.0.0.1:8"}
    evaluators = [{"name": "groundedness"}, {"name": "violence", **own}]
    path = _write(tmp_path, {**local, "api_key_env": KEY_ENV}, evaluators)
    code, _, err = _check(path, capsys)
    assert code == 1
    assert err.startswith("evaluators.1.model: judge anthropic/claude at http://127.0.0.1:8 (")
    assert "ANTHROPIC_API_KEY" in err


def test_check_config_refuses_a_model_litellm_cannot_route(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, {"model": "gpt-nonsense-judge"}, [{"name": "groundedness"}])
    code, _, err = _check(path, capsys)
    assert code == 1 and "judge.model: litellm knows no provider for 'gpt-nonsense" in err


def test_run_refuses_a_judge_without_key_before_it_opens_a_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The metrics port is held here: had `run` got as far as listening, it would report
    that port instead of the key."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        path = _write(tmp_path, {"model": "openai/gpt-4o-mini"}, [{"name": "groundedness"}])
        config = yaml.safe_load(path.read_text())
        config["exporters"] = {"prometheus": {"endpoint": f"127.0.0.1:{port}"}}
        path.write_text(yaml.safe_dump(config))
        assert main(["run", "--config", str(path)]) == 1
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY, which is not set" in err
    assert str(port) not in err


async def _cli(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items() if k not in PROVIDER_KEYS}
    proc = await spawn_async(
        sys.executable,
        "-m",
        "monitor",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**base, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode is not None
    forget(proc)
    return proc.returncode, out.decode(), err.decode()


async def _check_config(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str
) -> tuple[int, str, str]:
    """`rag-monitor check-config ARGV` in this process (litellm imported once per test
    process, not once per command), in a thread: it runs an event loop of its own. Its
    logging setup replaces the root handlers; they are put back, so caplog sees what
    follows."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        code = await asyncio.to_thread(main, ["check-config", *argv])
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.captureWarnings(False)
    out = capsys.readouterr()
    return code, out.out, out.err


async def _judged_once(
    judge: dict[str, Any],
) -> tuple[EvalResult, Callable[[str, str], float | None]]:
    """`RECORD` scored once by `groundedness` through a judge client of config `judge`
    (no key in its environment); the result, and `judge_requests_total` by model and
    outcome."""
    config = Config.model_validate({"judge": judge})
    telemetry = create_telemetry()
    client = JudgeClient(config.judge, config.redaction, telemetry, environ={})
    context = BuildContext(judge=client, judge_model=config.judge.model)
    result = await build(EvaluatorConfig(name="groundedness"), context).evaluate(RECORD)

    def requests(model: str, outcome: str) -> float | None:
        labels = {"model": model, "outcome": outcome}
        return telemetry.registry.get_sample_value("rag_monitor_judge_requests_total", labels)

    return result, requests


PROBED = {
    "openai/refused": Reply(status=401, error="Incorrect API key provided"),
    "openai/missing": Reply(status=404, error="The model does not exist"),
    "openai/limited": Reply(status=429, error="Rate limit reached"),
    "openai/slow": Reply(delay=600),  # cut short when the stub stops
    "openai/fine": Reply(content="Score: 5"),
}


@pytest.mark.asyncio
async def test_probe_reports_each_judge_failure_by_kind_in_one_line(
    stub: StubJudge,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stub.default = lambda got: PROBED[f"openai/{got.body['model']}"]
    evaluators = [
        {"name": name, "model": model}
        for name, model in zip(
            ["relevance", "coherence", "fluency", "violence", "groundedness"], PROBED, strict=True
        )
    ]
    # Long enough for a loaded machine's first call, which the slow model outlasts.
    judge = {"api_base": stub.openai_base, "timeout_s": 5}
    path = _write(tmp_path, judge, evaluators)
    code, out, err = await _check_config(capsys, monkeypatch, str(path), "--probe")
    assert code == 1 and out == ""
    # One line per failing judge (a log line may say that openai/fine has no price).
    lines = [line for line in err.splitlines() if line.startswith("judge ")]
    assert len(lines) == 4, err
    by_model = {line.split()[1]: line for line in lines}
    assert set(by_model) == set(PROBED) - {"openai/fine"}
    assert (
        ": auth: the judge refused the credentials: set a valid key in OPENAI_API_KEY"
        in (by_model["openai/refused"])
    )
    assert "Incorrect API key provided" in by_model["openai/refused"]
    assert (
        f": not_found: {stub.openai_base} has no model 'openai/missing'"
        in (by_model["openai/missing"])
    )
    assert ": rate_limited: the key works" in by_model["openai/limited"]
    assert ": timeout: no answer within judge.timeout_s (5s)" in by_model["openai/slow"]
    assert len(stub.received) == len(PROBED)  # one call each, no retries

    # All giving verdicts: the summary says so and the configuration follows.
    stub.default = Reply(content="Score: 5")
    path = _write(tmp_path, judge | {"model": "openai/fine"}, [{"name": "groundedness"}])
    code, out, err = await _check_config(capsys, monkeypatch, str(path), "--probe")
    assert code == 0 and not [line for line in err.splitlines() if line.startswith("judge ")]
    assert f"# judge openai/fine at {stub.openai_base} (groundedness): ok (a verdict read)" in out
    # The probe was the judge's own prompt about a sample record, not a one-word question.
    assert "kettle" in stub.received[-1].prompt


@pytest.mark.asyncio
async def test_probe_fails_a_judge_whose_answers_do_not_parse(stub: StubJudge) -> None:
    """A reachable model that answers every prompt with prose is no judge: `--probe` says
    so by kind (`parse`), per judge evaluator, and the others pass."""
    stub.default = lambda got: Reply(
        content="I would rather not say." if got.body["model"] == "babbler" else "Score: 5"
    )
    config = Config.model_validate(
        {
            "judge": {"api_base": stub.openai_base, "model": "openai/fine"},
            "evaluators": [
                {"name": "groundedness", "model": "openai/babbler"},
                {"name": "relevance"},
            ],
        }
    )
    results = {r.target.evaluators: r for r in await probe(config)}
    assert results[("groundedness",)].outcome == "parse", results
    assert str(results[("groundedness",)]).startswith(
        f"judge openai/babbler at {stub.openai_base} (groundedness): parse: "
    )
    assert "\n" not in str(results[("groundedness",)])
    assert results[("relevance",)].outcome == "ok"


@pytest.mark.asyncio
async def test_probe_says_to_ask_for_structured_output_when_a_free_form_answer_is_cut(
    stub: StubJudge,
) -> None:
    """A small model rambling past its tokens in free form (`auto` chose free-form: litellm
    does not know the model): the line says to set `judge.structured_output: on`; asked
    for a schema already, the same cut answer gets no such hint."""
    stub.default = Reply(content="Let me think about the warranty " * 40, finish_reason="length")
    lines = {}
    for mode in ("auto", "on"):
        config = Config.model_validate(
            {
                "judge": {
                    "api_base": stub.openai_base,
                    "model": "openai/small",
                    "structured_output": mode,
                },
                "evaluators": [{"name": "groundedness"}],
            }
        )
        (result,) = await probe(config)
        assert result.outcome == "truncated", result
        lines[mode] = str(result)
    assert "\n" not in lines["auto"]
    assert (
        "; the answer was free-form (judge.structured_output: auto chose free-form for this "
        "model): set judge.structured_output: on where the model server takes a JSON schema"
    ) in lines["auto"], lines["auto"]
    assert "structured_output" not in lines["on"], lines["on"]


@pytest.mark.e2e
@pytest.mark.asyncio
async def test_a_judge_nothing_answers_at_is_named_unreachable_by_probe_and_at_run_time(
    tmp_path: Path,
    closed_port: int,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closed = f"http://127.0.0.1:{closed_port}/v1"
    judge = {"model": MODEL, "api_base": closed, "retries": 0}
    path = _write(tmp_path, judge, [{"name": "f1"}, {"name": "groundedness"}])
    code, _, err = await _check_config(capsys, monkeypatch, str(path), "--probe")
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("judge ")]
    assert len(lines) == 1, err
    assert lines[0].startswith(
        f"judge {MODEL} at {closed} (groundedness): unreachable: nothing answers at {closed}; "
        "is the server running? ("
    ), lines

    result, requests = await _judged_once(judge)
    assert result.error is not None and result.error.startswith("unreachable:"), result.error
    assert requests(MODEL, "unreachable") == 1
    assert f"unreachable: nothing answers at {closed}; is the server running?" in caplog.text


@pytest.mark.asyncio
async def test_auth_and_not_found_are_named_counted_and_logged_once_with_the_fix(
    stub: StubJudge, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness(stub, judge={"breaker_failures": 10})
    stub.default = Reply(status=401, error="Incorrect API key provided")
    caplog.set_level(logging.INFO)
    for _ in range(3):
        result = await h.evaluator("groundedness").evaluate(RECORD)
        assert result.outcome == "error" and result.error is not None
        assert result.error.startswith("auth: the judge refused the credentials")
        assert "\n" not in result.error and "Incorrect API key provided" in result.error
    assert h.metric("judge_requests_total", model=MODEL, outcome="auth") == 3
    assert h.metric("judge_requests_total", model=MODEL, outcome="error") == 0
    explained = [r for r in caplog.records if "refused the credentials" in r.getMessage()]
    assert len(explained) == 1 and explained[0].levelno == logging.ERROR
    assert f"set a valid key in {KEY_ENV}" in explained[0].getMessage()
    assert SECRET not in caplog.text

    stub.default = Reply(status=404, error="model not found")
    result = await h.evaluator("relevance").evaluate(RECORD)
    assert result.error is not None and result.error.startswith("not_found: ")
    assert "NotFoundError" in result.error
    assert h.metric("judge_requests_total", model=MODEL, outcome="not_found") == 1
    assert sum("has no model" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.asyncio
async def test_a_missing_provider_key_at_run_time_is_an_auth_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """litellm calls a key missing on our side a server error (500); it is not one. No
    server is needed: the call fails before it is sent."""
    model = "openai/gpt-4o-mini"
    result, requests = await _judged_once({"model": model, "retries": 0})
    assert result.error is not None and result.error.startswith("auth:"), result.error
    assert requests(model, "auth") == 1
    assert "set a valid key in OPENAI_API_KEY" in caplog.text


@pytest.mark.e2e
@pytest.mark.asyncio
async def test_replay_at_debug_logs_json_on_stderr_and_fails_an_evaluator_of_errors_only(
    stub: StubJudge, tmp_path: Path
) -> None:
    """litellm puts a handler of its own on its loggers (lines below WARNING to stdout, in
    its own format) and logs DEBUG lines through it while it is imported: at
    `--log-level debug` every one of those goes through the monitor's JSON log too, and
    stdout holds only the summary. A judge that answered every record with an error fails
    the replay, naming it; an evaluator that scored them does not."""
    records = tmp_path / "records.jsonl"
    second = RECORD.model_copy(update={"request_id": "r2"})
    records.write_text(RECORD.model_dump_json() + "\n" + second.model_dump_json() + "\n")
    stub.default = Reply(status=500, error="upstream broke")
    judge = {"model": MODEL, "api_base": stub.openai_base, "retries": 0}
    path = _write(tmp_path, judge, [{"name": "groundedness"}, {"name": "f1"}])
    argv = ["--log-level", "debug", "--log-format", "json", "replay", str(records)]
    code, out, err = await _cli(*argv, "--config", str(path))
    assert code == 1, err[-3000:]
    logged = [json.loads(line) for line in err.splitlines()]  # each line one JSON object
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in logged)
    assert any(e["logger"] == "LiteLLM" and e["level"] == "DEBUG" for e in logged), logged
    assert len(stub.received) == 2  # the judge was called for each record, no retries
    lines = out.splitlines()
    assert lines[0] == "2 records evaluated, 0 malformed lines skipped, 0 abandoned", out
    assert lines[1].split()[:2] == ["evaluator", "count"] and set(lines[2]) <= {"-", " "}
    assert "groundedness: all 2 results were errors (the log says why)" in out
    assert "f1: all" not in out  # f1 scored both records
