"""A CPU scorer's previous revision (`evaluators[].previous`) is admitted to the local limit
as a boost's evaluation is: while the limit keeps its room for the base sample, it scores
fewer records than its share, and each one it does not score is counted
(`previous_revision_evaluations_total{outcome="budget"}`), as a previous judge's call not
made is, and said in the log."""

from __future__ import annotations

import logging

import pytest

from monitor.config import Budget, EvaluatorConfig
from monitor.exporters.prometheus import MetricsSink
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation import EvaluationStage, PreviousScorer
from monitor.receivers.replay_summary import SummarySink
from monitor.telemetry import Telemetry
from tests.evaluation.test_evaluation_stage import CpuScorerStub
from tests.evaluation.test_previous_revision import (
    NOW,
    Clock,
    FailingScorer,
    Pairs,
    _counted,
    _score,
)


async def test_a_previous_cpu_scorer_the_local_limit_refuses_is_counted_and_said(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    current, old = CpuScorerStub("e"), FailingScorer("e")
    summary, pairs = SummarySink(), Pairs()
    # On the injected clock the gate is young: the base sample's first evaluation, taken
    # over a whole window, leaves no room for anything beyond it under 20 a minute.
    budget = BudgetGate(Budget(max_local_evaluations_per_minute=20), clock)
    stage = EvaluationStage(
        [(current, EvaluatorConfig(name="local_groundedness"))],
        budget,
        [MetricsSink(telemetry), summary, pairs],
        telemetry,
        revisions={"e": "new"},
        previous={"e": PreviousScorer(old, "old", 1.0, NOW)},
        clock=clock,
    )
    await stage.start()
    with caplog.at_level(logging.WARNING):
        await _score(stage, 0, 20)
    await stage.shutdown(5)
    assert summary.totals["e"].passed == 20  # the base sample kept its room
    assert old.threads == [] and pairs.got == []
    assert _counted(telemetry, "budget") == 20
    assert "the previous revision old of evaluator e scores less than its share" in caplog.text
