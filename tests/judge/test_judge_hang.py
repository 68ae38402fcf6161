"""A judge that hangs is said from its first timeout, not when its circuit breaker opens:
the judge client logs an attempt that timed out (once a minute per model), and the
evaluation stage an evaluation past its deadline (once per 10 s per evaluator); each line
is one line. The hanging judge is a scripted server (`harness/judge_stub.py`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from harness.judge_stub import Reply, StubJudge
from monitor.telemetry import Telemetry
from tests.evaluation.test_evaluation_stage import ScriptedEvaluator, _put, _rec, _stage
from tests.judge.test_judge_evaluators import MODEL, RECORD, Harness


@pytest_asyncio.fixture
async def stub() -> AsyncIterator[StubJudge]:
    async with StubJudge() as server:
        yield server


async def test_the_first_timed_out_call_is_logged_once_and_on_one_line(
    stub: StubJudge, caplog: pytest.LogCaptureFixture
) -> None:
    # One answered call first: litellm sets itself up on its first call, and a timeout that
    # cut that short would test litellm on a loaded machine (as test_judge_client does).
    assert (await Harness(stub).evaluator("fluency").evaluate(RECORD)).score == 4
    stub.default = Reply(delay=600)  # cut short when the stub stops
    h = Harness(stub, judge={"timeout_s": 0.2, "retries": 2, "breaker_failures": 100})
    with caplog.at_level(logging.WARNING, logger="monitor.judge"):
        result = await h.evaluator("groundedness").evaluate(RECORD)
    assert result.error is not None and result.error.startswith("timeout: ")
    said = [r.getMessage() for r in caplog.records if "timeout" in r.getMessage()]
    # Three attempts timed out; the first is said, the others held back (a minute).
    assert said == [f"judge {MODEL}: timeout: no answer within 0.2s (judge.timeout_s)"], said
    assert h.metric("judge_requests_total", model=MODEL, outcome="timeout") == 3
    assert h.metric("judge_circuit_open", model=MODEL) == 0  # no breaker needed to say it


async def test_an_evaluation_past_its_deadline_is_logged_from_the_first(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    hanging = ScriptedEvaluator("groundedness", kind="judge", delay=60)
    stage, summary = _stage(telemetry, [hanging], timeout=0.2, workers=1)
    await stage.start()
    with caplog.at_level(logging.WARNING, logger="monitor.processors.evaluation"):
        for i in range(3):
            await _put(stage, _rec(i))
        await stage.shutdown(30)
    said = [r.getMessage() for r in caplog.records if "timed out" in r.getMessage()]
    assert said[0] == (
        "evaluator groundedness timed out on record r0: no verdict within 0.2s "
        "(pipeline.evaluation_timeout_s, or the judge's own: judge.timeout_s for each of "
        "1 + judge.retries attempts, judge.backoff_max_s between them, twice)"
    ), said
    assert len(said) == 1  # the next two within 10 s are held back
    assert summary.totals["groundedness"].errors == 3
