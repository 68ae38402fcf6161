"""Running a batch's sampled evaluators: the evaluation stage's work on each batch of
records it takes.

Per record, each evaluator is sampled, skipped (not sampled, or lacking its input: counted
and logged), not escalated, or over budget (judges). Network evaluators (LLM judges) run
concurrently, each call under the evaluation deadline; the batch's CPU scorers (the local
evaluators) run together: in the worker-process pool (`pipeline.processes`, the scoring
task of `_scoring`), or, without one, in one worker-thread hop under one deadline, since a
hop costs about as much CPU as scoring a small record. Escalated evaluators run after the
evaluator they escalate from, on the records whose score fell in their band.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter as Tally
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from monitor.component import SampledRecord
from monitor.config import EvaluatorConfig
from monitor.evaluators.base import CpuScorer, Evaluator
from monitor.pool import ProcessPool
from monitor.processors import _scoring
from monitor.processors.budget import BudgetGate
from monitor.records import EXTRACTION_SUSPECT, RagRecord
from monitor.results import EvalResult
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)
_PARTS = ("query", "context", "response")  # the order a skip's reason is named in


@dataclass(slots=True)
class InFlight:
    """A queued record being evaluated: what was decided for it and what came back."""

    item: SampledRecord
    service: str
    missing: frozenset[str]
    results: dict[str, EvalResult]


@dataclass(frozen=True)
class _Stage:
    evaluator: Evaluator
    escalate_from: str | None
    band: tuple[float, float] | None


class BatchEvaluator:
    """The configured evaluators, run over one batch of records at a time."""

    def __init__(
        self,
        evaluators: Sequence[tuple[Evaluator, EvaluatorConfig]],
        budget: BudgetGate,
        telemetry: Telemetry,
        timeout_s: float,
        pool: ProcessPool | None,
        evaluate_suspect: bool = False,
    ) -> None:
        stages = [_Stage(ev, spec.escalate_from, spec.band) for ev, spec in evaluators]
        # Escalated evaluators run after the evaluator they escalate from.
        self._first = [s for s in stages if s.escalate_from is None]
        self._escalated = [s for s in stages if s.escalate_from is not None]
        self._cpu = {s.evaluator.name for s in stages if isinstance(s.evaluator, CpuScorer)}
        self._budget = budget
        self._t = telemetry
        self._timeout = timeout_s
        # With a pool, CPU scorers run in worker processes; without, in a thread hop here.
        self._pool = pool
        self._warn = RateLimitedLog(log)
        # Records the trace stage marked `extraction_suspect` are evaluated only if set.
        self._evaluate_suspect = evaluate_suspect

    @property
    def cpu_only(self) -> bool:
        """Whether every evaluator is a CPU scorer."""
        return len(self._cpu) == len(self._first) + len(self._escalated)

    async def warm_up(self) -> None:
        """Load the models of the evaluators that run in this process."""
        for stage in self._first + self._escalated:
            if self._pool is not None and stage.evaluator.name in self._cpu:
                continue  # its models load in the worker processes
            warm_up = getattr(stage.evaluator, "warm_up", None)
            if warm_up is not None:
                await warm_up()

    async def evaluate(self, batch: list[InFlight]) -> None:
        """Every record's sampled evaluators; results land in each `InFlight`."""
        await self._run(self._first, batch)
        if self._escalated:
            await self._run(self._escalated, batch)

    def _runnable(
        self,
        stages: list[_Stage],
        sampled: frozenset[str],
        missing: frozenset[str],
        service: str,
        results: dict[str, EvalResult],
        decisions: Tally[tuple[str, str, str]],
    ) -> list[Evaluator]:
        """The evaluators to run on a record; its decisions are added to `decisions`."""
        chosen = []
        for stage in stages:
            decision = self._decision(stage, sampled, missing, results)
            if decision is None:
                self._skipped(service, stage.evaluator, missing)
                continue
            decisions[(service, stage.evaluator.name, decision)] += 1
            if decision == "sampled":
                chosen.append(stage.evaluator)
        return chosen

    def _held_back(self, stages: list[_Stage], item: InFlight) -> bool:
        """A record whose extraction looks wrong is not evaluated (its scores would
        measure the extraction: no defect rate, alert window or baseline sees it); each
        evaluator's skip is counted. The trace stage logs why and what fixes it."""
        if self._evaluate_suspect or EXTRACTION_SUSPECT not in item.item.record.metadata:
            return False
        for stage in stages:
            self._t.child(
                self._t.evaluations_skipped,
                item.service,
                stage.evaluator.name,
                "extraction_suspect",
            ).inc()
        return True

    def _skipped(self, service: str, evaluator: Evaluator, missing: frozenset[str]) -> None:
        """Count an evaluation not run for lack of its input, and say so once in a while
        per service, evaluator and reason (a record with no context never fails
        groundedness: it is not judged at all)."""
        part = next(p for p in _PARTS if p in evaluator.requires & missing)
        reason = f"no_{part}"
        self._t.child(self._t.evaluations_skipped, service, evaluator.name, reason).inc()
        self._warn.warning(
            f"skipped/{service}/{evaluator.name}/{reason}",
            "%s skipped a record of service %r: it has no %s (records_incomplete_total "
            "counts such records; see the README's 'Tracing your app')",
            evaluator.name,
            service,
            part,
        )

    def _decision(
        self,
        stage: _Stage,
        sampled: frozenset[str],
        missing: frozenset[str],
        results: dict[str, EvalResult],
    ) -> str | None:
        """sampled, skipped, not_escalated or over_budget (which admits a sampled judge
        to the budget); None when the record lacks the evaluator's input (counted once
        per record in records_incomplete_total)."""
        ev = stage.evaluator
        if ev.requires & missing:
            return None
        if stage.escalate_from is not None:
            source = results.get(stage.escalate_from)
            lo, hi = stage.band or (0.0, 1.0)
            if source is None or source.normalized is None or not lo <= source.normalized <= hi:
                return "not_escalated"
        if ev.name not in sampled:
            return "skipped"
        if ev.kind == "judge" and not self._budget.admit():
            return "over_budget"
        return "sampled"

    async def _run(self, stages: list[_Stage], batch: list[InFlight]) -> None:
        """One round of evaluators over a batch: each record's network evaluators run
        concurrently, and every CPU scorer of the batch in one worker-thread hop."""
        calls = []
        cpu_work: list[tuple[InFlight, list[CpuScorer]]] = []
        decisions: Tally[tuple[str, str, str]] = Tally()
        for item in batch:
            if self._held_back(stages, item):
                continue
            chosen = self._runnable(
                stages, item.item.sampled, item.missing, item.service, item.results, decisions
            )
            cpu = [cast(CpuScorer, ev) for ev in chosen if ev.name in self._cpu]
            if cpu:
                cpu_work.append((item, cpu))
            calls += [self._one(ev, item) for ev in chosen if ev.name not in self._cpu]
        # Counted once per series and batch, not once per record and evaluator.
        for labels, n in decisions.items():
            self._t.child(self._t.sampling_decisions, *labels).inc(n)
        if cpu_work:
            calls.append(self._score_cpu(cpu_work))
        # A single call (CPU scorers only, the usual case) is awaited as it is: gathering
        # it would make it a task, one more trip through the event loop per batch.
        outcomes = [await calls[0]] if len(calls) == 1 else await asyncio.gather(*calls)
        for outcome in outcomes:
            for item, result in outcome:
                item.results[result.name] = result
                if result.input_tokens or result.output_tokens or result.cost:
                    self._budget.spend(result.input_tokens + result.output_tokens, result.cost)

    async def _one(self, evaluator: Evaluator, item: InFlight) -> list[tuple[InFlight, EvalResult]]:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout):
                result = await evaluator.evaluate(item.item.record)
        except TimeoutError:
            result = self._timed_out(evaluator.name)
        except Exception as exc:
            result = self._failed(evaluator.name, item.item.record, exc)
        self._t.child(self._t.evaluation_duration, evaluator.name).observe(
            time.perf_counter() - started
        )
        return [(item, result)]

    async def _score_cpu(
        self, work: list[tuple[InFlight, list[CpuScorer]]]
    ) -> list[tuple[InFlight, EvalResult]]:
        """The batch's CPU scorers in one worker process, or in one worker-thread hop,
        under one deadline."""
        if self._pool is not None:
            return await self._score_in_pool(self._pool, work)
        try:
            async with asyncio.timeout(self._timeout):
                timed = await asyncio.to_thread(self._score_all, work)
        except TimeoutError:
            timed = [
                (item, self._timed_out(ev.name), self._timeout) for item, evs in work for ev in evs
            ]
        for _, result, seconds in timed:
            self._t.child(self._t.evaluation_duration, result.name).observe(seconds)
        return [(item, result) for item, result, _ in timed]

    async def _score_in_pool(
        self, pool: ProcessPool, work: list[tuple[InFlight, list[CpuScorer]]]
    ) -> list[tuple[InFlight, EvalResult]]:
        """The pool enforces the deadline itself (a worker past it is replaced)."""
        scored = await _scoring.score(
            pool, [(item.item.record, tuple(ev.name for ev in evs)) for item, evs in work]
        )
        out = []
        for (item, _), row in zip(work, scored, strict=True):
            for result, seconds in row:
                self._t.child(self._t.evaluation_duration, result.name).observe(seconds)
                if result.error is not None:
                    self._warn.warning(
                        result.name,
                        "evaluator %s failed on record %s: %s",
                        result.name,
                        item.item.record.request_id,
                        result.error,
                    )
                out.append((item, result))
        return out

    def _score_all(
        self, work: list[tuple[InFlight, list[CpuScorer]]]
    ) -> list[tuple[InFlight, EvalResult, float]]:
        timed = []
        for item, evaluators in work:
            for evaluator in evaluators:
                started = time.perf_counter()
                try:
                    result = evaluator.score(item.item.record)
                except Exception as exc:
                    result = self._failed(evaluator.name, item.item.record, exc)
                timed.append((item, result, time.perf_counter() - started))
        return timed

    def _timed_out(self, name: str) -> EvalResult:
        return EvalResult.failed(name, f"timeout: no verdict within {self._timeout:g}s")

    def _failed(self, name: str, record: RagRecord, exc: Exception) -> EvalResult:
        self._warn.warning(
            name, "evaluator %s failed on record %s: %s", name, record.request_id, exc
        )
        return EvalResult.failed(name, f"{type(exc).__name__}: {exc}")
