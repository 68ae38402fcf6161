"""`trustworthiness_tlm` end to end against a real model: SmolLM2-135M-Instruct served by
llama.cpp (`harness/llama_server.py`, one thread, one slot).

A 135M model judges badly; what this shows is the plumbing: every drawn answer and reflection
call of a record reaches the real server, returns (with the server's logprobs, which
llama.cpp sends) and is read or counted as an error; the record gets a score or an `error`
result, never a pass by default; tokens and cost are accounted, and the budget admits a
record's calls together. Runtime is bounded by the call count (the `low` and `medium`
presets: 3 and 6 calls of a few hundred prompt tokens), not by timing.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.llama_server import MODEL, available, llama_server
from harness.wait import wait_until_async
from monitor.component import Evaluated, ResultSink, SampledRecord
from monitor.config import Budget, Config, EvaluatorConfig
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.evaluators.tlm import TrustworthinessTlmEvaluator
from monitor.judge.client import JudgeClient
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation import EvaluationStage
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry

ERROR_KINDS = ("parse:", "truncated:", "error:", "timeout:")
RECORD = {
    "request_id": "judged",
    "query": "When did the Example Town bridge open?",
    "retrieved_context": [
        {"content": "The Example Town bridge over the river opened in 1931."},
        {"content": "Example Town has about 12,000 inhabitants."},
    ],
    "response": "It opened in 1931.",
}
OVER_BUDGET = {**RECORD, "request_id": "over-budget", "response": "The bridge opened in 1967."}
JUDGE = {
    "model": MODEL,
    "max_concurrency": 1,  # the server has one slot
    "retries": 0,
    "timeout_s": 120,
    "structured_output": "off",
    "max_output_tokens": 48,
    "prices": {MODEL: {"input": 1.0, "output": 2.0}},
}


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


def check_result(result: dict[str, Any] | EvalResult) -> None:
    """A score in 0..1 with a verdict, or an error of a known kind and no verdict."""
    r = result if isinstance(result, dict) else result.as_json()
    if r["error"] is None:
        assert r["score"] is not None and 0 <= r["score"] <= 1, r
        assert r["passed"] is (r["score"] >= 0.5), r
        assert r["explanation"].startswith("consistency "), r
    else:
        assert "calls failed:" in r["error"], r
        assert any(kind in r["error"] for kind in ERROR_KINDS), r
        assert r["passed"] is None and r["score"] is None, r


class Collect:
    def __init__(self) -> None:
        self.results: dict[str, EvalResult] = {}

    async def start(self) -> None: ...

    def emit(self, batch: Sequence[Evaluated]) -> None:
        for evaluated in batch:
            self.results[evaluated.record.request_id] = evaluated.results["trustworthiness_tlm"]

    async def shutdown(self, deadline_s: float) -> None: ...


def _completed(stage: EvaluationStage, n: int) -> bool:
    return stage.completed >= n


@pytest.mark.timeout(600)
async def test_every_call_is_made_and_read_or_counted(model_server: str) -> None:
    config = Config.model_validate(
        {
            "judge": {**JUDGE, "api_base": model_server},
            "evaluators": [{"name": "trustworthiness_tlm"}],
        }
    )
    telemetry = create_telemetry()
    client = JudgeClient(config.judge, config.redaction, telemetry, models=[MODEL])
    context = BuildContext(judge=client, judge_model=config.judge.model)
    entry = EvaluatorConfig.model_validate(
        {"name": "trustworthiness_tlm", "tlm": {"preset": "medium"}}
    )
    evaluator = build(entry, context)
    assert isinstance(evaluator, TrustworthinessTlmEvaluator) and evaluator.calls_per_record == 6
    sink = Collect()
    sinks: list[ResultSink] = [sink]
    stage = EvaluationStage(
        [(evaluator, config.evaluators[0])],
        BudgetGate(Budget(max_judge_tokens_per_hour=1)),  # spent by the first record
        sinks,
        telemetry,
        workers=1,
        evaluation_timeout_s=600,
    )

    def metric(name: str, **labels: str) -> float:
        return telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0

    def answered() -> float:
        return sum(
            metric("judge_answers_total", model=MODEL, format="free_form", result=r)
            for r in ("valid", "fallback", "repaired", "parse", "truncated")
        )

    def failed_requests() -> float:
        return sum(
            metric("judge_requests_total", model=MODEL, outcome=o)
            for o in ("error", "timeout", "rate_limited", "circuit_open")
        )

    await stage.start()
    for i, raw in enumerate((RECORD, OVER_BUDGET), 1):
        record = RagRecord.model_validate(raw)
        sampled = SampledRecord(record, "svc", frozenset({"trustworthiness_tlm"}))
        assert await stage.put_many([sampled]) == 1
        await wait_until_async(partial(_completed, stage, i), 590, f"record {i} done")
    await stage.shutdown(5)

    # The first record: each of its six calls ended as an answer (read, or unreadable and
    # counted) or as a failed request; none is missing and none was added.
    assert answered() + failed_requests() == 6
    result = sink.results["judged"]
    check_result(result)
    ok_requests = metric("judge_requests_total", model=MODEL, outcome="ok")
    assert ok_requests >= answered()  # a format follow-up is one more request
    assert result.input_tokens == metric("judge_tokens_total", model=MODEL, direction="input") > 0
    assert (
        result.cost == pytest.approx(metric("judge_cost_usd_total", model=MODEL))
        and result.cost > 0
    )
    # The second record is skipped whole: the first record's tokens used the budget up.
    assert "over-budget" not in sink.results
    decision = metric(
        "sampling_decisions_total",
        service="unknown",
        evaluator="trustworthiness_tlm",
        decision="over_budget",
    )
    assert decision == 1


@pytest.mark.timeout(600)
def test_replay_scores_a_record_with_the_low_preset(
    model_server: str, cli: list[str], tmp_path: Path
) -> None:
    """The config path: `evaluators[].tlm` reaches the evaluator through `rag-monitor replay`,
    and the results line holds a score or an error."""
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(RECORD) + "\n")
    config = {
        "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
        "judge": {**JUDGE, "api_base": model_server},
        "pipeline": {"workers": 1, "evaluation_timeout_s": 600, "shutdown_timeout_s": 600},
        "evaluators": [
            {
                "name": "trustworthiness_tlm",
                "tlm": {"preset": "low", "draws": 2},
                "threshold": 0.5,
            }
        ],
    }
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    output = tmp_path / "results.jsonl"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(
        [*cli, "replay", str(records), "--config", str(config_path), "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=540,
        env=env,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    line = json.loads(output.read_text().splitlines()[0])
    result = line["results"]["trustworthiness_tlm"]
    # One record: an error result is all the evaluator returned, which fails the replay.
    expected = 0 if result["error"] is None else 1
    assert proc.returncode == expected, f"replay:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    check_result(result)
    # Two drawn answers and no reflection (the low preset with draws: 2): two calls either way.
    if result["error"] is None:
        assert "of 2 drawn answers disagree" in result["explanation"], result
        assert "self-reflection" not in result["explanation"], result
    else:
        assert " of 2 calls failed:" in result["error"], result
