"""The evaluation stage: a bounded intake queue drained by worker tasks.

Receivers hand records in with `put` or `put_many`, which wait for room (replay, OTLP and
Kafka push back on their own input by not reading). The sampling decision is made at
intake: a record no evaluator samples (`skips`) is counted (`count_skipped`) and finished
there and never queued, so unsampled traffic costs a hash and a few counter increments,
not a trip through the queue; the Kafka receiver does this in its own thread.

Each worker takes a queued record and runs its sampled evaluators: network ones (LLM
judges) concurrently, each call under the evaluation deadline, and CPU scorers
(`CpuScorer`, the local evaluators) together in one worker-thread hop under one deadline,
since a hop costs about as much CPU as scoring a small record. When every evaluator is a
CPU scorer, a worker takes the records waiting (up to `_MAX_BATCH`) and scores the whole
batch in one hop. Results go to every sink. `on_done` fires once the record is finished —
evaluated or deliberately skipped — and, for sinks that persist results, written; that is
what the Kafka receiver commits offsets on.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from monitor.config import EvaluatorConfig
from monitor.evaluators.base import CpuScorer, EvalResult, Evaluator
from monitor.processors.budget import BudgetGate
from monitor.processors.sampler import Sampler
from monitor.records import RagRecord
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

# Queued records a worker takes at once. Bounded so that one batch of large records stays
# well inside the evaluation deadline and other workers get a share of a burst.
_MAX_BATCH = 16


class ResultSink(Protocol):
    """Where finished records go (metrics, results file, alert engine, OTLP events)."""

    async def start(self) -> None: ...

    def emit(
        self, record: RagRecord, results: dict[str, EvalResult]
    ) -> asyncio.Future[None] | None:
        """Must not block: a sink that does I/O queues the item and counts its drops. A
        sink that persists results returns a future, done once the item is written or
        its loss counted; the record's `on_done` waits for it (a Kafka offset is not
        committed before its results line is in the file)."""

    async def close(self) -> None: ...


OnDone = Callable[[], None]


@dataclass(frozen=True, slots=True)
class _Job:
    record: RagRecord
    source: str
    on_done: OnDone | None


@dataclass(slots=True)
class _InFlight:
    """A queued record being evaluated: what was decided for it and what came back."""

    job: _Job
    service: str
    missing: frozenset[str]
    sampled: dict[str, bool]
    results: dict[str, EvalResult]


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
        self._cpu = {s.evaluator.name for s in stages if isinstance(s.evaluator, CpuScorer)}
        # Judges are admitted to the budget before they run and charged after: batching
        # records with judges would admit a whole batch on one reading of the budget.
        self._max_batch = _MAX_BATCH if len(self._cpu) == len(stages) else 1
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
        self._working = 0  # records taken off the queue by workers and not finished
        self._skip_cache: dict[tuple[str, str, frozenset[str]], tuple[Any, ...]] = {}
        self._completed = 0
        self._completed_lock = threading.Lock()

    @property
    def completed(self) -> int:
        """Records finished: evaluated, or skipped by sampling."""
        return self._completed

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

    async def put(self, record: RagRecord, source: str, on_done: OnDone | None = None) -> None:
        """Take a record, waiting for queue room if it is sampled (the caller pushes back
        on its own input). Raises RuntimeError once the stage stopped accepting."""
        if not await self.put_many(((record, on_done),), source):
            raise RuntimeError("evaluation stage is not accepting records")

    async def put_many(
        self, records: Sequence[tuple[RagRecord, OnDone | None]], source: str
    ) -> int:
        """Take records in order, as `put` does; returns how many were taken before the
        stage stopped accepting (the caller still owns the rest)."""
        skipped: list[RagRecord] = []
        try:
            for taken, (record, on_done) in enumerate(records):
                if not self._accepting:
                    return taken
                if self.skips(record):
                    skipped.append(record)
                    if on_done is not None:
                        on_done()
                    continue
                self.count_skipped(skipped, source)  # metrics stay current while we wait
                skipped.clear()
                await self._queue.put(_Job(record, source, on_done))
                self._depth.set(self._queue.qsize())
            return len(records)
        finally:
            self.count_skipped(skipped, source)

    def skips(self, record: RagRecord) -> bool:
        """Whether no evaluator samples `record`: it then needs no queue slot, only
        `count_skipped`. Thread-safe."""
        return not self._sampler.samples_any(record)

    def count_skipped(self, records: Sequence[RagRecord], source: str) -> None:
        """Finish records that `skips`: the counters a worker would add for them, one
        increment per counter for the whole batch. Thread-safe: the Kafka consumer thread
        finishes its unsampled records here without a trip through the event loop."""
        if not records:
            return
        for counters, n in Tally(self._skip_counters(r, source) for r in records).items():
            for counter in counters:
                counter.inc(n)
        with self._completed_lock:
            self._completed += len(records)

    def _skip_counters(self, record: RagRecord, source: str) -> tuple[Any, ...]:
        """The counters a record no evaluator samples adds one to — the same a worker
        would — cached by what they depend on, so unsampled traffic skips the label
        lookups (services are capped, so the cache stays small)."""
        service = self._t.service_cap(record.service)
        missing = record.missing()
        key = (service, source, missing)
        found = self._skip_cache.get(key)
        if found is None:
            counters = self._intake_counters(service, source, missing)
            for stage in self._first + self._escalated:
                decision = self._decision(stage, {}, missing, {})
                if decision is not None:
                    counters.append(
                        self._t.child(
                            self._t.sampling_decisions, service, stage.evaluator.name, decision
                        )
                    )
            found = self._skip_cache[key] = tuple(counters)
        return found

    async def shutdown(self, deadline_s: float) -> int:
        """Stop intake, let queued and in-flight records finish until the deadline, then
        cancel what is left and flush the sinks. Returns how many records were abandoned."""
        self._accepting = False
        abandoned = 0
        try:
            async with asyncio.timeout(deadline_s):
                await self._queue.join()
        except TimeoutError:
            abandoned = self._queue.qsize() + self._working
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
            # Take what is waiting (up to a bound): the CPU scorers of the whole batch
            # then share one worker-thread hop.
            jobs = [await self._queue.get()]
            while len(jobs) < self._max_batch and not self._queue.empty():
                jobs.append(self._queue.get_nowait())
            self._depth.set(self._queue.qsize())
            self._working += len(jobs)
            try:
                await self._process(jobs)
            except Exception:
                # A bug in a sink or evaluator wrapper must not kill the worker.
                log.exception(
                    "records %s failed in the evaluation stage",
                    ", ".join(job.record.request_id for job in jobs),
                )
                self._t.dropped.labels("evaluate", "internal_error").inc(len(jobs))
            finally:
                self._working -= len(jobs)
                for _ in jobs:
                    self._queue.task_done()

    def _count(self, record: RagRecord, source: str) -> tuple[str, frozenset[str]]:
        service = self._t.service_cap(record.service)
        missing = record.missing()
        for counter in self._intake_counters(service, source, missing):
            counter.inc()
        return service, missing

    def _intake_counters(self, service: str, source: str, missing: frozenset[str]) -> list[Any]:
        """records_total and records_incomplete_total, as every record taken in adds them."""
        counters = [self._t.child(self._t.records, service, source)]
        counters += [
            self._t.child(self._t.records_incomplete, service, part) for part in sorted(missing)
        ]
        return counters

    def _finish(self, on_done: OnDone | None) -> None:
        with self._completed_lock:
            self._completed += 1
        if on_done is not None:
            on_done()

    async def _process(self, jobs: list[_Job]) -> None:
        batch = []
        for job in jobs:
            service, missing = self._count(job.record, job.source)
            sampled = self._sampler.decide(job.record)
            batch.append(_InFlight(job, service, missing, sampled, {}))
        await self._run(self._first, batch)
        if self._escalated:
            await self._run(self._escalated, batch)
        for item in batch:
            record, results = item.job.record, item.results
            writes = []
            if results:
                for sink in self._sinks:
                    written = sink.emit(record, results)
                    if written is not None:
                        writes.append(written)
            if writes:
                # Finished once persisted; the worker moves on without waiting.
                on_done = item.job.on_done
                asyncio.gather(*writes).add_done_callback(lambda _, f=on_done: self._finish(f))
            else:
                self._finish(item.job.on_done)

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
            decision = self._decision(stage, sampled, missing, results)
            if decision is None:
                continue
            name = stage.evaluator.name
            self._t.child(self._t.sampling_decisions, service, name, decision).inc()
            if decision == "sampled":
                chosen.append(stage.evaluator)
        return chosen

    def _decision(
        self,
        stage: _Stage,
        sampled: dict[str, bool],
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
        if not sampled.get(ev.name, False):
            return "skipped"
        if ev.kind == "judge" and not self._budget.admit():
            return "over_budget"
        return "sampled"

    async def _run(self, stages: list[_Stage], batch: list[_InFlight]) -> None:
        """One round of evaluators over a batch: each record's network evaluators run
        concurrently, and every CPU scorer of the batch in one worker-thread hop."""
        calls = []
        cpu_work: list[tuple[_InFlight, list[CpuScorer]]] = []
        for item in batch:
            record = item.job.record
            chosen = self._runnable(
                stages, record, item.sampled, item.missing, item.service, item.results
            )
            cpu = [cast(CpuScorer, ev) for ev in chosen if ev.name in self._cpu]
            if cpu:
                cpu_work.append((item, cpu))
            calls += [self._one(ev, item) for ev in chosen if ev.name not in self._cpu]
        if cpu_work:
            calls.append(self._score_cpu(cpu_work))
        for outcome in await asyncio.gather(*calls):
            for item, result in outcome:
                item.results[result.name] = result
                if result.input_tokens or result.output_tokens or result.cost:
                    self._budget.spend(result.input_tokens + result.output_tokens, result.cost)

    async def _one(
        self, evaluator: Evaluator, item: _InFlight
    ) -> list[tuple[_InFlight, EvalResult]]:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout):
                result = await evaluator.evaluate(item.job.record)
        except TimeoutError:
            result = self._timed_out(evaluator.name)
        except Exception as exc:
            result = self._failed(evaluator.name, item.job.record, exc)
        self._t.child(self._t.evaluation_duration, evaluator.name).observe(
            time.perf_counter() - started
        )
        return [(item, result)]

    async def _score_cpu(
        self, work: list[tuple[_InFlight, list[CpuScorer]]]
    ) -> list[tuple[_InFlight, EvalResult]]:
        """The batch's CPU scorers in one worker-thread hop, under one deadline."""
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

    def _score_all(
        self, work: list[tuple[_InFlight, list[CpuScorer]]]
    ) -> list[tuple[_InFlight, EvalResult, float]]:
        timed = []
        for item, evaluators in work:
            for evaluator in evaluators:
                started = time.perf_counter()
                try:
                    result = evaluator.score(item.job.record)
                except Exception as exc:
                    result = self._failed(evaluator.name, item.job.record, exc)
                timed.append((item, result, time.perf_counter() - started))
        return timed

    def _timed_out(self, name: str) -> EvalResult:
        return EvalResult.failed(name, f"timeout: no verdict within {self._timeout:g}s")

    def _failed(self, name: str, record: RagRecord, exc: Exception) -> EvalResult:
        self._warn.warning(
            name, "evaluator %s failed on record %s: %s", name, record.request_id, exc
        )
        return EvalResult.failed(name, f"{type(exc).__name__}: {exc}")
