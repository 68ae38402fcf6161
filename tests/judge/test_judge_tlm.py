"""`trustworthiness_tlm` (observed consistency + self-reflection) against the scripted
model server: litellm, the judge client, the parsers, the embedded detector and the
evaluation stage run for real; only the remote model is scripted (`harness/judge_stub.py`).

The stub answers by the kind of call it receives (a drawn answer, a reflection, an
agreement question), so concurrent calls get the intended answers whatever order they arrive in.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any

import pytest
import pytest_asyncio

from harness.judge_stub import Received, Reply, StubJudge
from harness.wait import wait_until_async
from monitor.component import Delivery, Evaluated, SampledRecord
from monitor.config import Budget, Config, ConfigError, EvaluatorConfig
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build, check_evaluators
from monitor.evaluators.tlm import TrustworthinessTlmEvaluator
from monitor.judge.client import JudgeClient
from monitor.judge.consistency import detector_agreement, logprob_grade
from monitor.judge.templates import ANSWER_SYSTEM_MESSAGE
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation import EvaluationStage
from monitor.receivers.replay_summary import SummarySink
from monitor.records import ContextDoc, RagRecord
from monitor.service import Service
from monitor.telemetry import Telemetry, create_telemetry

MODEL = "openai/judge-stub"
QUERY = "When did the Example Town bridge open?"
RESPONSE = "It opened in 1931."
RECORD = RagRecord(
    request_id="r1",
    query=QUERY,
    retrieved_context=(
        ContextDoc(content="The Example Town bridge over the river opened in 1931."),
        ContextDoc(content="Example Town has about 12,000 inhabitants."),
    ),
    response=RESPONSE,
)
SAME = "it opened in 1931"  # the response after normalisation: an exact match
OTHER = "It opened in 1967."


def kind(got: Received) -> str:
    messages = got.body.get("messages", [])
    if messages and messages[0].get("content") == ANSWER_SYSTEM_MESSAGE:
        return "draw"
    if "state the same facts" in got.prompt:
        return "agree"
    return "reflect"


class Script:
    """Answers per kind of call, in order within each kind (the last one repeats)."""

    def __init__(self, **answers: Sequence[Reply | str]) -> None:
        self.answers = {
            k: [r if isinstance(r, Reply) else Reply(r) for r in v] for k, v in answers.items()
        }
        self.seen: dict[str, int] = {}

    def __call__(self, got: Received) -> Reply:
        k = kind(got)
        n = self.seen.get(k, 0)
        self.seen[k] = n + 1
        replies = self.answers[k]
        return replies[min(n, len(replies) - 1)]


class Harness:
    def __init__(self, stub: StubJudge, **judge: Any) -> None:
        self.stub = stub
        self.config = Config.model_validate(
            {
                "judge": {
                    "model": MODEL,
                    "api_base": stub.openai_base,
                    "retries": 0,
                    # Generous: a loaded machine must not turn a scripted answer into a
                    # timeout. The timeout test sets its own.
                    "timeout_s": 60,
                    "backoff_base_s": 0.01,
                    "prices": {MODEL: {"input": 1.0, "output": 2.0}},
                    "structured_output": "off",
                    **judge,
                }
            }
        )
        self.telemetry: Telemetry = create_telemetry()
        self.clock = 0.0
        self.client = JudgeClient(
            self.config.judge, self.config.redaction, self.telemetry, clock=lambda: self.clock
        )
        self.context = BuildContext(judge=self.client, judge_model=self.config.judge.model)

    def evaluator(self, threshold: float | None = None, **tlm: Any) -> TrustworthinessTlmEvaluator:
        entry = EvaluatorConfig.model_validate(
            {"name": "trustworthiness_tlm", "threshold": threshold, "tlm": tlm}
        )
        evaluator = build(entry, self.context)
        assert isinstance(evaluator, TrustworthinessTlmEvaluator)
        return evaluator

    def metric(self, name: str, **labels: str) -> float:
        return self.telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0

    def kinds(self) -> list[str]:
        return [kind(r) for r in self.stub.received]


@pytest_asyncio.fixture
async def stub() -> AsyncIterator[StubJudge]:
    async with StubJudge() as server:
        yield server


def agreement(drawn: str) -> float:
    return detector_agreement(QUERY, RESPONSE, drawn).score


# -- exact scores ---------------------------------------------------------------------------


async def test_consistent_drawn_answers_and_a_correct_reflection_score_one(stub: StubJudge) -> None:
    stub.default = Script(
        draw=[SAME, "It opened in 1931", "IT OPENED IN 1931!", SAME, SAME], reflect=["Answer: A"]
    )
    h = Harness(stub)
    result = await h.evaluator(preset="medium").evaluate(RECORD)
    assert result.error is None, result.error
    assert (result.score, result.normalized, result.passed, result.label) == (
        1.0,
        1.0,
        True,
        "pass",
    )
    assert sorted(h.kinds()) == ["draw"] * 5 + ["reflect"]
    # Every call is accounted: 6 × (100 in, 10 out) at $1 / $2 per 1M tokens.
    assert (result.input_tokens, result.output_tokens) == (600, 60)
    assert result.cost == pytest.approx(600e-6 + 120e-6)
    assert h.metric("judge_tokens_total", model=MODEL, direction="input") == 600
    assert h.metric("judge_tokens_total", model=MODEL, direction="output") == 60
    assert h.metric("judge_cost_usd_total", model=MODEL) == pytest.approx(720e-6)
    assert result.explanation is not None
    assert result.explanation.startswith("consistency 1.00: 0 of 5 drawn answers disagree")
    assert "self-reflection 1.00 (correct)" in result.explanation


async def test_answers_are_drawn_hot_and_the_reflection_cold(stub: StubJudge) -> None:
    stub.default = Script(draw=[SAME], reflect=["Answer: A"])
    h = Harness(stub)
    await h.evaluator(preset="medium", temperature=1.3).evaluate(RECORD)
    draws = [r for r in stub.received if kind(r) == "draw"]
    reflections = [r for r in stub.received if kind(r) == "reflect"]
    assert {r.body["temperature"] for r in draws} == {1.3}
    assert reflections[0].body["temperature"] == 0
    # Same question, same context, fenced as data; the drawn answer is not shown the response.
    for r in draws:
        assert "<<<QUESTION " in r.prompt and "<<<CONTEXT " in r.prompt
        assert "opened in 1931." in r.prompt and "<<<RESPONSE" not in r.prompt
    assert "<<<RESPONSE " in reflections[0].prompt


async def test_inconsistent_drawn_answers_score_their_detector_agreement(stub: StubJudge) -> None:
    stub.default = Script(draw=[OTHER], reflect=["The year is wrong.\nAnswer: B"])
    h = Harness(stub)
    result = await h.evaluator(preset="medium").evaluate(RECORD)
    assert result.score == round(0.7 * agreement(OTHER) + 0.3 * 0.0, 4)
    assert agreement(OTHER) < 0.1 and result.passed is False and result.label == "fail"
    assert result.explanation is not None
    assert "5 of 5 drawn answers disagree" in result.explanation
    assert "5 of 5 drawn answers give 1967 where the response says 1931" in result.explanation
    assert "self-reflection 0.00 (incorrect): The year is wrong." in result.explanation


async def test_mixed_drawn_answers_average_their_agreements(stub: StubJudge) -> None:
    stub.default = Script(draw=[SAME, OTHER, SAME, OTHER, SAME], reflect=["(C)"])
    h = Harness(stub, max_concurrency=1)  # one at a time: the script's order is the draws'
    result = await h.evaluator(preset="medium").evaluate(RECORD)
    consistency = (3 * 1.0 + 2 * agreement(OTHER)) / 5
    assert result.score == round(0.7 * consistency + 0.3 * 0.5, 4)
    assert result.explanation is not None
    assert "2 of 5 drawn answers give 1967 where the response says 1931" in result.explanation


async def test_judged_agreement_scores_yes_and_no(stub: StubJudge) -> None:
    drawn = [
        "The bridge was opened to traffic in 1931.",
        "It opened in 1967.",
        "In 1931 the bridge opened.",
    ]
    stub.default = Script(draw=drawn, agree=["Same year.\nAnswer: YES", "Answer: NO", "YES"])
    h = Harness(stub, max_concurrency=1)  # one at a time: the script's order is the calls'
    evaluator = h.evaluator(preset="low", agreement="judge")
    assert evaluator.calls_per_record == 6
    result = await evaluator.evaluate(RECORD)
    # Reflection is off in `low`: the score is the consistency, 0.8 per YES (not an exact match).
    assert result.score == round((0.8 + 0.0 + 0.8) / 3, 4)
    assert h.kinds() == ["draw"] * 3 + ["agree"] * 3
    assert result.input_tokens == 600
    agree = next(r for r in stub.received if kind(r) == "agree")
    assert "<<<REFERENCE " in agree.prompt and drawn[0] in agree.prompt
    assert result.explanation is not None
    assert result.explanation.startswith("consistency 0.53: 1 of 3 drawn answers disagree")


@pytest.mark.parametrize(
    ("answer", "grade"),
    [
        ("A", 1.0),
        ("(C)", 0.5),
        ("Not sure.", 0.5),
        ("Answer: B", 0.0),
        ("It matches the context.\nAnswer: correct", 1.0),
        ("**Answer:** (C) I am not sure", 0.5),
        ("Verdict: incorrect", 0.0),
        ('{"reasoning": "the year differs", "answer": "incorrect"}', 0.0),
        ('```json\n{"answer": "A"}\n```', 1.0),
        ("Incorrect: the context gives another year.", 0.0),
        ("A) Correct, the context says so.", 1.0),
        ("The context backs it.\nCorrect", 1.0),
        ("I'm not sure", 0.5),
        ("not correct", 0.0),
    ],
)
async def test_every_reflection_format_the_parser_accepts(
    stub: StubJudge, answer: str, grade: float
) -> None:
    stub.default = Script(draw=[SAME], reflect=[answer])
    h = Harness(stub)
    result = await h.evaluator(preset="low", draws=1, reflection=True).evaluate(RECORD)
    assert result.score == round(0.7 * 1.0 + 0.3 * grade, 4)
    assert h.metric("judge_answers_total", model=MODEL, format="free_form", result="valid") == 2


async def test_structured_reflection_is_read_from_the_schema(stub: StubJudge) -> None:
    stub.default = Script(
        draw=[SAME], reflect=['{"reasoning": "unsure of it", "answer": "not sure"}']
    )
    h = Harness(stub, structured_output="on")
    result = await h.evaluator(preset="low", draws=1, reflection=True).evaluate(RECORD)
    assert result.score == round(0.7 + 0.3 * 0.5, 4)
    reflection = next(r for r in stub.received if kind(r) == "reflect")
    schema = reflection.body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["answer"]["enum"] == ["correct", "incorrect", "not sure"]
    draw = next(r for r in stub.received if kind(r) == "draw")
    assert "response_format" not in draw.body  # free text has no schema


async def test_an_unreadable_reflection_gets_one_follow_up_then_is_an_error(
    stub: StubJudge,
) -> None:
    stub.default = Script(draw=[SAME], reflect=["It is a bridge.", "Still a bridge."])
    h = Harness(stub)
    result = await h.evaluator(preset="low", draws=2, reflection=True).evaluate(RECORD)
    assert result.outcome == "error" and result.passed is None and result.score is None
    assert result.error is not None
    assert result.error.startswith("1 of 3 calls failed: reflection 1: parse:")
    assert len(stub.received) == 4  # two drawn answers, the reflection and its follow-up
    assert result.input_tokens == 400  # the failed call's tokens still count


# -- logprobs -------------------------------------------------------------------------------


LOGPROB_A = [
    ("Answer", -0.01, []),
    (":", -0.01, []),
    (" A", -0.5108, [(" B", -1.204), (" C", -2.3026), ("Hello", -3.0)]),
]


async def test_logprobs_sharpen_the_reflection_grade(stub: StubJudge) -> None:
    stub.default = Script(draw=[SAME], reflect=[Reply("Answer: A", logprobs=LOGPROB_A)])
    h = Harness(stub)
    result = await h.evaluator(preset="low", draws=1, reflection=True).evaluate(RECORD)
    # P(A) 0.6, P(B) 0.3, P(C) 0.1 → grade 0.6 + 0.05 = 0.65.
    assert result.score == round(0.7 + 0.3 * 0.65, 4)
    assert (
        result.explanation is not None and "weighted by token probabilities" in result.explanation
    )
    reflection = next(r for r in stub.received if kind(r) == "reflect")
    assert reflection.body["logprobs"] is True and reflection.body["top_logprobs"] == 5
    draw = next(r for r in stub.received if kind(r) == "draw")
    assert "logprobs" not in draw.body


async def test_a_server_without_logprobs_gives_the_text_grade(stub: StubJudge) -> None:
    stub.default = Script(draw=[SAME], reflect=["Answer: A"])
    h = Harness(stub)
    result = await h.evaluator(preset="low", draws=1, reflection=True, logprobs=True).evaluate(
        RECORD
    )
    assert result.score == 1.0


async def test_a_server_refusing_logprobs_is_asked_without_them(stub: StubJudge) -> None:
    refusal = Reply(status=400, error="logprobs is not supported by this server")
    stub.default = Script(draw=[SAME], reflect=[refusal, "Answer: A"])
    h = Harness(stub)
    evaluator = h.evaluator(preset="low", draws=1, reflection=True)
    result = await evaluator.evaluate(RECORD)
    assert result.score == 1.0, result.error
    assert h.metric("judge_retries_total", model=MODEL, reason="logprobs_unsupported") == 1
    reflections = [r for r in stub.received if kind(r) == "reflect"]
    assert [("logprobs" in r.body) for r in reflections] == [True, False]
    # The model is asked without logprobs from then on.
    await evaluator.evaluate(RECORD.model_copy(update={"response": "It opened in 1931 AD."}))
    assert "logprobs" not in [r for r in stub.received if kind(r) == "reflect"][-1].body


# -- failures: timeout, breaker, budget -------------------------------------------------------


async def test_a_draw_that_times_out_makes_the_record_an_error(stub: StubJudge) -> None:
    # Answered calls first, without the short timeout: litellm sets itself up (for the
    # whole process) on its first call, which a loaded machine must not turn into a timeout.
    stub.default = Script(draw=[SAME], reflect=["Answer: A"])
    await Harness(stub).evaluator(preset="low", reflection=True).evaluate(RECORD)
    stub.received.clear()
    slow = Reply(SAME, delay=60)  # never answers: the stub cuts it at stop
    stub.default = Script(draw=[SAME, slow, SAME], reflect=["Answer: A"])
    h = Harness(stub, timeout_s=0.5, max_concurrency=1)
    result = await h.evaluator(preset="low", reflection=True).evaluate(RECORD)
    assert result.outcome == "error" and result.passed is None
    assert result.error is not None
    assert result.error.startswith("1 of 4 calls failed: draw 2: timeout:")
    assert h.metric("judge_requests_total", model=MODEL, outcome="timeout") == 1
    assert h.metric("judge_requests_total", model=MODEL, outcome="ok") == 3
    assert result.input_tokens == 300  # the three answered calls are accounted


async def test_a_breaker_that_opens_between_draws_errors_the_record(stub: StubJudge) -> None:
    stub.default = Script(draw=[SAME, Reply(status=500), SAME], reflect=["Answer: A"])
    h = Harness(stub, breaker_failures=1, max_concurrency=1)
    result = await h.evaluator(preset="medium").evaluate(RECORD)
    assert result.outcome == "error" and result.passed is None
    assert len(stub.received) == 2  # the first draw, the failing one; then the breaker is open
    assert result.error is not None
    assert result.error.startswith("5 of 6 calls failed: draw 2: error:")
    assert result.error.count("circuit_open:") == 4
    assert h.metric("judge_requests_total", model=MODEL, outcome="circuit_open") == 4
    assert h.metric("judge_circuit_open", model=MODEL) == 1
    assert result.input_tokens == 100


def _completed(stage: EvaluationStage, n: int) -> bool:
    return stage.completed >= n


def _stage(h: Harness, evaluator: Any, budget: Budget) -> tuple[EvaluationStage, SummarySink]:
    summary = SummarySink()
    stage = EvaluationStage(
        [(evaluator, EvaluatorConfig(name="trustworthiness_tlm"))],
        BudgetGate(budget),
        [summary],
        h.telemetry,
        workers=1,
    )
    return stage, summary


async def test_the_budget_runs_out_mid_record_and_the_record_is_still_scored_whole(
    stub: StubJudge,
) -> None:
    """The budget admits a record's calls together and charges them together: it runs out
    during the first record's calls (its first drawn answer's 110 tokens use it up), yet all six
    are made and scored; the next record is skipped whole, with no call at all."""
    stub.default = Script(draw=[SAME], reflect=["Answer: A"])
    h = Harness(stub)
    stage, summary = _stage(h, h.evaluator(preset="medium"), Budget(max_judge_tokens_per_hour=100))
    await stage.start()
    records = [
        RECORD,
        RECORD.model_copy(update={"request_id": "r2", "response": "It opened in 1931!"}),
    ]
    for record in records:
        ok = await stage.put_many(
            [SampledRecord(record, "svc", frozenset({"trustworthiness_tlm"}))]
        )
        assert ok == 1
        done = 1 if record.request_id == "r1" else 2
        await wait_until_async(partial(_completed, stage, done), 60, f"{done} records done")
    await stage.shutdown(5)
    totals = summary.totals["trustworthiness_tlm"]
    assert (totals.passed, totals.errors) == (1, 0)
    assert len(stub.received) == 6  # record 1's calls only
    assert (
        h.metric(
            "sampling_decisions_total",
            service="unknown",  # the record names no service
            evaluator="trustworthiness_tlm",
            decision="over_budget",
        )
        == 1
    )
    assert h.metric("judge_tokens_total", model=MODEL, direction="input") == 600


# -- cache and config -------------------------------------------------------------------------


async def test_a_repeated_record_is_served_from_the_cache(stub: StubJudge) -> None:
    stub.default = Script(draw=[SAME, OTHER], reflect=["Answer: A"])
    h = Harness(stub, max_concurrency=1)
    evaluator = h.evaluator(preset="medium")
    first = await evaluator.evaluate(RECORD)
    second = await evaluator.evaluate(RECORD)
    assert len(stub.received) == 6
    assert second.score == first.score and second.input_tokens == 0
    # Drawn answers depend on the question and context only: another response reuses them.
    await evaluator.evaluate(RECORD.model_copy(update={"response": "It opened in 1967."}))
    assert len(stub.received) == 7 and kind(stub.received[-1]) == "reflect"


async def test_personal_data_is_redacted_from_every_call(stub: StubJudge) -> None:
    stub.default = Script(draw=[SAME], reflect=["Answer: A"])
    h = Harness(stub)
    h.config = Config.model_validate({**h.config.model_dump(), "redaction": {"enabled": True}})
    h.client = JudgeClient(h.config.judge, h.config.redaction, h.telemetry)
    h.context = BuildContext(judge=h.client, judge_model=h.config.judge.model)
    record = RECORD.model_copy(update={"query": QUERY + " Reply to ann@example.com"})
    await h.evaluator(preset="low", draws=2, reflection=True).evaluate(record)
    assert len(stub.received) == 3
    for got in stub.received:
        assert "ann@example.com" not in got.prompt and "[REDACTED:email]" in got.prompt


def _check(evaluator: dict[str, Any], judge: dict[str, Any] | None = None) -> list[str]:
    config = Config.model_validate(
        {"judge": {"model": MODEL} if judge is None else judge, "evaluators": [evaluator]}
    )
    try:
        check_evaluators(config)
    except ConfigError as exc:
        return exc.problems
    return []


def test_check_config_validates_the_options() -> None:
    assert (
        _check({"name": "trustworthiness_tlm", "threshold": 0.6, "tlm": {"preset": "high"}}) == []
    )
    assert _check({"name": "trustworthiness_tlm", "threshold": 3}) == [
        "evaluators.0.threshold: 3 is outside trustworthiness_tlm's scale 0..1"
    ]
    assert _check({"name": "groundedness", "tlm": {"draws": 3}}) == [
        "evaluators.0.tlm: only trustworthiness_tlm takes tlm options"
    ]
    assert _check({"name": "trustworthiness_tlm"}, judge={}) == [
        "evaluators.0.model: trustworthiness_tlm is an LLM judge; set evaluators[].model or judge.model"
    ]
    assert _check({"name": "trustworthiness_tlm", "prompt": "{{query}}"})[0].startswith(
        "evaluators.0.prompt: trustworthiness_tlm uses its own"
    )
    bad: list[tuple[dict[str, Any], str]] = [
        ({"draws": 0}, "draws"),
        ({"temperature": 0}, "temperature"),
        ({"preset": "best"}, "preset"),
        ({"preset": "low", "weights": {"consistency": 0}}, "weights.consistency"),
        ({"weights": {"reflection": 0}}, "weights.reflection"),
        ({"reflection": False, "reflection_wordings": 2}, "reflection_wordings"),
        ({"agreement": "nli"}, "agreement"),
    ]
    for tlm, key in bad:
        with pytest.raises(ValueError, match=key):
            EvaluatorConfig.model_validate({"name": "trustworthiness_tlm", "tlm": tlm})


@pytest.mark.parametrize(("preset", "calls"), [("low", 3), ("medium", 6), ("high", 10)])
def test_presets_set_the_calls_per_record(preset: str, calls: int) -> None:
    config = Config.model_validate(
        {"judge": {"model": MODEL}, "evaluators": [{"name": "trustworthiness_tlm"}]}
    )
    telemetry = create_telemetry()
    client = JudgeClient(config.judge, config.redaction, telemetry)
    context = BuildContext(judge=client, judge_model=config.judge.model)
    entry = EvaluatorConfig.model_validate(
        {"name": "trustworthiness_tlm", "tlm": {"preset": preset}}
    )
    evaluator = build(entry, context)
    assert isinstance(evaluator, TrustworthinessTlmEvaluator)
    assert evaluator.calls_per_record == calls


def test_the_logprob_grade_is_read_at_the_letter() -> None:
    """As llama.cpp sends them for "(C) Not sure.": the chosen token is repeated among its
    alternatives, and the letter, not the word after it, is where A, B and C compete."""
    tokens = (
        (("(", -1.56), ("A", -1.94), ("B", -3.07)),
        (("C", -1.0), ("A", -1.2), ("B", -1.6), ("D", -3.3)),
        ((")", -0.01),),
        ((" Not", -0.2), (" C", -4.7)),
        ((" sure", -0.5), (" unsure", -6.7)),
    )
    pa, pb, pc = math.exp(-1.2), math.exp(-1.6), math.exp(-1.0)
    assert logprob_grade(tokens, 0.5) == pytest.approx((pa + 0.5 * pc) / (pa + pb + pc))
    assert logprob_grade(tokens, 1.0) is None  # no token reads as the parsed grade
    assert logprob_grade(None, 0.5) is None


async def _serve(config: Config, records: list[RagRecord]) -> dict[str, dict[str, Any]]:
    """Records through the whole service (trace stage, sampling, escalation, evaluation)."""
    results: dict[str, dict[str, Any]] = {}

    class Collect:
        async def start(self) -> None: ...

        def emit(self, batch: Sequence[Evaluated]) -> None:
            for evaluated in batch:
                results[evaluated.record.request_id] = dict(evaluated.results)

        async def shutdown(self, deadline_s: float) -> None: ...

    service = Service(config, serve_http=False, with_receivers=False, extra_sinks=[Collect()])
    await service.start()
    assert await service.trace.put([Delivery("test", records=list(records))])
    await service.shutdown(30)
    return results


async def test_escalated_behind_the_detector_through_the_service(stub: StubJudge) -> None:
    """The README's recipe: only the record the detector is unsure about reaches the
    judge, and `evaluators[].tlm` from the config sets its calls (two drawn answers, no reflection)."""
    stub.default = Script(draw=[SAME], reflect=["Answer: A"])
    invented = RECORD.model_copy(
        update={"request_id": "r2", "response": "It opened in 1850, designed by Gustave Eiffel."}
    )
    base = {
        "judge": {"model": MODEL, "api_base": stub.openai_base, "retries": 0},
        "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
    }
    probe = await _serve(
        Config.model_validate({**base, "evaluators": [{"name": "local_groundedness"}]}),
        [RECORD, invented],
    )
    low, high = sorted(probe[r]["local_groundedness"].normalized for r in ("r1", "r2"))
    unsure = "r1" if probe["r1"]["local_groundedness"].normalized == low else "r2"
    tlm = {
        "name": "trustworthiness_tlm",
        "escalate_from": "local_groundedness",
        "band": [0.0, (low + high) / 2],
        "tlm": {"preset": "low", "draws": 2},
    }
    config = Config.model_validate({**base, "evaluators": [{"name": "local_groundedness"}, tlm]})
    results = await _serve(config, [RECORD, invented])
    assert [("trustworthiness_tlm" in results[r]) for r in ("r1", "r2")] == [
        unsure == "r1",
        unsure == "r2",
    ]
    assert [kind(r) for r in stub.received] == ["draw", "draw"]
    result = results[unsure]["trustworthiness_tlm"]
    assert result.error is None and result.explanation.startswith("consistency ")
    assert "of 2 drawn answers disagree" in result.explanation
