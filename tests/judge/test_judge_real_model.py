"""Every LLM judge against a real model, end to end through `rag-monitor replay`
(`--log-format json`: every log line a JSON object on stderr, stdout only the summary).

The model is SmolLM2-135M-Instruct served by llama.cpp's OpenAI-compatible server
(`harness/llama_server.py`: `xllamacpp`, one thread). It is far too small to judge well; what this
shows is that the real prompts, the structured-output schemas and the tolerant parsers
meet a real model's output and every answer becomes a verdict or a counted error — never
a crash and never a pass by default — and that tokens and cost are accounted.

Runtime is bounded by design, not by timing: one short record is judged, every judge
answers in at most `MAX_OUTPUT` tokens, retries are off and an unreadable answer gets at
most one follow-up, so at most 2 × 21 calls of a few hundred prompt tokens each reach the
model. The judges are split in two replays that share the server: one asks for structured
output (`judge.structured_output: on`), the other for free-form answers (`off`), so both
paths meet the real model and every judge runs once (`bench/judge_real_model.py` runs
every judge in both modes and reports how often the answers parsed).

Accounting: a second record follows the judged one, and the budget allows one token (or
a billionth of a dollar at the configured `judge.prices`): the second record's judges are
skipped as over budget only if the first record's tokens and cost were counted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.llama_server import MODEL, available, llama_server
from monitor.judge.definitions import DEFINITIONS

MAX_OUTPUT = 32
# Alternating within each answer kind, so both modes see score, YES/NO, JSON and safety answers.
STRUCTURED = (
    "groundedness coherence trustworthiness rubric retrieval relevancy context_sufficiency "
    "fact_check faithfulness chunk_relevance hate_unfairness violence"
).split()
FREE_FORM = (
    "relevance fluency similarity answer_correctness jailbreak answer_relevancy "
    "pass_fail_faithfulness sexual self_harm"
).split()
ERROR_KINDS = ("parse:", "truncated:", "error:", "timeout:")
RANGES = {
    "score5": (1, 5),
    "rubric": (1, 5),
    "retrieval": (1, 5),
    "yes_no": (0, 1),
    "pass_fail": (0, 1),
    "unit": (0, 1),
    "chunks": (0, 1),
    "severity": (0, 7),
}

JUDGED = {
    "request_id": "judged",
    "query": "When did the Example Town bridge open?",
    "retrieved_context": [
        {"content": "The Example Town bridge over the river opened in 1931."},
        {"content": "Example Town has about 12,000 inhabitants."},
    ],
    "response": "It opened in 1931.",
    "expected_response": "The bridge opened in 1931.",
}
OVER_BUDGET = {**JUDGED, "request_id": "over-budget", "response": "The bridge opened in 1931."}
ZH_JUDGED = {
    "request_id": "judged",
    "query": "示例镇的大桥是哪一年开通的？",
    "retrieved_context": [
        {"content": "示例镇横跨河流的大桥于1931年开通。"},
        {"content": "示例镇约有一万二千名居民。"},
    ],
    "response": "大桥于1931年开通。",
    "expected_response": "那座桥在1931年开通。",
}
# The Chinese templates the small model meets with structured output on (the schema
# constrains its answer; free-form Chinese answers are tests/judge/test_judge_zh.py's).
ZH_STRUCTURED = "fact_check relevancy groundedness faithfulness".split()


@pytest.fixture(scope="module")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    missing = available()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the real-model judge test: {missing}")
        pytest.skip(missing)
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with llama_server(log, threads=1, ctx=2048, parallel=1) as base:
        yield base


def _replay(
    cli: list[str],
    tmp: Path,
    base: str,
    mode: str,
    judges: list[str],
    budget: dict[str, Any],
    sent: tuple[dict[str, Any], ...] = (JUDGED, OVER_BUDGET),
    language: str | None = None,
) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, Any]]]:
    records = tmp / f"records-{mode}.jsonl"
    records.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sent), encoding="utf-8"
    )
    evaluators: list[dict[str, Any]] = [
        {"name": name} if language is None else {"name": name, "language": language}
        for name in judges
    ]
    for entry in evaluators:
        if entry["name"] == "rubric":
            entry["rubric"] = "5 = answers from the context and names the source; 1 = wrong"
    config = {
        "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
        "judge": {
            "model": MODEL,
            "api_base": base,
            "structured_output": mode,
            "max_output_tokens": MAX_OUTPUT,
            "max_concurrency": 1,  # the server has one slot
            "retries": 0,
            "timeout_s": 120,
            "prices": {MODEL: {"input": 1.0, "output": 2.0}},
        },
        "budget": budget,
        # One record at a time; no evaluation or drain deadline while judges queue for the
        # server's one slot (replay drains the pipeline within shutdown_timeout_s).
        "pipeline": {"workers": 1, "evaluation_timeout_s": 600, "shutdown_timeout_s": 600},
        "evaluators": [*evaluators, {"name": "f1"}],
    }
    config_path = tmp / f"config-{mode}.yaml"
    config_path.write_text(yaml.safe_dump(config))
    output = tmp / f"results-{mode}.jsonl"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(
        [
            *cli,
            *("--log-format", "json", "replay", str(records)),
            *("--config", str(config_path), "--output", str(output)),
        ],
        capture_output=True,
        text=True,
        timeout=540,
        env=env,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    # Every log line (the monitor's, litellm's, the HTTP stack's) goes through the monitor's
    # log: each stderr line is a JSON object, the judge's among them.
    logged = [json.loads(line) for line in proc.stderr.splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in logged)
    assert any(entry["logger"].startswith("monitor.judge") for entry in logged), logged
    assert output.is_file(), f"no results file:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    lines = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    results = {line["request_id"]: line["results"] for line in lines}
    # Each judge judged one record: one whose result is an error returned nothing but
    # errors, which replay's exit status and summary say.
    failed = [name for name in judges if results["judged"][name]["error"] is not None]
    expected = 1 if failed else 0
    assert proc.returncode == expected, f"replay:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    # stdout holds only what replay prints on purpose (litellm on its own writes INFO lines
    # there): the count, the table of every evaluator, where the results went, and a line
    # for each judge that returned only errors.
    head, columns, rule, *rest = proc.stdout.splitlines()
    assert head.endswith(" records evaluated, 0 malformed lines skipped, 0 abandoned"), head
    assert columns.split()[:2] == ["evaluator", "count"] and set(rule) <= {"-", " "}
    said = {f"{name}: all 1 results were errors (the log says why)" for name in failed}
    said.add(f"results: {output}")
    rows = [line for line in rest if line not in said]
    assert sorted(line.split()[0] for line in rows) == sorted([*judges, "f1"]), proc.stdout
    assert len(rest) == len(rows) + len(said), proc.stdout
    return proc, results


def _check_every_answer(
    judges: list[str], results: dict[str, Any], summary: str
) -> tuple[list[str], list[str]]:
    """Each judge's result is a verdict in its range or an error of a known kind, and the
    replay summary counted exactly those errors."""
    verdicts, errors = [], []
    for name in judges:
        result = results[name]
        low, high = RANGES[DEFINITIONS[name].answer]
        if result["error"] is None:
            assert isinstance(result["passed"], bool), (name, result)
            assert result["score"] is not None and low <= result["score"] <= high, (name, result)
            assert 0 <= result["normalized"] <= 1, (name, result)
            assert result["label"], (name, result)
            verdicts.append(name)
        else:
            assert result["error"].startswith(ERROR_KINDS), (name, result)
            assert result["passed"] is None and result["score"] is None, (name, result)
            assert result["severity"] is None, (name, result)
            errors.append(name)
        row = re.search(rf"^{name}\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+(.+)$", summary, re.M)
        assert row is not None, f"{name} missing from the replay summary:\n{summary}"
        counts = (row.group(1), row.group(2), row.group(3).strip())
        assert counts == ("1", "1" if result["error"] else "0", "0"), (name, counts)
    return verdicts, errors


@pytest.mark.timeout(900)
def test_every_judge_against_a_real_model(
    model_server: str, cli: list[str], tmp_path: Path
) -> None:
    assert sorted(STRUCTURED + FREE_FORM) == sorted(DEFINITIONS)

    # Structured output; the token budget (one token) shows tokens were accounted.
    proc, results = _replay(
        cli, tmp_path, model_server, "on", STRUCTURED, {"max_judge_tokens_per_hour": 1}
    )
    verdicts, _ = _check_every_answer(STRUCTURED, results["judged"], proc.stdout)
    # A schema-constrained decoder cannot answer the fact check with anything but Yes/No.
    assert "fact_check" in verdicts, results["judged"]["fact_check"]
    assert set(results["over-budget"]) == {"f1"}, results["over-budget"]

    # Free-form answers through the tolerant parsers; the cost budget shows cost was accounted.
    proc, results = _replay(
        cli, tmp_path, model_server, "off", FREE_FORM, {"max_judge_cost_usd_per_day": 1e-9}
    )
    _check_every_answer(FREE_FORM, results["judged"], proc.stdout)
    assert set(results["over-budget"]) == {"f1"}, results["over-budget"]


@pytest.mark.timeout(900)
def test_chinese_templates_against_a_real_model(
    model_server: str, cli: list[str], tmp_path: Path
) -> None:
    """`language: zh` with structured output: the Chinese prompts meet the real model and
    every answer is a verdict in range or a counted error."""
    proc, results = _replay(
        cli, tmp_path, model_server, "on", ZH_STRUCTURED, {}, (ZH_JUDGED,), language="zh"
    )
    verdicts, _ = _check_every_answer(ZH_STRUCTURED, results["judged"], proc.stdout)
    # A schema-constrained decoder cannot answer the fact check with anything but Yes/No.
    assert "fact_check" in verdicts, results["judged"]["fact_check"]
