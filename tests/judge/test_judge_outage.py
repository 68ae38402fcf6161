"""A judge outage through a running `rag-monitor run`: the judge answers 500, then 429,
then too slowly, then garbage, and finally recovers.

The remote judge model is the only test double: `harness/judge_stub.py`, an
OpenAI-compatible HTTP server on 127.0.0.1:0 that this test switches between failing and
healthy. Records arrive over real OTLP/HTTP; litellm, the judge client, the evaluation
stage, the alert engine, /metrics and the results file are the real ones. Time is
compressed: the circuit breaker's cool-down is set to 1 s (instead of 30 s) and retry
backoff to at most 0.1 s before the CLI starts, so an outage of "minutes" — many
open/half-open cycles — fits into a few seconds.

The monitor runs on the wall clock in its own process, so no phase may assume how many
records fit into one cool-down: each phase sends records until the stub has answered at
least one call in that phase's mode (a breaker opened by the phase before refuses calls
until its cool-down passes), and recovery sends records until a verdict comes back.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.judge_stub import Received, Reply, StubJudge
from harness.reliability import MonitorProcess, Trace, export_request, post, trace_ids

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(240)]

MODEL = "openai/judge-stub"
KEY_ENV = "RELIABILITY_TEST_JUDGE_KEY"
SECRET = "sk-reliability-5e1f0a77c3d94b28"
_counter = itertools.count()
# Rounds a phase may take before the test gives up (each round waits for its results).
_MAX_ROUNDS = 100


class Switch:
    """What the stub judge answers right now."""

    def __init__(self) -> None:
        self.mode = "healthy"
        self.served: Counter[str] = Counter()

    def __call__(self, received: Received) -> Reply:
        self.served[self.mode] += 1
        if self.mode == "healthy":
            return Reply(content="The answer is supported.\nScore: 5")
        if self.mode == "500":
            # Providers sometimes echo the key they were given; it must not leak further.
            return Reply(status=500, error=f"upstream failure for key {SECRET}")
        if self.mode == "429":
            return Reply(status=429, error="rate limited", headers={"Retry-After": "0"})
        if self.mode == "slow":
            return Reply(content="Score: 5", delay=1.5)
        return Reply(content="I would rather talk about the weather.")


def _config(stub: StubJudge) -> dict[str, Any]:
    return {
        "judge": {
            "model": MODEL,
            "api_base": stub.openai_base,
            "api_key_env": KEY_ENV,
            "timeout_s": 0.5,
            "retries": 1,
            "cache_size": 0,
            # Minutes of outage compressed into seconds.
            "breaker_cooldown_s": 1.0,
            "backoff_base_s": 0.02,
            "backoff_max_s": 0.1,
        },
        "trace_assembly": {"idle_timeout_s": 30},
        "evaluators": [
            {"name": "local_groundedness"},
            {"name": "local_relevance"},
            {"name": "groundedness"},
        ],
        "alerts": {
            "evaluation_interval_s": 0.5,
            "rules": [
                {
                    "name": "judge-grounded",
                    "evaluator": "groundedness",
                    "max_defect_rate": 0.1,
                    "min_samples": 5,
                    "window": "5m",
                }
            ],
        },
    }


async def _send(mon: MonitorProcess, n: int) -> set[str]:
    """`n` records, one OTLP/HTTP request each, with distinct text (no cache hits)."""
    sent = set()
    for trace_id in trace_ids(next(_counter), n):
        k = next(_counter)
        trace = Trace(trace_id=trace_id, query=f"What is the boiling point of water ({k})?")
        reply = await asyncio.to_thread(post, mon.http_port, export_request([trace]))
        assert reply.status == 200, reply
        sent.add(trace_id.hex())
        await asyncio.sleep(0.05)
    return sent


async def _results(mon: MonitorProcess, ids: set[str]) -> list[dict[str, Any]]:
    def done() -> bool:
        return ids <= {line["trace_id"] for line in mon.results_lines()}

    await asyncio.to_thread(mon.wait_for, done, 60, f"{len(ids)} results lines")
    return [line for line in mon.results_lines() if line["trace_id"] in ids]


def _local_ok(line: dict[str, Any]) -> bool:
    results = line["results"]
    return all(
        results[name]["error"] is None and results[name]["passed"] is not None
        for name in ("local_groundedness", "local_relevance")
    )


async def test_judge_outage_keeps_local_evaluators_counts_no_defects_and_recovers(
    tmp_path: Path,
) -> None:
    switch = Switch()
    async with StubJudge(default=switch) as stub:
        mon = MonitorProcess(tmp_path, _config(stub), env={KEY_ENV: SECRET})
        await asyncio.to_thread(mon.start)
        try:
            # litellm is imported on the first judge call (seconds): warm up until a verdict.
            for _ in range(30):
                (warm,) = await _results(mon, await _send(mon, 1))
                if warm["results"]["groundedness"]["passed"] is True:
                    break
            else:
                raise AssertionError(f"the judge never answered:\n{mon.log()[-3000:]}")
            errors_before = mon.value(
                "rag_monitor_evaluations_total", evaluator="groundedness", outcome="error"
            )
            healthy = await _results(mon, await _send(mon, 6))
            assert all(line["results"]["groundedness"]["passed"] is True for line in healthy)
            assert all(_local_ok(line) for line in healthy)

            outage_sent: set[str] = set()
            outage_lines: list[dict[str, Any]] = []
            circuit_seen = False
            for mode in ("500", "429", "slow", "garbage", "500"):
                switch.mode = mode
                switch.served[mode] = 0
                for _ in range(_MAX_ROUNDS):
                    sent = await _send(mon, 4)
                    outage_sent |= sent
                    outage_lines += await _results(mon, sent)
                    circuit_seen |= mon.value("rag_monitor_judge_circuit_open", model=MODEL) == 1
                    if switch.served[mode] > 0:
                        break
                else:
                    raise AssertionError(f"no judge call reached the stub in mode {mode}")
            # Local evaluators kept scoring every record during the outage.
            assert {line["trace_id"] for line in outage_lines} == outage_sent
            assert len(outage_lines) == len(outage_sent)
            assert all(_local_ok(line) for line in outage_lines)
            # Every judge result in the outage is an error, never a verdict.
            for line in outage_lines:
                judge = line["results"]["groundedness"]
                assert judge["error"] and judge["passed"] is None, judge
            errors = {line["results"]["groundedness"]["error"] for line in outage_lines}
            assert any("paused" in e for e in errors), errors  # the breaker refused calls
            assert circuit_seen
            for outcome in ("error", "rate_limited", "timeout", "circuit_open"):
                assert mon.value("rag_monitor_judge_requests_total", outcome=outcome) > 0, outcome
            # No defect was counted from an error; the alert never fired.
            assert (
                mon.value("rag_monitor_evaluations_total", evaluator="groundedness", outcome="fail")
                == 0
            )
            assert mon.value(
                "rag_monitor_evaluations_total", evaluator="groundedness", outcome="error"
            ) == errors_before + len(outage_lines)
            assert mon.value("rag_monitor_alert_firing", rule="judge-grounded") == 0
            assert mon.value("rag_monitor_defect_rate", rule="judge-grounded") == 0

            # The judge comes back: after at most one cool-down a probe gets a verdict,
            # the breaker closes and every later record gets one too.
            switch.mode = "healthy"
            for _ in range(_MAX_ROUNDS):
                (probe,) = await _results(mon, await _send(mon, 1))
                if probe["results"]["groundedness"]["passed"] is True:
                    break
            else:
                raise AssertionError(f"the judge never recovered:\n{mon.log()[-3000:]}")
            recovered = await _results(mon, await _send(mon, 4))
            passed = [line["results"]["groundedness"]["passed"] for line in recovered]
            assert passed == [True] * 4, passed
            assert mon.value("rag_monitor_judge_circuit_open", model=MODEL) == 0
            assert (
                mon.value("rag_monitor_evaluations_total", evaluator="groundedness", outcome="fail")
                == 0
            )
            assert "circuit closed" in mon.log()
            metrics = mon.metrics_text()
        finally:
            code = await asyncio.to_thread(mon.stop)
        assert code == 0, mon.log()
        # The key the provider echoed never left the judge client.
        exposed = mon.log() + mon.results.read_text() + metrics
        assert SECRET not in exposed
