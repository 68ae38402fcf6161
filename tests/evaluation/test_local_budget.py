"""Local evaluations have a rate cap, on by default, as LLM judges have budgets: a sender
that drives a boost (forged traces that look like a rise) cannot multiply the monitor's CPU.
The base sample's local evaluations always run; those only a boost sampled run while the
cap (`budget.max_local_evaluations_per_minute`) keeps room for the base sample, and the
rest are counted (`sampling_boost_refused_total`, `over_budget` decisions) and never
scored."""

from __future__ import annotations

from typing import Literal

from monitor.config import Budget, EvaluatorConfig, load_config
from monitor.exporters.prometheus import MetricsSink
from monitor.processors.budget import SLOTS, BudgetGate
from monitor.processors.evaluation import EvaluationStage
from monitor.processors.sampler import Sampled
from monitor.records import Part, RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry
from tests.alerts.test_alerts import Clock
from tests.evaluation.test_evaluation_stage import _put, _rec, _value

NAME = "local_groundedness"


class CountingScorer:
    """A local (CPU) evaluator that counts what it scores."""

    name = NAME
    kind: Literal["local", "judge"] = "local"
    requires: frozenset[Part] = frozenset()

    def __init__(self) -> None:
        self.scored: list[str] = []

    def score(self, record: RagRecord) -> EvalResult:
        self.scored.append(record.request_id)
        return EvalResult(name=NAME, score=1.0, normalized=1.0, passed=True)

    async def evaluate(self, record: RagRecord) -> EvalResult:
        return self.score(record)


def test_local_evaluations_are_capped_by_default() -> None:
    assert load_config(None, environ={}).budget.max_local_evaluations_per_minute == 6000


def test_a_boost_adds_local_evaluations_only_while_the_base_sample_keeps_its_room() -> None:
    clock = Clock()
    gate = BudgetGate(Budget(max_local_evaluations_per_minute=100), clock)
    admitted = refused = 0
    for second in range(600):
        clock.now += 1
        for _ in range(5):  # the base sample, 300 a minute: past the cap, and never refused
            assert gate.admit_local(boost=False)
        if second % 2 == 0:
            assert gate.admit_local(boost=False)
        for _ in range(95):  # what a forged rise asks for beyond it
            if gate.admit_local(boost=True):
                admitted += 1
            else:
                refused += 1
    assert admitted == 0 and refused == 600 * 95
    assert gate.reached(boost=True, local=True) == "max_local_evaluations_per_minute: 100"


async def test_the_stage_scores_what_the_cap_admits_and_counts_the_rest(
    telemetry: Telemetry,
) -> None:
    scorer = CountingScorer()
    clock = Clock()
    gate = BudgetGate(Budget(max_local_evaluations_per_minute=10), clock)
    clock.now += 60  # a gate a window old: the base sample's use is what it used
    stage = EvaluationStage(
        [(scorer, EvaluatorConfig(name=NAME))],
        gate,
        [MetricsSink(telemetry)],
        telemetry,
        workers=1,
    )
    await stage.start()
    base = Sampled({NAME})
    boosted = Sampled({NAME}, beyond_base={NAME})
    for i in range(4):
        await _put(stage, _rec(i), sampled=base)
    # Room for the base sample's use again: 10 - 4 - 4 leaves two for the boost.
    for i in range(4, 40):
        await _put(stage, _rec(i), sampled=boosted)
    await stage.shutdown(10)
    assert len(scorer.scored) == 4 + 2
    assert set(scorer.scored) >= {"r0", "r1", "r2", "r3"}
    refused = _value(telemetry, "sampling_boost_refused_total", service="svc", evaluator=NAME)
    assert refused == 34
    over = _value(
        telemetry, "sampling_decisions_total", service="svc", evaluator=NAME, decision="over_budget"
    )
    assert over == 34


def test_a_budget_window_nobody_reads_stays_bounded_at_any_rate() -> None:
    """The base sample's local evaluations are counted on every record while no boost ever
    reads the window: an hour of them at 20 a second holds a window's worth of slots, not
    an entry per evaluation (it grew by one per evaluation, without end)."""
    clock = Clock()
    gate = BudgetGate(Budget(max_local_evaluations_per_minute=10_000), clock)
    held = []
    for _ in range(3600):
        for _ in range(20):
            assert gate.admit_local(boost=False)
        clock.now += 1.0
        held.append(max(len(w) for w in gate.windows()))
    assert max(held) <= SLOTS + 1
    # The count is still the last minute's, give or take one slot's time.
    used, base = gate.windows()  # the local limit's, the only one configured
    assert 60 * 20 - 20 <= used.total() <= 60 * 20
    assert base.total() == used.total()
