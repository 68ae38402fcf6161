"""An evaluator's previous revision scored alongside it for a changeover period (the
scorer's paired role; the config key `evaluators[].previous` is refused): its share of the records
chosen by their sampling key until `until` on an injected clock, its verdicts handed to the
sinks that take them (the alert engine) and counted in a metric of their own, never in the
evaluator's results or metrics."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.wait import wait_until_async
from monitor.component import Evaluated, SampledRecord
from monitor.config import (
    Budget,
    EvaluatorConfig,
)
from monitor.exporters.prometheus import MetricsSink
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation import EvaluationStage, PreviousScorer
from monitor.receivers.replay_summary import SummarySink
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry
from tests.config.test_check_config import _problems as problems_of
from tests.evaluation.test_evaluation_stage import CpuScorerStub, ScriptedEvaluator, _rec

NOW = 1_800_000_000.0
UNTIL = "2027-01-15T08:00:00Z"  # 1_800_000_000 s is 2027-01-15T08:00:00Z


def _problems(tmp_path: Path, evaluators: str) -> list[str]:
    return problems_of(tmp_path, f"judge: {{model: openai/gpt-4o-mini}}\nevaluators:\n{evaluators}")


def test_a_previous_revision_is_refused_naming_next(tmp_path: Path) -> None:
    """`evaluators[].previous` is gone (docs/alerts.md, "Evaluator changes"): the file fails
    at the key, saying why and what to write instead; the scorer's paired role stays for
    the engine's pairs (below)."""
    problems = _problems(
        tmp_path,
        "  - {name: local_groundedness, threshold: 0.6, previous: {until: 2027-01-01}}\n"
        "  - {name: local_relevance}\n",
    )
    (problem,) = problems
    assert problem.startswith("evaluators.0.previous: removed: the previous revision scoring")
    assert "score the new revision in shadow before the switch: next:" in problem


class FailingScorer(CpuScorerStub):
    def score(self, record: RagRecord) -> EvalResult:
        return EvalResult(name=self.name, score=0.0, normalized=0.0, passed=False)


class Pairs:
    """A sink that keeps previous revisions' verdicts (as the alert engine uses them)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, EvalResult], dict[str, EvalResult]]] = []

    async def start(self) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> None:
        for evaluated in batch:
            if evaluated.previous:
                got = (
                    evaluated.record.request_id,
                    dict(evaluated.results),
                    dict(evaluated.previous),
                )
                self.got.append(got)

    async def shutdown(self, deadline_s: float) -> None:
        return None


class Clock:
    def __init__(self) -> None:
        self.now = NOW - 60.0

    def __call__(self) -> float:
        return self.now


def _scored_stage(
    telemetry: Telemetry,
    current: object,
    old: object,
    clock: Clock,
    *,
    share: float = 0.5,
    budget: Budget | None = None,
) -> tuple[EvaluationStage, SummarySink, Pairs]:
    summary, pairs = SummarySink(), Pairs()
    name = "e"
    stage = EvaluationStage(
        [(current, EvaluatorConfig(name="local_groundedness"))],  # type: ignore[list-item]
        BudgetGate(budget or Budget()),
        [MetricsSink(telemetry), summary, pairs],
        telemetry,
        revisions={name: "new"},
        previous={name: PreviousScorer(old, "old", share, NOW)},  # type: ignore[arg-type]
        clock=clock,
    )
    return stage, summary, pairs


async def _score(stage: EvaluationStage, first: int, count: int) -> None:
    items = [SampledRecord(_rec(i), "test", frozenset({"e"})) for i in range(first, first + count)]
    assert await stage.put_many(items) == count
    await wait_until_async(lambda: stage.completed >= first + count, 60, "the records scored")


def _counted(telemetry: Telemetry, outcome: str) -> float:
    labels = {"evaluator": "e", "revision": "old", "outcome": outcome}
    value = telemetry.registry.get_sample_value(
        "rag_monitor_previous_revision_evaluations_total", labels
    )
    return value or 0.0


def _evaluations(telemetry: Telemetry, outcome: str) -> float:
    """The evaluator's own `evaluations_total` of `outcome`, over every series."""
    return sum(
        sample.value
        for metric in telemetry.registry.collect()
        if metric.name == "rag_monitor_evaluations"
        for sample in metric.samples
        if sample.name.endswith("_total")
        and sample.labels.get("evaluator") == "e"
        and sample.labels.get("outcome") == outcome
    )


@pytest.mark.parametrize("kind", ["judge", "cpu"])
async def test_the_previous_revision_scores_its_share_until_its_time_and_only_there(
    telemetry: Telemetry, kind: str
) -> None:
    """Half the records (by their sampling key, the same ones however often they come) are
    scored by both revisions; their pairs reach the sink that takes them, counted apart;
    the evaluator's results and metrics are the current revision's alone. Past `until`,
    the previous revision scores nothing."""
    clock = Clock()
    if kind == "judge":
        current: object = ScriptedEvaluator("e", kind="judge", value=1.0)
        old: object = ScriptedEvaluator("e", kind="judge", value=0.0)
    else:
        current, old = CpuScorerStub("e"), FailingScorer("e")
    # No local limit: a fast test's first second would read as a minute's base sample.
    budget = Budget(max_local_evaluations_per_minute=None)
    stage, summary, pairs = _scored_stage(telemetry, current, old, clock, budget=budget)
    await stage.start()
    await _score(stage, 0, 200)
    scorer = PreviousScorer(old, "old", 0.5, NOW)  # type: ignore[arg-type]
    chosen = {f"r{i}" for i in range(200) if scorer.chosen(_rec(i).sampling_key, clock.now)}
    assert 60 < len(chosen) < 140
    assert {request for request, _, _ in pairs.got} == chosen
    for _, results, previous in pairs.got:
        assert results["e"].revision == "new" and results["e"].passed
        assert previous["e"].revision == "old" and previous["e"].passed is False
    assert _counted(telemetry, "fail") == len(chosen)
    assert summary.totals["e"].passed == 200 and summary.totals["e"].failed == 0
    assert _evaluations(telemetry, "pass") == 200 and _evaluations(telemetry, "fail") == 0
    clock.now = NOW
    before = len(pairs.got), _counted(telemetry, "fail"), _counted(telemetry, "error")
    await _score(stage, 200, 100)
    await stage.shutdown(5)
    assert (len(pairs.got), _counted(telemetry, "fail"), _counted(telemetry, "error")) == before


async def test_a_previous_revision_that_errs_is_counted_logged_and_pairs_nothing(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    budget = Budget(max_local_evaluations_per_minute=None)
    current, old = CpuScorerStub("e"), CpuScorerStub("e", raises=True)
    stage, summary, pairs = _scored_stage(telemetry, current, old, clock, budget=budget)
    await stage.start()
    await _score(stage, 0, 50)
    await stage.shutdown(5)
    assert pairs.got == [] and _counted(telemetry, "error") > 0
    assert "the previous revision old of evaluator e failed on record" in caplog.text
    assert summary.totals["e"].passed == 50 and summary.totals["e"].errors == 0


async def test_a_previous_judge_takes_only_the_room_the_base_sample_leaves(
    telemetry: Telemetry,
) -> None:
    """Its calls are admitted as a boost's: within the budget's share beyond the base
    sample, never at its cost."""
    clock = Clock()
    current = ScriptedEvaluator("e", kind="judge", value=1.0)
    old = ScriptedEvaluator("e", kind="judge", value=0.0)
    budget = Budget(max_evaluations_per_minute=20)
    stage, summary, _ = _scored_stage(telemetry, current, old, clock, share=1.0, budget=budget)
    await stage.start()
    await _score(stage, 0, 20)
    await stage.shutdown(5)
    assert summary.totals["e"].passed == 20  # the base sample kept its room
    assert old.calls < 20
    assert _counted(telemetry, "budget") == 20 - old.calls  # each call it did not make
