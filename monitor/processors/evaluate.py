"""The evaluation stage: a bounded intake queue drained by worker tasks.

Receivers hand records in with `offer` (never waits: a full queue is a counted drop and
the receiver answers its sender with a retryable status) or `put` (waits for room: replay
and Kafka, which push back by not reading). Each worker samples a record, runs the sampled
evaluators under a per-call deadline, and hands the results to every sink. `on_done` fires
once the record is finished — evaluated or deliberately skipped — which is what the Kafka
receiver commits offsets on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from monitor.config import EvaluatorConfig
from monitor.evaluators.base import EvalResult, Evaluator
from monitor.processors.budget import BudgetGate
from monitor.processors.sampler import Sampler
from monitor.records import RagRecord
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)


class ResultSink(Protocol):
    """Where finished records go (metrics, results file, alert engine, OTLP events)."""

    async def start(self) -> None: ...

    def emit(self, record: RagRecord, results: dict[str, EvalResult]) -> None:
        """Must not block: a sink that does I/O queues the item and counts its drops."""

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Job:
    record: RagRecord
    source: str
    on_done: Callable[[], None] | None


@dataclass(frozen=True)
class _Stage:
    evaluator: Evaluator
    escalate_from: str | None
    band: tuple[float, float] | None


class EvaluationStage:
    def __init__(
        self,
        evaluators: Sequence[tuple[Evaluator, EvaluatorConfig]],
        sampler: Sampler,
        budget: BudgetGate,
        sinks: Sequence[ResultSink],
        telemetry: Telemetry,
        *,
        queue_size: int = 1000,
        workers: int = 4,
        evaluation_timeout_s: float = 60.0,
    ) -> None:
        stages = [_Stage(ev, spec.escalate_from, spec.band) for ev, spec in evaluators]
        # Escalated evaluators run after the evaluator they escalate from.
        self._first = [s for s in stages if s.escalate_from is None]
        self._escalated = [s for s in stages if s.escalate_from is not None]
        self._sampler = sampler
        self._budget = budget
        self._sinks = list(sinks)
        self._t = telemetry
        self._queue: asyncio.Queue[_Job] = asyncio.Queue(maxsize=queue_size)
        self._workers = workers
        self._timeout = evaluation_timeout_s
        self._tasks: list[asyncio.Task[None]] = []
        self._warn = RateLimitedLog(log)
        self._depth = telemetry.queue_depth.labels("evaluate")
        self._accepting = False
        self.completed = 0

    @property
    def accepting(self) -> bool:
        return self._accepting

    @property
    def sampler(self) -> Sampler:
        """The sampler `_process` decides with (receivers may ask it early, see OTLP)."""
        return self._sampler

    async def start(self) -> None:
        for stage in self._first + self._escalated:
            warm_up = getattr(stage.evaluator, "warm_up", None)
            if warm_up is not None:
                await warm_up()
        for sink in self._sinks:
            await sink.start()
        self._tasks = [
            asyncio.create_task(self._work(), name=f"evaluate-{i}") for i in range(self._workers)
        ]
        self._accepting = True

    def offer(
        self, record: RagRecord, source: str, on_done: Callable[[], None] | None = None
    ) -> bool:
        """Queue a record without waiting; False (counted) when the queue is full or closed."""
        if not self._accepting:
            self._t.dropped.labels("evaluate", "shutting_down").inc()
            return False
        try:
            self._queue.put_nowait(_Job(record, source, on_done))
        except asyncio.QueueFull:
            self._t.dropped.labels("evaluate", "queue_full").inc()
            return False
        self._depth.set(self._queue.qsize())
        return True

    async def put(
        self, record: RagRecord, source: str, on_done: Callable[[], None] | None = None
    ) -> None:
        """Queue a record, waiting for room (the caller pushes back on its own input)."""
        if not self._accepting:
            raise RuntimeError("evaluation stage is not accepting records")
        await self._queue.put(_Job(record, source, on_done))
        self._depth.set(self._queue.qsize())

    async def shutdown(self, deadline_s: float) -> int:
        """Stop intake, let queued and in-flight records finish until the deadline, then
        cancel what is left and flush the sinks. Returns how many records were abandoned."""
        self._accepting = False
        abandoned = 0
        try:
            async with asyncio.timeout(deadline_s):
                await self._queue.join()
        except TimeoutError:
            abandoned = self._queue.qsize() + sum(1 for t in self._tasks if not t.done())
            log.warning(
                "shutdown deadline of %.1fs passed; abandoning about %d records",
                deadline_s,
                abandoned,
            )
            self._t.dropped.labels("evaluate", "shutdown_deadline").inc(abandoned)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for sink in self._sinks:
            try:
                await sink.close()
            except Exception:
                log.exception("sink %s failed to close", type(sink).__name__)
        return abandoned

    async def _work(self) -> None:
        while True:
            job = await self._queue.get()
            try:
                await self._process(job)
            except Exception:
                # A bug in a sink or evaluator wrapper must not kill the worker.
                log.exception("record %s failed in the evaluation stage", job.record.request_id)
                self._t.dropped.labels("evaluate", "internal_error").inc()
            finally:
                self._queue.task_done()
                self._depth.set(self._queue.qsize())

    async def _process(self, job: _Job) -> None:
        record = job.record
        service = self._t.service_cap(record.service)
        self._t.child(self._t.records, service, job.source).inc()
        missing = record.missing()
        for part in sorted(missing):
            self._t.child(self._t.records_incomplete, service, part).inc()
        sampled = self._sampler.decide(record)
        results: dict[str, EvalResult] = {}
        await self._run(
            self._runnable(self._first, record, sampled, missing, service, results), record, results
        )
        if self._escalated:
            await self._run(
                self._runnable(self._escalated, record, sampled, missing, service, results),
                record,
                results,
            )
        if results:
            for sink in self._sinks:
                sink.emit(record, results)
        self.completed += 1
        if job.on_done is not None:
            job.on_done()

    def _runnable(
        self,
        stages: list[_Stage],
        record: RagRecord,
        sampled: dict[str, bool],
        missing: frozenset[str],
        service: str,
        results: dict[str, EvalResult],
    ) -> list[Evaluator]:
        chosen = []
        for stage in stages:
            ev = stage.evaluator
            if ev.requires & missing:
                continue  # counted once per record in records_incomplete_total
            if stage.escalate_from is not None:
                source = results.get(stage.escalate_from)
                lo, hi = stage.band or (0.0, 1.0)
                if source is None or source.normalized is None or not lo <= source.normalized <= hi:
                    self._t.child(
                        self._t.sampling_decisions, service, ev.name, "not_escalated"
                    ).inc()
                    continue
            if not sampled.get(ev.name, False):
                self._t.child(self._t.sampling_decisions, service, ev.name, "skipped").inc()
                continue
            if ev.kind == "judge" and not self._budget.admit():
                self._t.child(self._t.sampling_decisions, service, ev.name, "over_budget").inc()
                continue
            self._t.child(self._t.sampling_decisions, service, ev.name, "sampled").inc()
            chosen.append(ev)
        return chosen

    async def _run(
        self, evaluators: list[Evaluator], record: RagRecord, results: dict[str, EvalResult]
    ) -> None:
        if not evaluators:
            return
        outcomes = await asyncio.gather(*(self._one(ev, record) for ev in evaluators))
        for result in outcomes:
            results[result.name] = result
            if result.input_tokens or result.output_tokens or result.cost:
                self._budget.spend(result.input_tokens + result.output_tokens, result.cost)

    async def _one(self, evaluator: Evaluator, record: RagRecord) -> EvalResult:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout):
                result = await evaluator.evaluate(record)
        except TimeoutError:
            result = EvalResult.failed(
                evaluator.name, f"timeout: no verdict within {self._timeout:g}s"
            )
        except Exception as exc:
            self._warn.warning(
                evaluator.name,
                "evaluator %s failed on record %s: %s",
                evaluator.name,
                record.request_id,
                exc,
            )
            result = EvalResult.failed(evaluator.name, f"{type(exc).__name__}: {exc}")
        self._t.child(self._t.evaluation_duration, evaluator.name).observe(
            time.perf_counter() - started
        )
        return result
