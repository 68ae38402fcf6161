"""The evaluation stage: bounded intake, error outcomes, budgets, escalation, shutdown."""

from __future__ import annotations

import asyncio
from typing import Literal

from monitor.config import Budget, EvaluatorConfig, Sampling
from monitor.evaluators.base import EvalResult
from monitor.exporters.prometheus import MetricsSink
from monitor.exporters.summary import SummarySink
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluate import EvaluationStage
from monitor.processors.sampler import Sampler
from monitor.records import Part, RagRecord
from monitor.telemetry import Telemetry


class ScriptedEvaluator:
    """An in-process evaluator whose behaviour the test chooses."""

    def __init__(
        self,
        name: str,
        *,
        kind: Literal["local", "judge"] = "local",
        value: float = 1.0,
        raises: bool = False,
        delay: float = 0.0,
        requires: frozenset[Part] = frozenset(),
        per_record: dict[str, float] | None = None,
    ) -> None:
        self.name, self.kind, self.requires = name, kind, requires
        self.value, self.raises, self.delay = value, raises, delay
        self.per_record = per_record or {}
        self.calls = 0

    async def evaluate(self, record: RagRecord) -> EvalResult:
        self.calls += 1
        await asyncio.sleep(self.delay)
        if self.raises:
            raise RuntimeError("judge exploded")
        value = self.per_record.get(record.request_id, self.value)
        return EvalResult(
            name=self.name,
            score=value,
            normalized=value,
            passed=value >= 0.5,
            input_tokens=10,
            output_tokens=5,
        )


def _stage(
    telemetry: Telemetry,
    evaluators: list[ScriptedEvaluator],
    *,
    specs: list[EvaluatorConfig] | None = None,
    budget: Budget | None = None,
    queue_size: int = 100,
    timeout: float = 5.0,
    workers: int = 2,
) -> tuple[EvaluationStage, SummarySink]:
    summary = SummarySink()
    specs = specs or [EvaluatorConfig(name="local_groundedness") for _ in evaluators]
    stage = EvaluationStage(
        list(zip(evaluators, specs, strict=True)),
        Sampler(Sampling(), {e.name: None for e in evaluators}),
        BudgetGate(budget or Budget()),
        [MetricsSink(telemetry), summary],
        telemetry,
        queue_size=queue_size,
        workers=workers,
        evaluation_timeout_s=timeout,
    )
    return stage, summary


def _rec(i: int, **kw: object) -> RagRecord:
    base: dict[str, object] = {
        "request_id": f"r{i}",
        "trace_id": f"{i:032x}",
        "query": "q",
        "response": "a",
        "retrieved_context": [{"content": "c"}],
        "service": "svc",
        "route": "/ask",
    }
    base.update(kw)
    return RagRecord.model_validate(base)


def _value(t: Telemetry, name: str, **labels: str) -> float:
    return t.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0


async def test_results_reach_sinks_and_on_done_fires(telemetry: Telemetry) -> None:
    good, bad = ScriptedEvaluator("good", value=0.9), ScriptedEvaluator("bad", value=0.1)
    stage, summary = _stage(telemetry, [good, bad])
    await stage.start()
    done: list[str] = []
    for i in range(5):
        await stage.put(_rec(i), "test", on_done=lambda i=i: done.append(f"r{i}"))
    await stage.shutdown(5)
    assert sorted(done) == [f"r{i}" for i in range(5)]
    assert summary.totals["good"].passed == 5 and summary.totals["bad"].failed == 5
    assert (
        _value(
            telemetry,
            "evaluations_total",
            service="svc",
            route="/ask",
            evaluator="bad",
            outcome="fail",
        )
        == 5
    )
    assert _value(telemetry, "records_total", service="svc", source="test") == 5


async def test_offer_never_waits_and_counts_drops(telemetry: Telemetry) -> None:
    slow = ScriptedEvaluator("slow", delay=0.2)
    stage, _ = _stage(telemetry, [slow], queue_size=2, workers=1)
    await stage.start()
    accepted = [stage.offer(_rec(i), "test") for i in range(10)]
    assert accepted.count(True) <= 3 and accepted.count(False) >= 7
    assert _value(
        telemetry, "dropped_total", stage="evaluate", reason="queue_full"
    ) == accepted.count(False)
    await stage.shutdown(5)
    assert stage.offer(_rec(99), "test") is False
    assert _value(telemetry, "dropped_total", stage="evaluate", reason="shutting_down") == 1


async def test_evaluator_exception_and_timeout_are_errors_not_verdicts(
    telemetry: Telemetry,
) -> None:
    broken = ScriptedEvaluator("broken", raises=True)
    stuck = ScriptedEvaluator("stuck", delay=10)
    stage, summary = _stage(telemetry, [broken, stuck], timeout=0.2)
    await stage.start()
    await stage.put(_rec(1), "test")
    await stage.shutdown(5)
    for name in ("broken", "stuck"):
        totals = summary.totals[name]
        assert (totals.errors, totals.passed, totals.failed) == (1, 0, 0)
        assert (
            _value(
                telemetry,
                "evaluations_total",
                service="svc",
                route="/ask",
                evaluator=name,
                outcome="error",
            )
            == 1
        )
        assert _value(telemetry, "evaluation_score_count", service="svc", evaluator=name) == 0


async def test_missing_parts_skip_evaluators_and_are_counted(telemetry: Telemetry) -> None:
    needs_context = ScriptedEvaluator("ctx", requires=frozenset({"context"}))
    any_record = ScriptedEvaluator("any")
    stage, _ = _stage(telemetry, [needs_context, any_record])
    await stage.start()
    await stage.put(_rec(1, retrieved_context=[]), "test")
    await stage.shutdown(5)
    assert (needs_context.calls, any_record.calls) == (0, 1)
    assert _value(telemetry, "records_incomplete_total", service="svc", missing="context") == 1


async def test_judges_stop_at_budget_local_keeps_running(telemetry: Telemetry) -> None:
    judge = ScriptedEvaluator("judge", kind="judge")
    local = ScriptedEvaluator("local")
    stage, _ = _stage(telemetry, [judge, local], budget=Budget(max_evaluations_per_minute=3))
    await stage.start()
    for i in range(10):
        await stage.put(_rec(i), "test")
    await stage.shutdown(5)
    assert (judge.calls, local.calls) == (3, 10)
    assert (
        _value(
            telemetry,
            "sampling_decisions_total",
            service="svc",
            evaluator="judge",
            decision="over_budget",
        )
        == 7
    )


async def test_escalation_runs_judge_only_inside_band(telemetry: Telemetry) -> None:
    unsure = ScriptedEvaluator("local_groundedness", per_record={"r1": 0.5, "r2": 0.95})
    judge = ScriptedEvaluator("groundedness", kind="judge")
    specs = [
        EvaluatorConfig(name="local_groundedness"),
        EvaluatorConfig(
            name="local_groundedness", escalate_from="local_groundedness", band=(0.4, 0.6)
        ),
    ]
    stage, _ = _stage(telemetry, [unsure, judge], specs=specs)
    await stage.start()
    await stage.put(_rec(1), "test")
    await stage.put(_rec(2), "test")
    await stage.shutdown(5)
    assert judge.calls == 1
    assert (
        _value(
            telemetry,
            "sampling_decisions_total",
            service="svc",
            evaluator="groundedness",
            decision="not_escalated",
        )
        == 1
    )


async def test_shutdown_deadline_abandons_and_counts(telemetry: Telemetry) -> None:
    stuck = ScriptedEvaluator("stuck", delay=30)
    stage, _ = _stage(telemetry, [stuck], workers=1, timeout=60)
    await stage.start()
    done: list[int] = []
    for i in range(3):
        await stage.put(_rec(i), "test", on_done=lambda i=i: done.append(i))
    await asyncio.sleep(0.05)
    abandoned = await stage.shutdown(0.2)
    assert abandoned == 3 and done == []
    assert _value(telemetry, "dropped_total", stage="evaluate", reason="shutdown_deadline") == 3


async def test_route_label_is_capped(telemetry: Telemetry) -> None:
    from monitor.telemetry import create_telemetry

    capped = create_telemetry(max_routes=2)
    stage, _ = _stage(capped, [ScriptedEvaluator("e")])
    await stage.start()
    for i in range(5):
        await stage.put(_rec(i, route=f"/r{i}"), "test")
    await stage.shutdown(5)
    routes = {
        s.labels["route"]
        for metric in capped.registry.collect()
        if metric.name == "rag_monitor_evaluations"
        for s in metric.samples
    }
    assert routes == {"/r0", "/r1", "other"}
