"""A Chinese RAG service, end to end: `tests/frameworks/apps/langchain_zh_app.py`, a
LangChain chain whose prompt template is Chinese, its vector store retriever over Chinese
documents and a chat model answering in Chinese, traced as the README says for LangChain
(OpenInference's instrumentation, the SDK's OTLP/HTTP exporter), from its own environment
(`tests/frameworks/envs/rag/`), against a running monitor (`Service`, in this process, with
the embedded `local_groundedness` evaluator).

The model is a scripted LangChain chat model (`tests/frameworks/apps/chinese_kb.py`): the
truth of each answer has to be known, and a small local model's Chinese is too poor for
that. Its faithful answers restate their document in other words (one a Chinese numeral in
Arabic digits); its planted ones change a price's numeral (七 to 十五欧元) and a founder's
name (伊万·拉斯克 to 玛丽·格兰特).

The app runs twice against one monitor: its model plants one wrong fact in six answers,
then two. The real runs prove that each question's record carries the Chinese question, each
retrieved document apart, in the retriever's order, and the answer, as the app got them;
that every faithful answer passes and every planted one fails, counted, and that no record
is left unscored for its language.

Paging needs hours of verdicts on many questions: the verdicts the monitor gave in these
runs are replayed into the alert engine on simulated time (`_verdict_replay`), each on a
request of its own: the first run's for a baseline, then the second's (planted answers
doubled, 1/6 to 2/6) pages; the first run's alone, for as long, never does."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial

import pytest

from harness.framework_envs import APP_IDLE_TIMEOUT_S, APP_WAIT_S, run_python_app
from harness.wait import wait_until_async
from monitor.component import Alert
from monitor.config import Config
from monitor.receivers.otlp import OtlpReceivers
from monitor.records import EXTRACTION_SUSPECT
from monitor.results import EvalResult
from monitor.service import Service
from tests.frameworks._verdict_replay import AppRun, replay
from tests.frameworks.apps.chinese_kb import ANSWERS, KB, QUESTIONS, planted
from tests.receivers.test_external_verdicts import Capture

pytestmark = pytest.mark.e2e

SERVICE = "langchain-zh"
EVALUATOR = "local_groundedness"
VARIANTS = ("planted-1", "planted-2")
RULE = "hallucination_zh"


@dataclass
class Observed:
    runs: list[AppRun]
    counted: dict[str, float]  # outcome → evaluations_total of local_groundedness
    unscored: float  # evaluations_unsupported_language_total, every label


def _config() -> Config:
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"endpoint": "127.0.0.1:0"}}
            },
            "trace_assembly": {"idle_timeout_s": APP_IDLE_TIMEOUT_S},
            "evaluators": [{"name": EVALUATOR}],
            "pipeline": {"processes": 0},
        }
    )


def _all_in(ids: list[str], results: dict[str, dict[str, EvalResult]]) -> bool:
    return all(i in results for i in ids)


def _total(service: Service, name: str) -> float:
    return sum(
        s.value
        for metric in service.telemetry.registry.collect()
        if metric.name == f"rag_monitor_{name}"
        for s in metric.samples
        if s.name.endswith("_total")
    )


async def _observe() -> Observed:
    capture = Capture()
    service = Service(_config(), serve_http=False, extra_sinks=[capture])
    await service.start()
    try:
        (otlp,) = [r for r in service.receivers if isinstance(r, OtlpReceivers)]
        assert otlp.http is not None
        endpoint = f"http://127.0.0.1:{otlp.http.port}/v1/traces"
        runs = []
        for variant in VARIANTS:
            answers, _ = await run_python_app("langchain_zh", "openinference", variant, endpoint)
            ids = [str(a["trace_id"]) for a in answers]
            await wait_until_async(
                partial(_all_in, ids, capture.results), APP_WAIT_S, f"the {variant} run's records"
            )
            runs.append(AppRun.taken(EVALUATOR, answers, capture.results, capture.records, variant))
        counted = {
            outcome: service.telemetry.registry.get_sample_value(
                "rag_monitor_evaluations_total",
                {
                    "service": SERVICE,
                    "version": "",
                    "route": "/ask",
                    "evaluator": EVALUATOR,
                    "outcome": outcome,
                },
            )
            or 0.0
            for outcome in ("pass", "fail", "error")
        }
        unscored = _total(service, "evaluations_unsupported_language")
    finally:
        await service.shutdown(10)
    return Observed(runs, counted, unscored)


@pytest.fixture(scope="module")
def observed() -> Observed:
    return asyncio.run(_observe())


def test_each_chinese_question_is_one_record_with_its_documents_apart(observed: Observed) -> None:
    for run in observed.runs:
        assert [a["question"] for a in run.answers] == [q for q, _, _ in QUESTIONS]
        for answer, (question, uri, _) in zip(run.answers, QUESTIONS, strict=True):
            record = run.records[answer["trace_id"]]
            assert (record.service, record.route) == (SERVICE, "/ask")
            # The user's question, not the Chinese template it was asked through.
            assert record.query == question
            assert "资料：" not in str(record.query)
            assert record.response == answer["response"]
            # Each retrieved document apart, in the retriever's order: the one that answers
            # first (the retriever really ranked the Chinese documents).
            assert record.context_text == answer["sources"]
            assert len(answer["sources"]) == 2 and answer["sources"][0] == KB[uri]
            assert set(answer["sources"]) <= set(KB.values())
            assert record.missing() == frozenset()
            assert EXTRACTION_SUSPECT not in record.metadata


def test_faithful_chinese_answers_pass_and_planted_ones_fail(observed: Observed) -> None:
    for run in observed.runs:
        wrong = planted(run.variant)
        responses = {str(r.response): v for r, v in run.judged()}
        # The scripted model said what the run planted, and every other answer faithfully.
        assert set(responses) == set(wrong.values()) | (
            set(ANSWERS.values()) - {ANSWERS[uri] for uri in wrong}
        )
        for response, verdict in responses.items():
            assert verdict.passed == (response not in wrong.values()), (response, verdict)
            assert verdict.label == ("pass" if verdict.passed else "fail")
    # The numeral and the name planted: both caught, explained by what the answer lacks.
    numeral, name = (
        observed.runs[1].results[a["trace_id"]][EVALUATOR] for a in observed.runs[1].answers[:2]
    )
    assert not numeral.passed and not name.passed
    assert numeral.explanation and "十五" in numeral.explanation, numeral.explanation
    assert name.explanation and "玛丽" in name.explanation, name.explanation


def test_every_verdict_is_counted_and_no_record_is_left_unscored(observed: Observed) -> None:
    # One planted answer in six, then two: 3 of 12 fail.
    assert observed.counted == {"pass": 9, "fail": 3, "error": 0}
    assert observed.unscored == 0


def _replay(phases: list[tuple[float, AppRun]]) -> list[Alert]:
    sent, _ = replay(RULE, EVALUATOR, [(seconds, run.judged()) for seconds, run in phases])
    return sent


def _fail_rate(run: AppRun) -> float:
    verdicts = [v for _, v in run.judged()]
    return sum(not v.passed for v in verdicts) / len(verdicts)


def test_a_doubling_of_planted_answers_pages(observed: Observed) -> None:
    baseline, doubled = observed.runs
    assert _fail_rate(baseline) == 1 / 6 and _fail_rate(doubled) == 2 / 6
    firing = [a for a in _replay([(900, baseline), (300, doubled)]) if a.status == "firing"]
    assert firing, "the doubling paged"
    assert {(a.rule, a.service) for a in firing} == {(RULE, SERVICE)}


def test_the_same_share_of_planted_answers_never_pages(observed: Observed) -> None:
    baseline = observed.runs[0]
    assert _replay([(1200, baseline)]) == []
