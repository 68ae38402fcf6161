"""An evaluator's next revision scored in shadow before it becomes the revision of record
(`evaluators[].next`): its config checked in the user's words, its share of the records
chosen by their sampling key until `until` on an injected clock, its verdicts handed to
the alert engine as shadow verdicts only (`Evaluated.shadow`) and counted in a metric of their
own labelled by revision, never in the evaluator's results, metrics or alerts."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness.wait import wait_until_async
from monitor.alerts import AlertEngine
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.component import SampledRecord
from monitor.config import (
    AlertBaseline,
    Budget,
    EvaluatorConfig,
    Judge,
    RegressionRule,
    load_config,
)
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import evaluator_problems
from monitor.evaluators.revision import revision
from monitor.exporters.prometheus import MetricsSink
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation import EvaluationStage, OtherRevision, other_revisions
from monitor.receivers.replay_summary import SummarySink
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry, create_telemetry
from tests.config.test_check_config import _problems as problems_of
from tests.evaluation.test_evaluation_stage import CpuScorerStub, ScriptedEvaluator, _rec

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def _problems(tmp_path: Path, evaluators: str) -> list[str]:
    return problems_of(tmp_path, f"judge: {{model: openai/gpt-4o-mini}}\nevaluators:\n{evaluators}")


class FailingScorer(CpuScorerStub):
    def score(self, record: RagRecord) -> EvalResult:
        return EvalResult(name=self.name, score=0.0, normalized=0.0, passed=False)


class Clock:
    def __init__(self) -> None:
        self.now = NOW - 60.0

    def __call__(self) -> float:
        return self.now


def test_a_next_revision_is_checked_as_an_entry_in_the_users_words(tmp_path: Path) -> None:
    problems = _problems(
        tmp_path,
        "  - {name: local_groundedness, next: {until: soon, share: 2}}\n"
        "  - {name: local_relevance}\n"
        "  - {name: local_retrieval, escalate_from: local_relevance,\n"
        "     next: {until: 2026-12-01, threshold: 0.4}}\n"
        "  - {name: local_safety, next: {until: 2026-12-01, severity_threshold: low, model: x,\n"
        "     sample_rate: 1}}\n",
    )
    assert problems == [
        "evaluators.0.next.until: 'soon' is not an ISO 8601 time (e.g. 2026-12-01T00:00:00Z)",
        "evaluators.0.next.share: must be less than or equal to 1",
        "evaluators.2.next: an escalated evaluator (escalate_from) is not scored by two "
        "revisions; give next to the evaluator it escalates from",
        "evaluators.3.next.sample_rate: unknown key",
    ]
    problems = _problems(
        tmp_path,
        "  - {name: relevance, next: {until: 2026-12-01, threshold: 9}}\n"
        "  - {name: local_relevance, next: {until: 2026-12-01 08:00, threshold: 0.5}}\n",
    )
    assert problems[0] == "evaluators.0.next.threshold: 9 is outside relevance's scale 1..5"
    assert problems[1].startswith("evaluators.1.next: the same revision as the evaluator")
    assert problems[1].endswith("write the new values")
    assert len(problems) == 2


def test_the_next_entry_is_the_switched_one(tmp_path: Path) -> None:
    """The revision shadowed is the one the entry has once `next`'s keys move into it: the
    switch the rules recognise."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "evaluators:\n"
        "  - name: local_groundedness\n"
        "    threshold: 0.6\n"
        "    next: {until: 2026-12-01, threshold: 0.5, second_stage: false}\n"
    )
    entry = load_config(path, environ={}, evaluator_check=evaluator_problems).evaluators[0]
    assert entry.next is not None and entry.next.share == 0.2
    new = entry.next.entry(entry)
    assert new.next is None
    switched = EvaluatorConfig(name="local_groundedness", threshold=0.5)
    assert revision(new, Judge()) == revision(switched, Judge())
    assert revision(new, Judge()) != revision(entry, Judge())


def _evaluations(telemetry: Telemetry, name: str, outcome: str) -> float:
    """The evaluator's own `evaluations_total` of `outcome`, over every series."""
    return sum(
        sample.value
        for metric in telemetry.registry.collect()
        if metric.name == "rag_monitor_evaluations"
        for sample in metric.samples
        if sample.name.endswith("_total")
        and sample.labels.get("evaluator") == name
        and sample.labels.get("outcome") == outcome
    )


async def _score(stage: EvaluationStage, first: int, count: int) -> None:
    sampled = frozenset({"local_groundedness"})
    items = [SampledRecord(_rec(i), "test", sampled) for i in range(first, first + count)]
    assert await stage.put_many(items) == count
    await wait_until_async(lambda: stage.completed >= first + count, 60, "the records scored")


def _shadow_count(telemetry: Telemetry, outcome: str) -> float:
    labels = {"evaluator": "local_groundedness", "revision": "next", "outcome": outcome}
    value = telemetry.registry.get_sample_value(
        "rag_monitor_shadow_revision_evaluations_total", labels
    )
    return value or 0.0


async def test_a_next_cpu_scorer_the_local_limit_refuses_is_counted_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A CPU scorer's next revision is admitted to the local limit as a boost's evaluation
    is: while the limit keeps its room for the base sample, it scores fewer records than
    its share, and each one it does not score is counted
    (`shadow_revision_evaluations_total{outcome="budget"}`) and said in the log."""
    name = "local_groundedness"
    telemetry, clock = create_telemetry(), Clock()
    current, nxt = CpuScorerStub(name), FailingScorer(name)
    summary = SummarySink()
    # On the injected clock the gate is young: the base sample's first evaluation, taken
    # over a whole window, leaves no room for anything beyond it under 20 a minute.
    budget = BudgetGate(Budget(max_local_evaluations_per_minute=20), clock)
    stage = EvaluationStage(
        [(current, EvaluatorConfig(name=name))],
        budget,
        [MetricsSink(telemetry), summary],
        telemetry,
        revisions={name: "current"},
        others={name: OtherRevision(nxt, "next", 1.0, NOW)},
        clock=clock,
    )
    await stage.start()
    with caplog.at_level(logging.WARNING):
        await _score(stage, 0, 20)
    await stage.shutdown(5)
    assert summary.totals[name].passed == 20  # the base sample kept its room
    assert nxt.threads == []
    assert _shadow_count(telemetry, "budget") == 20
    assert _shadow_count(telemetry, "fail") == 0
    assert f"the next revision next of evaluator {name} scores less than its share" in caplog.text


@pytest.mark.parametrize("kind", ["judge", "cpu"])
async def test_shadow_verdicts_reach_the_alert_engine_only_and_stop_at_until(kind: str) -> None:
    """Half the records are scored by the next revision too; the alert engine's regression
    rule measures the pairs (all differ: the next revision fails what the current passes)
    and judges, counts and pages on the current revision's verdicts alone; the evaluator's
    metrics and results are the current revision's. Past `until` the shadow scores nothing."""
    name = "local_groundedness"
    telemetry = create_telemetry()
    clock = Clock()
    if kind == "judge":
        current: object = ScriptedEvaluator(name, kind="judge", value=1.0)
        nxt: object = ScriptedEvaluator(name, kind="judge", value=0.0)
    else:
        current, nxt = CpuScorerStub(name), FailingScorer(name)
    rule = RegressionRule(name="shadowed", evaluator=name, baseline=AlertBaseline())
    engine = AlertEngine([rule], telemetry, clock=clock)
    summary = SummarySink()
    stage = EvaluationStage(
        [(current, EvaluatorConfig(name=name))],  # type: ignore[list-item]
        BudgetGate(Budget(max_local_evaluations_per_minute=None)),
        [MetricsSink(telemetry), summary, engine],
        telemetry,
        revisions={name: "current"},
        others={name: OtherRevision(nxt, "next", 0.5, NOW)},  # type: ignore[arg-type]
        clock=clock,
    )
    await stage.start()
    await _score(stage, 0, 200)
    scorer = OtherRevision(nxt, "next", 0.5, NOW)  # type: ignore[arg-type]
    chosen = sum(scorer.chosen(_rec(i).sampling_key, clock.now) for i in range(200))
    assert 60 < chosen < 140
    state: RegressionState = next(iter(engine._entries.values())).state
    assert state.baseline.shadow is not None and state.baseline.shadow.revision == "next"
    assert state.baseline.shadow.paired[:2] == [
        chosen,
        chosen,
    ]  # every pair: next fails, current passes
    # The service's window: the current revision's verdicts (the records are one request
    # asked again, counted up to its share), none of the shadow's failures.
    own = state.current.moments(clock.now)
    assert own.samples > 0 and own.defects == 0
    assert _shadow_count(telemetry, "fail") == chosen
    assert summary.totals[name].passed == 200 and summary.totals[name].failed == 0
    assert _evaluations(telemetry, name, "pass") == 200
    assert _evaluations(telemetry, name, "fail") == 0
    clock.now = NOW
    await _score(stage, 200, 100)
    await stage.shutdown(5)
    assert state.baseline.shadow.paired[0] == chosen and _shadow_count(telemetry, "fail") == chosen


def test_the_pipeline_scores_a_next_revision_in_shadow_until_its_time(tmp_path: Path) -> None:
    """`other_revisions`, as the pipeline builds the evaluation stage: the next revision of
    a CPU scorer is a shadow scorer of the switched entry's revision, built in the worker
    processes too; past its `until` it is left out."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "evaluators:\n"
        "  - name: local_groundedness\n"
        "    next: {until: 2027-01-15T08:00:00Z, threshold: 0.6, share: 0.3}\n"
        "  - name: local_relevance\n"
    )
    config = load_config(path, environ={}, evaluator_check=evaluator_problems)
    context = BuildContext(judge=None, judge_model=None)
    scorers, cpu = other_revisions(config, context, NOW - 1)
    (name, scorer), (entry,) = *scorers.items(), cpu
    switched = EvaluatorConfig(name="local_groundedness", threshold=0.6)
    assert name == "local_groundedness" and scorer.upgrade is None and scorer.share == 0.3
    assert scorer.revision == revision(switched, config.judge)
    assert entry == config.evaluators[0].next.entry(config.evaluators[0])  # type: ignore[union-attr]
    assert other_revisions(config, context, NOW) == ({}, [])
