"""The judge client under failure: retries, timeouts, the circuit breaker, the verdict
cache, unreadable answers, budgets, redaction, cost accounting and secret handling.

The remote judge model is the only test double: `harness/judge_stub.py` serves the OpenAI
chat-completions protocol on 127.0.0.1:0 with scripted answers (slow, 429, 500,
malformed, empty, fenced JSON); litellm's real HTTP path carries every call.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
import pytest_asyncio

from harness.judge_stub import Reply, StubJudge
from monitor.component import Evaluated, SampledRecord
from monitor.config import ConfigError
from monitor.evaluators.factory import BuildContext
from monitor.judge.client import FORMAT_REMINDER, JudgeClient
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation import EvaluationStage
from monitor.results import EvalResult
from tests.judge.test_judge_evaluators import KEY_ENV, MODEL, RECORD, SECRET, Harness

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def stub() -> AsyncIterator[StubJudge]:
    async with StubJudge() as server:
        yield server


async def test_retries_429_and_500_with_backoff_then_succeeds(stub: StubJudge) -> None:
    h = Harness(stub, judge={"retries": 3})
    stub.queue(
        Reply(status=429, error="slow down", headers={"Retry-After": "0.05"}),
        Reply(status=500, error="upstream broke"),
        Reply(content="Score: 5"),
    )
    result = await h.evaluator("groundedness").evaluate(RECORD)
    assert (result.score, result.passed, result.error) == (5, True, None)
    assert len(stub.received) == 3
    assert h.metric("judge_requests_total", model=MODEL, outcome="rate_limited") == 1
    assert h.metric("judge_requests_total", model=MODEL, outcome="error") == 1
    assert h.metric("judge_requests_total", model=MODEL, outcome="ok") == 1
    assert h.metric("judge_retries_total", model=MODEL, reason="rate_limited") == 1
    assert h.metric("judge_retries_total", model=MODEL, reason="error") == 1
    # The 429's Retry-After is waited for; the 500 backs off with full jitter below
    # backoff_base_s · 2 (the second retry).
    assert h.waits[0] == 0.05 and 0 <= h.waits[1] <= 0.02 and len(h.waits) == 2


async def test_retry_after_as_an_http_date_is_honoured_up_to_the_cap(stub: StubJudge) -> None:
    h = Harness(stub, judge={"retries": 2, "backoff_max_s": 20})
    soon = format_datetime(datetime.fromtimestamp(h.wall, UTC) + timedelta(seconds=8), usegmt=True)
    stub.queue(
        Reply(status=429, error="slow down", headers={"Retry-After": soon}),
        Reply(status=429, error="slow down", headers={"Retry-After": "3600"}),
        Reply(content="Score: 5"),
    )
    result = await h.evaluator("groundedness").evaluate(RECORD)
    assert result.score == 5
    assert h.waits[0] == 8  # the date, measured from our time of day
    assert h.waits[1] == 20  # backoff_max_s caps what a server can ask for


async def test_unreadable_retry_after_is_counted_and_backed_off_on_our_own(
    stub: StubJudge, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness(stub, judge={"retries": 1})
    stub.queue(
        Reply(status=429, error="slow down", headers={"Retry-After": "whenever"}),
        Reply(content="Score: 5"),
    )
    with caplog.at_level(logging.WARNING, logger="monitor.judge.client"):
        result = await h.evaluator("groundedness").evaluate(RECORD)
    assert result.score == 5
    assert h.metric("retry_after_invalid_total", client="judge") == 1
    assert 0 <= h.waits[0] <= 0.01  # the first retry's full-jitter backoff
    assert "unreadable Retry-After 'whenever'" in caplog.text


async def test_retries_run_out_into_an_error_outcome(stub: StubJudge) -> None:
    h = Harness(stub, judge={"retries": 1})
    stub.default = Reply(status=503, error="unavailable")
    result = await h.evaluator("relevancy").evaluate(RECORD)
    assert result.outcome == "error" and result.passed is None
    assert result.error is not None and result.error.startswith("error:")
    assert len(stub.received) == 2
    assert h.metric("judge_requests_total", model=MODEL, outcome="error") == 2


async def test_client_errors_are_not_retried(stub: StubJudge) -> None:
    h = Harness(stub, judge={"retries": 3})
    stub.default = Reply(status=400, error="bad request")
    result = await h.evaluator("groundedness").evaluate(RECORD)
    assert result.outcome == "error"
    assert len(stub.received) == 1


async def test_slow_judge_times_out(stub: StubJudge) -> None:
    # One answered call first, without the short timeout: litellm sets itself up (for the
    # whole process) on its first call, and a timeout that cut that short would test
    # litellm on a loaded machine, not the judge client.
    assert (await Harness(stub).evaluator("fluency").evaluate(RECORD)).score == 4
    h = Harness(stub, judge={"timeout_s": 0.3, "retries": 1})
    stub.default = Reply(content="Score: 5", delay=60)  # never answers: the stub cuts it at stop
    result = await h.evaluator("groundedness").evaluate(RECORD)
    assert result.outcome == "error"
    assert result.error is not None and result.error.startswith("timeout")
    assert h.metric("judge_requests_total", model=MODEL, outcome="timeout") == 2
    assert h.metric("judge_retries_total", model=MODEL, reason="timeout") == 1


async def test_circuit_breaker_opens_then_probes_after_cooldown(stub: StubJudge) -> None:
    h = Harness(stub)  # breaker_threshold=3, cooldown 30 s on a fake clock, retries=0
    evaluator = h.evaluator("groundedness")
    stub.default = Reply(status=500)
    for _ in range(3):
        assert (await evaluator.evaluate(RECORD)).outcome == "error"
    assert h.metric("judge_circuit_open", model=MODEL) == 1
    # Open: no request reaches the model, the outcome says why.
    stopped = await evaluator.evaluate(RECORD)
    assert stopped.error is not None and stopped.error.startswith("circuit_open")
    assert stopped.passed is None
    assert len(stub.received) == 3
    assert h.metric("judge_requests_total", model=MODEL, outcome="circuit_open") == 1
    # After the cool-down one probe goes through; success closes the breaker.
    h.clock += 31
    stub.default = Reply(content="Score: 4")
    assert (await evaluator.evaluate(RECORD)).score == 4
    assert h.metric("judge_circuit_open", model=MODEL) == 0
    assert (await evaluator.evaluate(RECORD.model_copy(update={"response": "1931."}))).score == 4


async def test_failed_probe_reopens_the_breaker(stub: StubJudge) -> None:
    h = Harness(stub)
    evaluator = h.evaluator("groundedness")
    stub.default = Reply(status=502)
    for _ in range(3):
        await evaluator.evaluate(RECORD)
    h.clock += 31
    error = (await evaluator.evaluate(RECORD)).error
    assert error is not None and error.startswith("error")
    assert len(stub.received) == 4
    error = (await evaluator.evaluate(RECORD)).error
    assert error is not None and error.startswith("circuit_open")
    assert len(stub.received) == 4


async def test_cancelled_probe_does_not_leave_the_breaker_stuck(stub: StubJudge) -> None:
    h = Harness(stub)
    evaluator = h.evaluator("groundedness")
    stub.default = Reply(status=500)
    for _ in range(3):
        await evaluator.evaluate(RECORD)
    h.clock += 31
    stub.default = Reply(content="Score: 4", delay=5)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await evaluator.evaluate(RECORD)
    stub.default = Reply(content="Score: 4")
    assert (await evaluator.evaluate(RECORD)).score == 4


async def test_verdict_cache_hit_sends_nothing_and_costs_nothing(stub: StubJudge) -> None:
    h = Harness(stub)
    evaluator = h.evaluator("groundedness")
    first = await evaluator.evaluate(RECORD)
    second = await evaluator.evaluate(RECORD)
    assert (first.score, second.score) == (4, 4)
    assert len(stub.received) == 1
    assert first.input_tokens == 100 and second.input_tokens == 0 and second.cost == 0
    assert h.metric("judge_cache_lookups_total", result="hit") == 1
    assert h.metric("judge_cache_lookups_total", result="miss") == 1
    # Another prompt version (a config override) or other inputs miss the cache.
    custom = h.evaluator("groundedness", prompt="Rate {{response}} against {{context}}. Score: N")
    assert custom.version != evaluator.version
    await custom.evaluate(RECORD)
    await evaluator.evaluate(RECORD.model_copy(update={"response": "In 1931."}))
    assert len(stub.received) == 3
    # Parts the template does not show are not part of the key.
    fluency = h.evaluator("fluency")
    await fluency.evaluate(RECORD)
    await fluency.evaluate(RECORD.model_copy(update={"retrieved_context": ()}))
    assert len(stub.received) == 4


async def test_identical_calls_in_flight_ask_once(stub: StubJudge) -> None:
    h = Harness(stub)
    stub.default = Reply(content="Score: 2", delay=0.3)
    evaluator = h.evaluator("groundedness")
    results = await asyncio.gather(*(evaluator.evaluate(RECORD) for _ in range(5)))
    assert [r.score for r in results] == [2] * 5
    assert len(stub.received) == 1
    assert h.metric("judge_cache_lookups_total", result="hit") == 4


async def test_waiters_ask_themselves_when_the_first_call_fails(stub: StubJudge) -> None:
    h = Harness(stub)
    stub.queue(Reply(status=400, delay=0.2))
    stub.default = Reply(content="Score: 5")
    evaluator = h.evaluator("groundedness")
    first, second = await asyncio.gather(evaluator.evaluate(RECORD), evaluator.evaluate(RECORD))
    assert first.outcome == "error"
    assert second.score == 5


async def test_cache_is_bounded(stub: StubJudge) -> None:
    h = Harness(stub, judge={"cache_size": 2})
    evaluator = h.evaluator("fluency")
    records = [RECORD.model_copy(update={"response": f"Answer {i}."}) for i in range(3)]
    for record in records:
        await evaluator.evaluate(record)
    await evaluator.evaluate(records[0])  # evicted as least recently used
    await evaluator.evaluate(records[2])  # still cached
    assert len(stub.received) == 4


async def test_unreadable_answer_gets_one_format_reminder(stub: StubJudge) -> None:
    h = Harness(stub)
    stub.queue(Reply(content="I think it is quite good.", prompt_tokens=100, completion_tokens=7))
    stub.queue(Reply(content="Score: 4", prompt_tokens=130, completion_tokens=3))
    result = await h.evaluator("groundedness").evaluate(RECORD)
    assert (result.score, result.error) == (4, None)
    assert (result.input_tokens, result.output_tokens) == (230, 10)
    follow_up = stub.received[1].body["messages"]
    assert follow_up[-2] == {"role": "assistant", "content": "I think it is quite good."}
    assert follow_up[-1]["content"].startswith(FORMAT_REMINDER.split("{")[0])
    assert h.metric("judge_retries_total", model=MODEL, reason="unparseable") == 1


@pytest.mark.parametrize(
    "answers", [("", ""), ("great answer", "still great"), ("{not json", "```json\n{]```")]
)
async def test_unreadable_twice_is_an_error_never_a_verdict(
    stub: StubJudge, answers: tuple[str, str]
) -> None:
    h = Harness(stub)
    stub.queue(*answers)
    result = await h.evaluator("faithfulness").evaluate(RECORD)
    assert result.outcome == "error" and result.passed is None and result.severity is None
    assert result.error is not None and result.error.startswith("parse:")
    assert len(stub.received) == 2
    # An error is not cached: the next call asks again.
    stub.queue('{"score": 1, "feedback": "ok"}')
    assert (await h.evaluator("faithfulness").evaluate(RECORD)).passed is True


async def test_unreadable_safety_answer_is_not_a_defect(stub: StubJudge) -> None:
    h = Harness(stub)
    stub.queue("violent!", "very violent!")
    result = await h.evaluator("violence").evaluate(RECORD)
    assert result.outcome == "error" and result.safety is None and result.severity is None


async def test_answer_cut_off_at_max_tokens_is_truncated(stub: StubJudge) -> None:
    h = Harness(stub)
    stub.queue(Reply(content='{"REASONING": "the answer says', finish_reason="length"))
    result = await h.evaluator("pass_fail_faithfulness").evaluate(RECORD)
    assert result.error is not None and result.error.startswith("truncated")
    assert len(stub.received) == 1


async def test_answer_far_past_max_tokens_is_refused_unparsed(stub: StubJudge) -> None:
    """A server that ignores max_tokens must not make the parsers chew megabytes."""
    h = Harness(stub)
    stub.queue(Reply(content="{ " * 200_000 + "Score: 5"))
    result = await h.evaluator("fluency").evaluate(RECORD)
    assert result.outcome == "error" and result.error is not None
    assert "ignores max_tokens" in result.error
    assert len(stub.received) == 1  # no format reminder carrying the huge answer back


async def test_redaction_before_text_leaves_the_process(stub: StubJudge) -> None:
    h = Harness(stub, redaction={"enabled": True, "patterns": [r"ACCT-\d{6}"]})
    record = RECORD.model_copy(
        update={
            "query": "My card 4111 1111 1111 1111 was charged, account ACCT-123456. Why?",
            "response": "We emailed jane.doe@example.com and will call +1 415-555-0199.",
        }
    )
    await h.evaluator("relevance").evaluate(record)
    sent = json.dumps(stub.received[0].body)
    for secret in ("4111 1111 1111 1111", "ACCT-123456", "jane.doe@example.com", "415-555-0199"):
        assert secret not in sent
    for kind in ("card", "custom_0", "email", "phone"):
        assert f"[REDACTED:{kind}]" in sent
        assert h.metric("redactions_total", kind=kind) == 1
    assert "1931" in sent  # ordinary numbers are left alone


async def test_redaction_off_by_default(stub: StubJudge) -> None:
    h = Harness(stub)
    await h.evaluator("fluency").evaluate(RECORD.model_copy(update={"response": "Mail a@b.org"}))
    assert "a@b.org" in json.dumps(stub.received[0].body)


async def test_api_key_goes_to_the_provider_only(
    stub: StubJudge, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness(stub)
    await h.evaluator("fluency").evaluate(RECORD)
    assert stub.received[0].headers["Authorization"] == f"Bearer {SECRET}"
    stub.default = Reply(status=401, error=f"Incorrect API key provided: {SECRET}")
    with caplog.at_level(logging.DEBUG):
        result = await h.evaluator("coherence").evaluate(RECORD)
    assert result.outcome == "error"
    assert SECRET not in json.dumps(result.as_json())
    assert SECRET[-8:] not in (result.error or "")
    assert SECRET not in caplog.text
    assert SECRET not in repr(h.client.__dict__.get("_config"))


async def test_missing_api_key_env_is_a_config_error(stub: StubJudge) -> None:
    h = Harness(stub)
    with pytest.raises(ConfigError, match=f"judge.api_key_env: environment variable {KEY_ENV}"):
        JudgeClient(h.config.judge, h.config.redaction, h.telemetry, environ={})


async def test_cost_from_litellm_for_known_models_and_config_prices_otherwise(
    stub: StubJudge,
) -> None:
    known = "openai/gpt-4o-mini"
    unknown = "openai/in-house-judge"
    h = Harness(stub, judge={"prices": {unknown: {"input": 2.0, "output": 10.0}}})
    stub.default = Reply(content="Score: 4", prompt_tokens=1000, completion_tokens=100)
    priced = await h.evaluator("fluency", model=unknown).evaluate(RECORD)
    assert priced.cost == pytest.approx((1000 * 2.0 + 100 * 10.0) / 1e6)
    by_litellm = await h.evaluator("coherence", model=known).evaluate(RECORD)
    import litellm  # loaded by the client by now

    per_token_in = litellm.model_cost["gpt-4o-mini"]["input_cost_per_token"]
    per_token_out = litellm.model_cost["gpt-4o-mini"]["output_cost_per_token"]
    assert by_litellm.cost == pytest.approx(1000 * per_token_in + 100 * per_token_out)
    free = await h.evaluator("relevance").evaluate(RECORD)  # unknown model, no price
    assert free.cost == 0 and free.input_tokens == 1000
    assert h.metric("judge_cost_usd_total", model=unknown) == pytest.approx(priced.cost)
    assert h.metric("judge_cost_usd_total", model=known) == pytest.approx(by_litellm.cost)
    assert h.metric("judge_tokens_total", model=known, direction="output") == 100


async def test_concurrency_is_bounded(stub: StubJudge) -> None:
    h = Harness(stub, judge={"max_concurrency": 3})
    stub.default = Reply(content="Score: 3", delay=0.2)
    evaluator = h.evaluator("fluency")
    records = [RECORD.model_copy(update={"response": f"Answer number {i}."}) for i in range(9)]
    results = await asyncio.gather(*(evaluator.evaluate(r) for r in records))
    assert all(r.score == 3 for r in results)
    assert stub.max_in_flight == 3


class _Collect:
    def __init__(self) -> None:
        self.items: list[dict[str, EvalResult]] = []

    async def start(self) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> None:
        self.items.extend(dict(evaluated.results) for evaluated in batch)

    async def shutdown(self, deadline_s: float) -> None:
        return None


async def test_budget_exhaustion_skips_judges_and_keeps_local_evaluators(stub: StubJudge) -> None:
    h = Harness(
        stub,
        budget={"max_judge_tokens_per_hour": 150},
        evaluators=[{"name": "groundedness"}, {"name": "f1"}],
    )
    stub.default = Reply(content="Score: 4", prompt_tokens=100, completion_tokens=10)
    sink = _Collect()
    pairs = [(h.evaluator(e.name), e) for e in h.config.evaluators]
    stage = EvaluationStage(
        pairs,
        BudgetGate(h.config.budget),
        [sink],
        h.telemetry,
        workers=1,
    )
    await stage.start()
    for i in range(5):
        record = RECORD.model_copy(update={"request_id": f"r{i}", "response": f"In 1931 ({i})."})
        sampled = frozenset(e.name for e in h.config.evaluators)
        await stage.put_many([SampledRecord(record, "test", sampled)])
    await stage.shutdown(10)
    # 110 tokens per judge call: the second call starts under 150, the third does not.
    assert len(stub.received) == 2
    assert [sorted(r) for r in sink.items] == [["f1", "groundedness"]] * 2 + [["f1"]] * 3
    decisions = {
        d: h.metric(
            "sampling_decisions_total", service="unknown", evaluator="groundedness", decision=d
        )
        for d in ("sampled", "over_budget")
    }
    assert decisions == {"sampled": 2, "over_budget": 3}


async def test_self_hosted_server_without_a_key(
    stub: StubJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    h = Harness(stub)
    client = JudgeClient(
        h.config.judge.model_copy(update={"api_key_env": None}), h.config.redaction, h.telemetry
    )
    h.context = BuildContext(judge=client, judge_model=MODEL)
    result = await h.evaluator("fluency").evaluate(RECORD)
    assert result.score == 4
    assert stub.received[0].headers["Authorization"] == "Bearer no-key"
