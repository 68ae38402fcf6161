"""The evaluation stage: a bounded intake queue drained by worker tasks.

The trace stage hands in sampled traces (`SampledTrace`: spans as assembled) and records
(`SampledRecord`: Kafka JSON, replay), each with the set of evaluators that sample it —
decided once upstream — with `take`, on the event loop, which never waits: the queue
(`_queue.py`) is bounded in items (`pipeline.queue_size`) and in bytes
(`pipeline.queue_bytes`, what is in work counted too, at what it will cost: a record at
its estimated size, `record_bytes`; a trace at its spans' bytes until it is extracted and
at its records' estimated size after), and while it is `full` the trace stage refuses new
deliveries, so a slow stage pushes back all the way to the receivers. `put_many`
(benches, tests) waits for room instead.

Each worker (an asyncio task) takes a batch of what is queued (up to `_MAX_BATCH` items
when every evaluator is a CPU scorer, else one; woken at most once per
`_queue.BATCH_INTERVAL_S` unless a whole batch waits) and runs one task for it
(`_task.py`): it
extracts the traces' records and scores every record with the CPU scorers (`CpuScorer`,
the local evaluators) that sample it, in a process of the worker pool
(`pipeline.processes`) or, without one, in one worker-thread hop (`_runner.py`). Each
trace's `on_extracted` is then told what became of it, and the records go through
`_evaluators.py`: decisions counted, CPU results taken, LLM judges run concurrently under
the evaluation deadline. Every sink gets the batch's results in one `emit`. With a
pool, there are at least as many workers as the pool has batch slots, so that every
worker process always has its next batch. The stage starts the pool it is handed and stops it after its own drain; its
sinks run from before it starts until after it stops (`monitor.service`).

An item's `on_done` is called once it is finished — its records evaluated or deliberately
skipped (a trace that gives none: at once) and, for sinks that persist results, their
results written (True) — or once it is abandoned at the shutdown deadline (a trace not
extracted in time), its results could not be persisted, or it failed here twice (False).
What the shutdown deadline leaves unevaluated is written unevaluated, not abandoned
(`_write_unevaluated`: marked `not_evaluated`, error results, counted in
`records_not_evaluated_total`); it is then finished like any other. The Kafka receiver commits
offsets on it. A failure costs one item: a batch that fails is tried again item by item,
and a sink that fails on a record's results loses that record alone
(`dropped_total{stage="evaluate"}`, reasons `internal_error` and `sink_error`). Sinks that
persist results bound how many items may wait for their writes: past that, workers wait
before taking more (a results file on a full disk stops intake instead of being skipped).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from monitor.component import Evaluated, ResultSink, SampledRecord, SampledTrace
from monitor.config import EvaluatorConfig, ExternalVerdicts
from monitor.evaluators.base import CpuScorer, Evaluator
from monitor.extraction import TraceRecords, Unreadable
from monitor.pool import ProcessPool
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation._evaluators import BatchEvaluator
from monitor.processors.evaluation._external import ExternalScreen
from monitor.processors.evaluation._flights import BatchTasks, describe
from monitor.processors.evaluation._other_revision import OtherRevision
from monitor.processors.evaluation._queue import Item, WorkQueue
from monitor.processors.evaluation._runner import TaskRunner
from monitor.processors.evaluation._task import (
    EXTRACT_TIMEOUT,
    Job,
    OverBudget,
    Settings,
    extracted,
    extraction_budget,
)
from monitor.records import NOT_EVALUATED, RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

# Queued items a worker takes at once. Bounded so that one batch of large records stays
# well inside the evaluation deadline and other workers get a share of a burst.
_MAX_BATCH = 16
_POOL_GRACE_S = 5.0
# The share of the shutdown deadline (and at most the seconds) kept to write, unevaluated,
# what the drain did not finish: records are handed to the sinks at once, traces are
# extracted first.
_UNEVALUATED_SHARE = 0.25
_UNEVALUATED_MAX_S = 5.0
# How long writes a stopped sink still owes are waited for before they are given up.
_WRITE_GRACE_S = 5.0


class EvaluationStage:
    def __init__(
        self,
        evaluators: Sequence[tuple[Evaluator, EvaluatorConfig]],
        budget: BudgetGate,
        sinks: Sequence[ResultSink],
        telemetry: Telemetry,
        *,
        queue_size: int = 1000,
        queue_bytes: int = 32 * 1024 * 1024,
        workers: int = 4,
        evaluation_timeout_s: float = 60.0,
        extraction_timeout_s: float = 10.0,
        cpu_pool: ProcessPool | None = None,
        settings: Settings | None = None,
        revisions: Mapping[str, str] | None = None,
        judge_timeout_s: float | None = None,
        others: Mapping[str, OtherRevision] | None = None,
        clock: Callable[[], float] = time.time,
        external: ExternalVerdicts | None = None,
    ) -> None:
        """`external`: who may send the verdicts an app writes into its traces, which
        `settings` say whether to read (`_external.py`; none taken without it).
        `judge_timeout_s`: a judge evaluator's deadline (`evaluation_timeout_s` unless
        given: the pipeline gives the judge client's own longest call).
        `cpu_pool`'s workers must run `_task.worker_initializer` with the same CPU
        scorers and `settings` (how traces are extracted and bounded, whether suspect
        records are scored). `revisions`: each evaluator's revision, carried by its
        results (`monitor.evaluators.revision`). `others`: evaluators' other
        revisions, by evaluator (`_other_revision.py`; a pool's workers must have been given
        those that are CPU scorers), compared with `clock` (seconds since the epoch)."""
        settings = settings or Settings()
        self._settings = settings  # how what the shutdown deadline leaves is extracted
        others = dict(others or {})
        scorers = {ev.name: ev for ev, _ in evaluators if isinstance(ev, CpuScorer)}
        self._runner = TaskRunner(
            cpu_pool,
            scorers,
            settings,
            evaluation_timeout_s=evaluation_timeout_s,
            extraction_timeout_s=extraction_timeout_s,
            others={
                name: old.evaluator
                for name, old in others.items()
                if isinstance(old.evaluator, CpuScorer)
            },
        )
        self._evaluators = BatchEvaluator(
            evaluators,
            budget,
            telemetry,
            evaluation_timeout_s,
            self._runner,
            pooled=cpu_pool is not None,
            evaluate_suspect=settings.evaluate_suspect,
            revisions=revisions,
            judge_timeout_s=judge_timeout_s,
            others=others,
            clock=clock,
        )
        # Judges are admitted to the budget before they run and charged after: batching
        # records with judges would admit a whole batch on one reading of the budget.
        max_batch = _MAX_BATCH if self._evaluators.cpu_only else 1
        self._sinks = list(sinks)
        self._t = telemetry
        self._queue = WorkQueue(
            queue_size, queue_bytes, max_batch, telemetry.gauge("queue_depth").labels("evaluate")
        )
        screen = ExternalScreen(external, telemetry) if external and settings.verdicts else None
        self._batches = BatchTasks(self._runner, self._evaluators, self._queue, telemetry, screen)
        self._idle = asyncio.Event()  # nothing queued and nothing in work
        self._write_room = asyncio.Event()  # fewer unwritten records than the bound
        # Enough tasks to keep every batch slot of the pool taken.
        self._workers = max(workers, cpu_pool.slots) if cpu_pool is not None else workers
        self._pool = cpu_pool
        self._tasks: list[asyncio.Task[None]] = []
        # Items evaluated whose results wait to be persisted; bounded like the queue.
        self._unwritten = 0
        self._completed = 0
        self._abandoned = 0
        self._stopped = False
        # Writes of what the shutdown deadline left unevaluated (`_write_unevaluated`).
        self._unevaluated_writes: list[asyncio.Future[list[bool]]] = []
        self._unevaluated = telemetry.counter("records_not_evaluated")

    @property
    def completed(self) -> int:
        """Items finished here (evaluated, or skipped for every evaluator they reached)."""
        return self._completed

    @property
    def accepting(self) -> bool:
        return self._queue.accepting

    async def start(self) -> None:
        if self._pool is not None:
            await self._pool.start()
        await self._evaluators.warm_up()
        self._tasks = [
            asyncio.create_task(self._work(), name=f"evaluate-{i}") for i in range(self._workers)
        ]
        self._queue.accepting = True

    @property
    def full(self) -> bool:
        """Whether the queue holds what its bounds allow (an empty queue never does)."""
        return self._queue.full

    def take(self, items: Sequence[Item]) -> int:
        """Queue `items` at once, past the bounds if need be; 0 once stopped accepting."""
        return self._queue.take(items)

    async def room(self) -> bool:
        """Wait until the stage is not `full`; False once it stopped accepting."""
        return await self._queue.room()

    async def put_many(self, items: Sequence[Item]) -> int:
        """Take items in order, waiting for room for each; returns how many were taken
        before the stage stopped accepting (the caller still owns the rest)."""
        return await self._queue.put(items)

    @property
    def abandoned(self) -> int:
        """Items abandoned by `shutdown`: not finished by its deadline, or their results
        never persisted (a trace counts as one; see `settle_writes`)."""
        return self._abandoned

    async def shutdown(self, deadline_s: float) -> None:
        """Stop intake, let queued and in-flight items finish until the deadline, then
        cancel what is left (its `on_done` gets False) and stop the worker pool; the sinks
        are stopped after it (`monitor.service`). `abandoned` counts the items given up.
        Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        started = time.monotonic()
        self._queue.stop()
        # Kept of the deadline to write what could not be evaluated by then.
        reserve = min(_UNEVALUATED_MAX_S, deadline_s * _UNEVALUATED_SHARE)
        drained = True
        try:
            async with asyncio.timeout(deadline_s - reserve):
                while self._queue or self._queue.in_work:
                    self._idle.clear()
                    await self._idle.wait()
        except TimeoutError:
            drained = False
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if not drained:
            await self._write_unevaluated(deadline_s, _left(deadline_s, started))
        if self._pool is not None:
            # The workers are idle unless items were left: either way they get what is
            # left of the deadline (and at most a few seconds) to exit.
            await self._pool.shutdown(min(_POOL_GRACE_S, _left(deadline_s, started)))

    async def _write_unevaluated(self, deadline_s: float, left_s: float) -> None:
        """What the drain left (queued, or in work with no results yet; the workers are
        stopped) goes to the sinks unevaluated: each record marked `NOT_EVALUATED` with
        an error result for each evaluator that sampled it, counted in
        `records_not_evaluated_total`. A trace is extracted here first, within what is
        left of the deadline; one that is not by then is the only thing given up
        (`dropped_total{reason="shutdown_deadline"}`; Kafka reads it again)."""
        told: set[int] = set()
        left: list[Item] = list(self._queue.clear())
        for work in list(self._queue.in_work.values()):
            if work.writing is None:  # those being written are the sinks' to finish
                left.append(work.item)
                if work.told:
                    told.add(id(work.item))
                self._queue.done(work.item)
        if not left:
            return
        log.warning(
            "shutdown deadline of %.1fs passed; writing %d sampled traces and records unevaluated",
            deadline_s,
            len(left),
        )
        traces = [item for item in left if isinstance(item, SampledTrace)]
        # No question topics: the detector's vectors load in the workers only, and a
        # record not evaluated feeds no alert rule's attribution.
        settings = dataclasses.replace(self._settings, topics=False)
        extractions = _extract_all(traces, settings, time.monotonic() + left_s)
        given_up: list[Item] = []
        done: list[Evaluated] = []
        owners: list[Item] = []
        for item in left:
            if isinstance(item, SampledRecord):
                records = [item.record]
            elif (extraction := extractions.get(id(item))) is None:
                given_up.append(item)
                continue
            else:
                if id(item) not in told:
                    self._told(item, extraction)
                records = extraction.records if isinstance(extraction, TraceRecords) else []
            for record in records:
                done.append(_unevaluated(record, item.sampled))
                owners.append(item)
            if not records and item.on_done is not None:
                item.on_done(True)  # a trace that gives no record is finished at once
        self._unevaluated.labels("shutdown_deadline").inc(len(done))
        self._deliver_unevaluated(done, owners)
        if given_up:
            self._abandoned += len(given_up)
            self._t.counter("dropped").labels("evaluate", "shutdown_deadline").inc(len(given_up))
            log.warning(
                "shutdown deadline passed before %d sampled traces were extracted; given up: %s",
                len(given_up),
                ", ".join(describe(item) for item in given_up[:10]),
            )
            for item in given_up:
                if item.on_done is not None:
                    item.on_done(False)

    def _told(self, item: SampledTrace, extraction: TraceRecords | Unreadable) -> None:
        try:
            item.on_extracted(extraction)
        except Exception:
            log.exception("telling the trace stage what %s gave", describe(item))

    def _deliver_unevaluated(self, done: list[Evaluated], owners: list[Item]) -> None:
        """Every sink gets the unevaluated records; an item is finished once each of its
        records is written where sinks persist (False: a write failed, it is abandoned)."""
        writes: dict[int, list[asyncio.Future[bool]]] = {}
        for sink in self._sinks:
            for item, written in zip(owners, self._emit(sink, done, owners), strict=True):
                if written is not None:
                    writes.setdefault(id(item), []).append(written)
        finished: set[int] = set()
        for item in owners:
            if id(item) in finished:
                continue
            finished.add(id(item))
            owed = writes.get(id(item))
            if not owed:
                if item.on_done is not None:
                    item.on_done(True)
                continue
            gathered = asyncio.gather(*owed)
            self._unevaluated_writes.append(gathered)
            gathered.add_done_callback(partial(self._unevaluated_written, item))

    def _unevaluated_written(self, item: Item, writes: asyncio.Future[list[bool]]) -> None:
        ok = _written_ok(writes)
        if not ok:
            self._abandoned += 1
            self._t.counter("dropped").labels("evaluate", "shutdown_deadline").inc()
        if item.on_done is not None:
            item.on_done(ok)

    async def settle_writes(self, grace_s: float = _WRITE_GRACE_S) -> None:
        """Once the stage and then its sinks stopped: the results the sinks still owed
        are written or not (stopping a sink resolves every write it owes; one that does
        not within `grace_s` is given up). Items whose results were not written count as
        abandoned."""
        writing = [w.writing for w in self._queue.in_work.values() if w.writing is not None]
        writing += [w for w in self._unevaluated_writes if not w.done()]
        if not writing:
            return
        _, late = await asyncio.wait(writing, timeout=grace_s)
        for future in late:
            log.warning("a sink did not resolve a write when it stopped; giving it up")
            future.cancel()
        if late:
            await asyncio.sleep(0)  # the cancelled writes' callbacks finish their items

    async def _take(self) -> list[Item]:
        """Wait for room among unwritten results, then for work; take up to a batch."""
        while self._unwritten >= self._queue.max_items:
            self._write_room.clear()
            await self._write_room.wait()
        return await self._queue.next_batch()

    async def _work(self) -> None:
        while True:
            # Take what is waiting (up to a bound): the CPU scorers of the whole batch
            # then share one worker-thread hop.
            items = await self._take()
            try:
                await self._process(items)
            except Exception:
                # A bug in an evaluator wrapper must not kill the worker, nor cost the
                # batch-mates of the item that meets it: each item still unhandled gets a
                # second try on its own, and only one failing again is given up.
                log.warning(
                    "a batch of %d items failed in the evaluation stage; trying each alone",
                    len(items),
                    exc_info=True,
                )
                for item in items:
                    work = self._queue.in_work.get(id(item))
                    if work is not None and work.writing is None:
                        await self._process_alone(item)

    async def _process_alone(self, item: Item) -> None:
        try:
            await self._process([item])
        except Exception as exc:
            log.exception("%s failed in the evaluation stage twice; giving it up", describe(item))
            self._t.counter("dropped").labels("evaluate", "internal_error").inc()
            _failed(item, f"evaluation stage: {type(exc).__name__}: {exc}")
            self._finish(item, ok=False)

    def _finish(self, item: Item, ok: bool = True) -> None:
        """`item` is finished: call its `on_done` unless shutdown already abandoned it."""
        if self._queue.done(item) is None:
            return
        self._completed += 1
        if item.on_done is not None:
            item.on_done(ok)
        if not self._queue and not self._queue.in_work:
            self._idle.set()

    def _written(self, item: Item, writes: asyncio.Future[list[bool]]) -> None:
        self._unwritten -= 1
        self._write_room.set()
        ok = _written_ok(writes)
        if not ok and self._stopped:
            # A sink stopped with these results unwritten (the shutdown deadline passed).
            self._abandoned += 1
            self._t.counter("dropped").labels("evaluate", "shutdown_deadline").inc()
        self._finish(item, ok)

    async def _process(self, items: list[Item]) -> None:
        """One task for the batch (extraction and CPU scoring), then each record's other
        evaluators, then the sinks; each item is finished once its results are written."""
        flights = await self._batches.run(items)
        batch = [flight for _, records in flights for flight in records]
        await self._evaluators.evaluate(batch)
        done: list[Evaluated] = []
        owners: list[int] = []  # the index in `flights` of each record of `done`
        for i, (_, records) in enumerate(flights):
            for flight in records:
                if flight.results:
                    done.append(Evaluated(flight.record, flight.results, flight.shadow))
                    owners.append(i)
        writes: list[list[asyncio.Future[bool]]] = [[] for _ in flights]
        if done:
            for sink in self._sinks:
                owned = [flights[i][0] for i in owners]
                for i, written in zip(owners, self._emit(sink, done, owned), strict=True):
                    if written is not None:
                        writes[i].append(written)
        for (item, _), owed in zip(flights, writes, strict=True):
            if owed:
                # Finished once persisted; the worker moves on without waiting, unless
                # too many items already wait for their writes (see `_take`).
                self._unwritten += 1
                gathered = asyncio.gather(*owed)
                work = self._queue.in_work.get(id(item))
                if work is not None:  # not abandoned by the shutdown deadline meanwhile
                    work.writing = gathered
                gathered.add_done_callback(partial(self._written, item))
            else:
                self._finish(item)

    def _emit(
        self, sink: ResultSink, done: list[Evaluated], items: list[Item]
    ) -> Sequence[asyncio.Future[bool] | None]:
        """`sink.emit(done)`: what each record's results owe (None: nothing); if that
        fails, one record at a time, so that only a record it fails on again is lost to
        this sink: it counts as not finished (its results are not persisted there), and
        the sink goes on."""
        try:
            return sink.emit(done) or [None] * len(done)
        except Exception:
            pass  # each record is tried again alone
        each: list[asyncio.Future[bool] | None] = []
        for evaluated, item in zip(done, items, strict=True):
            try:
                written = sink.emit([evaluated])
                each.append(written[0] if written else None)
            except Exception as exc:
                self._sink_failed(sink, evaluated.record)
                _failed(item, f"{type(sink).__name__}: {type(exc).__name__}: {exc}")
                unwritten: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
                unwritten.set_result(False)
                each.append(unwritten)
        return each

    def _sink_failed(self, sink: ResultSink, record: RagRecord) -> None:
        self._t.counter("dropped").labels("evaluate", "sink_error").inc()
        log.exception(
            "%s failed on the results of record %s (service %s); its other records go on",
            type(sink).__name__,
            record.request_id,
            record.service,
        )


def _extract_all(
    traces: list[SampledTrace], settings: Settings, until: float
) -> dict[int, TraceRecords | Unreadable]:
    """Each trace's records, by the item's id, extracted until the monotonic time `until`
    (those after it are left out). Here, on the event loop's thread, so that each
    extraction is bounded by an alarm (`extraction_budget`): its own budget, or what is
    left of the deadline when that is less (the loop has nothing else to do by now)."""
    out: dict[int, TraceRecords | Unreadable] = {}
    own = settings.extraction_budget_s or math.inf
    for item in traces:
        left = until - time.monotonic()
        if left <= 0:
            break
        job = Job((), spans=item.spans, metadata=item.metadata)
        try:
            with extraction_budget(min(own, left)):
                out[id(item)] = extracted(job, settings)
        except OverBudget:
            if own <= left:  # its own budget passed: set aside as the workers do
                why = f"extraction passed its budget of {own:g}s"
                out[id(item)] = Unreadable(EXTRACT_TIMEOUT, why)
        except Exception as exc:
            out[id(item)] = Unreadable("extract_failed", f"cannot build a record: {exc}")
    return out


def _unevaluated(record: RagRecord, sampled: frozenset[str]) -> Evaluated:
    """The record marked not evaluated, with an error result for each evaluator that
    sampled it (never a pass, never a defect)."""
    marked = record.model_copy(
        update={"metadata": {**record.metadata, NOT_EVALUATED: "shutdown_deadline"}}
    )
    error = "not evaluated: the monitor stopped before its shutdown deadline let it"
    return Evaluated(marked, {name: EvalResult.failed(name, error) for name in sorted(sampled)})


def _failed(item: Item, detail: str) -> None:
    """Tell a record's receiver it failed (before its `on_done(False)`)."""
    if isinstance(item, SampledRecord) and item.on_failed is not None:
        try:
            item.on_failed(detail[:2000])
        except Exception:
            log.exception("telling the receiver that record %s failed", item.record.request_id)


def _left(deadline_s: float, started: float) -> float:
    return max(0.0, deadline_s - (time.monotonic() - started))


def _written_ok(writes: asyncio.Future[list[bool]]) -> bool:
    return not writes.cancelled() and writes.exception() is None and all(writes.result())
