"""A real app that judges its own answers with a real evaluation library, against a running
monitor (docs/external-evaluations.md): `tests/frameworks/apps/pydantic_evals_app.py`, a
Pydantic AI RAG agent whose answering function is decorated with pydantic-evals' online
evaluation (`pydantic_evals.online.evaluate`), from its own environment
(`tests/frameworks/envs/pydantic-evals/`). pydantic-evals writes each verdict of the app's
evaluator (`Grounded`: every number of the answer is in its documents) as a
`gen_ai.evaluation.result` OTLP log record; the app sends it and its spans over OTLP/HTTP to
the monitor (`Service`, in this process, with `external_verdicts.services` naming the app).

The app runs three times against one monitor: its judge at `judge-v1` while its scripted
model plants one wrong fact in six answers, then two; then its judge at `judge-v2` over the
same two. The real runs prove that each verdict the app's judge gave reaches the record of
its question as an `external:Grounded` result, with its outcome, explanation and the judge's
version as its revision, and is counted per evaluator (`evaluations_total`); and that the
judge's new version is a new revision on the same answers.

Paging needs hours of verdicts on many questions: the verdicts the monitor read in these
runs are replayed into the alert engine on simulated time, each on a request of its own
(the engine takes the repeats of one question as one piece of evidence), as
`tests/alerts/test_external_rules.py` does with verdicts it writes itself: the first
run's for a baseline, then the second's (the app's own fail rate doubled, 1/6 to 2/6)
pages; the first's, then the third's (the same doubled fail rate, judged by the judge's
new version) starts a new baseline and does not page."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial

import pytest

from harness.framework_envs import APP_IDLE_TIMEOUT_S, APP_WAIT_S, run_python_app
from harness.wait import wait_until_async
from monitor.alerts import AlertEngine
from monitor.component import Alert
from monitor.config import Config
from monitor.receivers.otlp import OtlpReceivers
from monitor.results import EvalResult
from monitor.service import Service
from tests.frameworks._verdict_replay import AppRun, baselines_started, replay
from tests.frameworks.apps.framework_apps import PLANTED_THREE, QUESTIONS
from tests.receivers.test_external_verdicts import Capture

pytestmark = pytest.mark.e2e

SERVICE = "pydantic-evals-app"
EVALUATOR = "external:Grounded"  # pydantic-evals names a verdict by its evaluator's class
# (judge version, variant): the runs, in order, against one monitor.
RUNS = (("judge-v1", "planted-1"), ("judge-v1", "planted-2"), ("judge-v2", "planted-2"))


@dataclass
class Observed:
    runs: list[AppRun]
    counted: dict[tuple[str, str], float]  # (evaluator, outcome) → evaluations_total
    refused: float  # external_verdicts_refused_total, every reason


def _config() -> Config:
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"endpoint": "127.0.0.1:0"}}
            },
            "trace_assembly": {"idle_timeout_s": APP_IDLE_TIMEOUT_S},
            "evaluators": [{"name": "local_relevance"}],
            "pipeline": {"processes": 0},
            "external_verdicts": {"services": [SERVICE]},
        }
    )


def _all_in(ids: list[str], results: dict[str, dict[str, EvalResult]]) -> bool:
    return all(i in results for i in ids)


def _metric(monitor: Service, name: str, **labels: str) -> float:
    return monitor.telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0


async def _observe() -> Observed:
    capture = Capture()
    service = Service(_config(), serve_http=False, extra_sinks=[capture])
    await service.start()
    try:
        (otlp,) = [r for r in service.receivers if isinstance(r, OtlpReceivers)]
        assert otlp.http is not None
        endpoint = f"http://127.0.0.1:{otlp.http.port}/v1/traces"
        runs = []
        for version, variant in RUNS:
            answers, _ = await run_python_app("pydantic_evals", version, variant, endpoint)
            ids = [str(a["trace_id"]) for a in answers]
            await wait_until_async(
                partial(_all_in, ids, capture.results),
                APP_WAIT_S,
                f"the records of the {version} {variant} run",
            )
            runs.append(AppRun.taken(EVALUATOR, answers, capture.results, capture.records))
        counted = {
            (evaluator, outcome): _metric(
                service,
                "evaluations_total",
                service=SERVICE,
                version="",
                route="/ask",
                evaluator=evaluator,
                outcome=outcome,
            )
            for evaluator in (EVALUATOR, "local_relevance")
            for outcome in ("pass", "fail", "error")
        }
        refused = sum(
            s.value
            for metric in service.telemetry.registry.collect()
            if metric.name == "rag_monitor_external_verdicts_refused"
            for s in metric.samples
            if s.name.endswith("_total")
        )
    finally:
        await service.shutdown(10)
    return Observed(runs, counted, refused)


@pytest.fixture(scope="module")
def observed() -> Observed:
    return asyncio.run(_observe())


def _wrong(planted: int) -> set[str]:
    return set(list(PLANTED_THREE.values())[:planted])


def test_each_verdict_of_the_apps_judge_joins_its_questions_record(observed: Observed) -> None:
    for run, (version, variant) in zip(observed.runs, RUNS, strict=True):
        wrong = _wrong(int(variant.removeprefix("planted-")))
        assert [a["question"] for a in run.answers] == [q for q, _ in QUESTIONS]
        assert {a["response"] for a in run.answers} & wrong == wrong
        for answer, (record, result) in zip(run.answers, run.judged(), strict=True):
            assert (record.service, record.route) == (SERVICE, "/ask")
            assert (record.query, record.response) == (answer["question"], answer["response"])
            assert record.context_text == answer["sources"]
            # The verdict the app's judge gave, with the judge's version as its revision.
            assert answer["judge_version"] == version
            assert (result.passed, result.revision) == (answer["passed"], version)
            assert result.passed == (answer["response"] not in wrong)
            if result.passed:
                assert result.explanation == "every number cited"
            else:
                assert result.explanation is not None
                assert result.explanation.startswith("not in the context: ")
            assert (result.label, result.normalized) == (
                ("pass", 1.0) if result.passed else ("fail", 0.0)
            )
            assert "local_relevance" in run.results[answer["trace_id"]]  # the monitor's own


def test_the_apps_verdicts_are_counted_per_evaluator(observed: Observed) -> None:
    counted = observed.counted
    # Five of six pass, then four, then four again.
    assert [counted[(EVALUATOR, o)] for o in ("pass", "fail", "error")] == [13, 5, 0]
    # Counted apart from the monitor's own verdict on each record.
    own = [counted[("local_relevance", o)] for o in ("pass", "fail", "error")]
    assert (own[0] + own[1], own[2]) == (18, 0)
    assert observed.refused == 0


def test_the_apps_judge_changing_its_version_is_a_new_revision(observed: Observed) -> None:
    _, before, after = observed.runs
    old = [(r.response, v.passed, v.revision) for r, v in before.judged()]
    new = [(r.response, v.passed, v.revision) for r, v in after.judged()]
    # The same answers, the same outcomes: only the judge's revision changed.
    assert [o[:2] for o in old] == [n[:2] for n in new]
    assert {o[2] for o in old} == {"judge-v1"}
    assert {n[2] for n in new} == {"judge-v2"}


RULE = "app_judge"


def _replay(phases: list[tuple[float, AppRun]]) -> tuple[list[Alert], AlertEngine]:
    return replay(RULE, EVALUATOR, [(seconds, run.judged()) for seconds, run in phases])


def _fail_rate(run: AppRun) -> float:
    verdicts = [v for _, v in run.judged()]
    return sum(not v.passed for v in verdicts) / len(verdicts)


def test_a_doubling_of_the_apps_own_fail_rate_pages(observed: Observed) -> None:
    baseline, doubled, _ = observed.runs
    assert _fail_rate(doubled) == 2 * _fail_rate(baseline)
    sent, _ = _replay([(900, baseline), (300, doubled)])
    firing = [a for a in sent if a.status == "firing"]
    assert firing, "the doubling paged"
    assert {a.rule for a in firing} == {RULE}
    assert firing[0].annotations["evaluator_revision"] == "judge-v1"


def test_the_apps_judge_changing_its_version_does_not_page(observed: Observed) -> None:
    """The judge's new version reads twice the old one's fail rate: a new baseline."""
    baseline, _, new_judge = observed.runs
    assert _fail_rate(new_judge) == 2 * _fail_rate(baseline)
    sent, engine = _replay([(900, baseline), (600, new_judge)])
    assert [a for a in sent if a.status == "firing"] == []
    assert baselines_started(engine, RULE, "revision") == 1


def test_the_apps_steady_judge_never_pages(observed: Observed) -> None:
    baseline = observed.runs[0]
    sent, _ = _replay([(1500, baseline)])
    assert sent == []
