"""The evaluation stage: a bounded intake queue drained by worker tasks.

The trace stage hands in `SampledRecord`s — records with the set of evaluators that
sample them, decided once upstream — with `put_many`, which waits for room: the queue is
bounded in records (`pipeline.queue_size`) and in the bytes of their text
(`pipeline.queue_bytes`), so a slow stage pushes back all the way to the receivers.

Each worker takes a queued record and runs its sampled evaluators: network ones (LLM
judges) concurrently, each call under the evaluation deadline, and CPU scorers
(`CpuScorer`, the local evaluators) together: in the worker-process pool (`CpuPool`,
`pipeline.processes`) or, without one, in one worker-thread hop under one deadline, since
a hop costs about as much CPU as scoring a small record. When every evaluator is a CPU
scorer, a worker takes the records waiting (up to `_MAX_BATCH`) and scores the whole
batch in one trip. With a pool there are at least as many workers as the pool has batch
slots, so that every worker process always has its next batch. Results go to every sink.

A record's `on_done` is called once it is finished — evaluated or deliberately skipped —
and, for sinks that persist results, its results are written (True), or once it is
abandoned at the shutdown deadline or its results could not be persisted (False). The
Kafka receiver commits offsets on it. Sinks that persist results bound how many records
may wait for their writes: past that, workers wait before taking more (a results file on
a full disk stops intake instead of being skipped).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter as Tally
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import cast

from monitor.component import BatchSink, ResultSink, SampledRecord
from monitor.config import EvaluatorConfig
from monitor.evaluators.base import CpuScorer, EvalResult, Evaluator
from monitor.processors._workers import CpuPool as CpuPool
from monitor.processors.budget import BudgetGate
from monitor.records import RagRecord
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)
_PARTS = ("query", "context", "response")  # the order a skip's reason is named in

# Queued records a worker takes at once. Bounded so that one batch of large records stays
# well inside the evaluation deadline and other workers get a share of a burst.
_MAX_BATCH = 16
_POOL_GRACE_S = 5.0
# How long writes a closed sink still owes are waited for before they are given up.
_WRITE_GRACE_S = 5.0


@dataclass(slots=True)
class _InFlight:
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


class EvaluationStage:
    def __init__(
        self,
        evaluators: Sequence[tuple[Evaluator, EvaluatorConfig]],
        budget: BudgetGate,
        sinks: Sequence[ResultSink | BatchSink],
        telemetry: Telemetry,
        *,
        queue_size: int = 1000,
        queue_bytes: int = 32 * 1024 * 1024,
        workers: int = 4,
        evaluation_timeout_s: float = 60.0,
        cpu_pool: CpuPool | None = None,
    ) -> None:
        stages = [_Stage(ev, spec.escalate_from, spec.band) for ev, spec in evaluators]
        # Escalated evaluators run after the evaluator they escalate from.
        self._first = [s for s in stages if s.escalate_from is None]
        self._escalated = [s for s in stages if s.escalate_from is not None]
        self._cpu = {s.evaluator.name for s in stages if isinstance(s.evaluator, CpuScorer)}
        # Judges are admitted to the budget before they run and charged after: batching
        # records with judges would admit a whole batch on one reading of the budget.
        self._max_batch = _MAX_BATCH if len(self._cpu) == len(stages) else 1
        self._budget = budget
        self._batch_sinks = [sink for sink in sinks if isinstance(sink, BatchSink)]
        self._sinks = [sink for sink in sinks if not isinstance(sink, BatchSink)]
        self._all_sinks = list(sinks)
        self._t = telemetry
        self._queue: deque[SampledRecord] = deque()
        self._queue_size = queue_size
        self._queue_bytes = queue_bytes
        self._queued_bytes = 0
        # One lock for the queue; putters wait for room, workers for work, apart: a
        # record handed in wakes as many workers as it makes batches, not all of them.
        self._lock = asyncio.Lock()
        self._has_room = asyncio.Condition(self._lock)  # records left the queue, or stopping
        self._has_work = asyncio.Condition(self._lock)  # records entered the queue
        self._idle = asyncio.Event()  # nothing queued and nothing in work
        self._write_room = asyncio.Event()  # fewer unwritten records than the bound
        # Enough tasks to keep every batch slot of the pool taken.
        self._workers = max(workers, cpu_pool.slots) if cpu_pool is not None else workers
        self._timeout = evaluation_timeout_s
        # With a pool, CPU scorers run in worker processes; without, in a thread hop here.
        self._pool = cpu_pool
        self._tasks: list[asyncio.Task[None]] = []
        self._warn = RateLimitedLog(log)
        self._depth = telemetry.queue_depth.labels("evaluate")
        self._accepting = False
        self._in_work: dict[int, SampledRecord] = {}
        # Records evaluated whose results wait to be persisted; bounded like the queue.
        self._unwritten = 0
        # Records whose results a sink is still persisting, by id: past the shutdown
        # deadline they are not abandoned, since closing the sinks writes them.
        self._writing: dict[int, asyncio.Future[list[bool]]] = {}
        self._completed = 0

    @property
    def completed(self) -> int:
        """Records finished here (evaluated, or skipped for every evaluator they reached)."""
        return self._completed

    @property
    def accepting(self) -> bool:
        return self._accepting

    async def start(self) -> None:
        if self._pool is not None:
            await self._pool.start()
        for stage in self._first + self._escalated:
            if self._pool is not None and stage.evaluator.name in self._cpu:
                continue  # its models load in the worker processes
            warm_up = getattr(stage.evaluator, "warm_up", None)
            if warm_up is not None:
                await warm_up()
        for sink in self._all_sinks:
            await sink.start()
        self._tasks = [
            asyncio.create_task(self._work(), name=f"evaluate-{i}") for i in range(self._workers)
        ]
        self._accepting = True

    async def put_many(self, items: Sequence[SampledRecord]) -> int:
        """Take items in order, waiting for room; returns how many were taken before the
        stage stopped accepting (the caller still owns the rest)."""
        sizes = [item.size for item in items]
        taken = 0
        async with self._lock:
            while taken < len(items):
                await self._has_room.wait_for(partial(self._room_for, sizes[taken]))
                if not self._accepting:
                    break
                # Everything that fits at once: one wake-up of the workers, not one a record.
                while taken < len(items) and self._room_for(sizes[taken]):
                    self._queue.append(items[taken])
                    self._queued_bytes += sizes[taken]
                    taken += 1
                self._depth.set(len(self._queue))
                self._has_work.notify(-(-len(self._queue) // self._max_batch))  # one per batch
        return taken

    def _room_for(self, size: int) -> bool:
        """Whether `put_many` can go on: room for `size` bytes, or no longer accepting.
        One record larger than the byte bound still enters an empty queue."""
        return (
            not self._accepting
            or not self._queue
            or (
                len(self._queue) < self._queue_size
                and self._queued_bytes + size <= self._queue_bytes
            )
        )

    async def shutdown(self, deadline_s: float) -> int:
        """Stop intake, let queued and in-flight records finish until the deadline, then
        cancel what is left (its `on_done` gets False) and flush the sinks. Returns how
        many records were abandoned."""
        started = time.monotonic()
        async with self._lock:
            self._accepting = False
            self._has_room.notify_all()
        abandoned = 0
        try:
            async with asyncio.timeout(deadline_s):
                while self._queue or self._in_work:
                    self._idle.clear()
                    await self._idle.wait()
        except TimeoutError:
            unevaluated = [job for key, job in self._in_work.items() if key not in self._writing]
            left = [*self._queue, *unevaluated]
            abandoned = len(left)
            self._queue.clear()
            for job in unevaluated:
                del self._in_work[id(job)]
            log.warning(
                "shutdown deadline of %.1fs passed; abandoning %d records", deadline_s, abandoned
            )
            self._t.dropped.labels("evaluate", "shutdown_deadline").inc(abandoned)
            for item in left:
                if item.on_done is not None:
                    item.on_done(False)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._pool is not None:
            # The workers are idle unless records were abandoned: either way they get
            # what is left of the deadline (and at most a few seconds) to exit.
            remaining = deadline_s - (time.monotonic() - started)
            await self._pool.close(grace_s=min(_POOL_GRACE_S, max(0.0, remaining)))
        for sink in self._all_sinks:
            try:
                await sink.shutdown(max(0.0, deadline_s - (time.monotonic() - started)))
            except Exception:
                log.exception("sink %s failed to shut down", type(sink).__name__)
        return abandoned + await self._writes_after_close()

    async def _writes_after_close(self) -> int:
        """Wait for the writes the closed sinks still owe (closing resolves them; one
        that does not within a grace period is given up) and return how many failed:
        those records' results are not persisted, so they count as abandoned."""
        writing = list(self._writing.values())
        if not writing:
            return 0
        _, late = await asyncio.wait(writing, timeout=_WRITE_GRACE_S)
        for future in late:
            log.warning("a sink did not resolve a write when it closed; giving it up")
            future.cancel()
        await asyncio.sleep(0)  # the cancelled writes' callbacks finish their records
        failed = sum(1 for future in writing if not _written_ok(future))
        if failed:
            self._t.dropped.labels("evaluate", "shutdown_deadline").inc(failed)
        return failed

    async def _take(self) -> list[SampledRecord]:
        """Wait for room among unwritten results, then for work; take up to a batch."""
        while self._unwritten >= self._queue_size:
            self._write_room.clear()
            await self._write_room.wait()
        async with self._lock:
            await self._has_work.wait_for(lambda: bool(self._queue))
            jobs = [self._queue.popleft()]
            while len(jobs) < self._max_batch and self._queue:
                jobs.append(self._queue.popleft())
            for job in jobs:
                self._queued_bytes -= job.size
                self._in_work[id(job)] = job
            self._depth.set(len(self._queue))
            if self._queue:
                self._has_work.notify()  # more than this batch was waiting: pass it on
            self._has_room.notify_all()
        return jobs

    async def _work(self) -> None:
        while True:
            # Take what is waiting (up to a bound): the CPU scorers of the whole batch
            # then share one worker-thread hop.
            jobs = await self._take()
            try:
                await self._process(jobs)
            except Exception:
                # A bug in a sink or evaluator wrapper must not kill the worker.
                log.exception(
                    "records %s failed in the evaluation stage",
                    ", ".join(job.record.request_id for job in jobs),
                )
                self._t.dropped.labels("evaluate", "internal_error").inc(len(jobs))
                for job in jobs:
                    self._finish(job, ok=False)

    def _finish(self, job: SampledRecord, ok: bool = True) -> None:
        """`job` is finished: call its `on_done` unless shutdown already abandoned it."""
        if self._in_work.pop(id(job), None) is None:
            return
        self._completed += 1
        if job.on_done is not None:
            job.on_done(ok)
        if not self._queue and not self._in_work:
            self._idle.set()

    def _written(self, job: SampledRecord, writes: asyncio.Future[list[bool]]) -> None:
        self._unwritten -= 1
        self._writing.pop(id(job), None)
        self._write_room.set()
        self._finish(job, _written_ok(writes))

    async def _process(self, jobs: list[SampledRecord]) -> None:
        batch = []
        for job in jobs:
            service = self._t.service_cap(job.record.service)
            batch.append(_InFlight(job, service, job.record.missing(), {}))
        await self._run(self._first, batch)
        if self._escalated:
            await self._run(self._escalated, batch)
        if self._batch_sinks:
            done = [(flight.item.record, flight.results) for flight in batch if flight.results]
            if done:
                for batch_sink in self._batch_sinks:
                    batch_sink.emit_many(done)
        for flight in batch:
            job, results = flight.item, flight.results
            writes = []
            if results:
                for sink in self._sinks:
                    written = sink.emit(job.record, results)
                    if written is not None:
                        writes.append(written)
            if writes:
                # Finished once persisted; the worker moves on without waiting, unless
                # too many records already wait for their writes (see `_take`).
                self._unwritten += 1
                gathered = asyncio.gather(*writes)
                self._writing[id(job)] = gathered
                gathered.add_done_callback(partial(self._written, job))
            else:
                self._finish(job)

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

    async def _run(self, stages: list[_Stage], batch: list[_InFlight]) -> None:
        """One round of evaluators over a batch: each record's network evaluators run
        concurrently, and every CPU scorer of the batch in one worker-thread hop."""
        calls = []
        cpu_work: list[tuple[_InFlight, list[CpuScorer]]] = []
        decisions: Tally[tuple[str, str, str]] = Tally()
        for item in batch:
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

    async def _one(
        self, evaluator: Evaluator, item: _InFlight
    ) -> list[tuple[_InFlight, EvalResult]]:
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
        self, work: list[tuple[_InFlight, list[CpuScorer]]]
    ) -> list[tuple[_InFlight, EvalResult]]:
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
        self, pool: CpuPool, work: list[tuple[_InFlight, list[CpuScorer]]]
    ) -> list[tuple[_InFlight, EvalResult]]:
        """The pool enforces the deadline itself (a worker past it is replaced)."""
        scored = await pool.score(
            [(item.item.record, tuple(ev.name for ev in evs)) for item, evs in work]
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
        self, work: list[tuple[_InFlight, list[CpuScorer]]]
    ) -> list[tuple[_InFlight, EvalResult, float]]:
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


def _written_ok(writes: asyncio.Future[list[bool]]) -> bool:
    return not writes.cancelled() and writes.exception() is None and all(writes.result())
