"""The trace stage: spans and records from every receiver → assembled traces → one
sampling decision → the evaluation stage, which extracts the sampled traces' records.

Receivers hand `Delivery`s to `consume` from any thread (the OTLP decode thread, the
Kafka consumer thread, the event loop for replay and for small OTLP requests). They wait in a bounded intake
(`_intake.py`) that one worker thread drains: it assembles spans into traces
(`TraceAssembler`, bounded in traces and bytes), decides sampling once per released trace
(`_sampling.py`), and hands sampled traces (their spans as assembled) and records on with
the decision attached, in batches (`_handoff.py`). Records that arrive as records (Kafka
JSON, replay) are sampled the same way. The worker blocks while the evaluation
stage is full, so the intake fills and `consume` refuses: receivers push back (HTTP 503,
gRPC UNAVAILABLE, paused Kafka partitions) instead of the process buffering without
bound. A delivery's `on_done` is called once everything built from it has finished
(`_acks.py`); a receiver can hand back what came from an origin (`abandon`): open traces
made only of its deliveries are dropped unevaluated and those deliveries done with False;
and it can suspend an origin (`suspend`) while it does not know whether it will read it
again: open traces holding its deliveries are then not released for idleness, since no
span of theirs can come, until it resumes the origin or hands it back.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from functools import partial

from monitor.component import (
    Delivery,
    Invalid,
    RecordConsumer,
    SampledRecord,
    SampledTrace,
    TraceObserver,
)
from monitor.config import TraceAssembly
from monitor.processors.sampler import Sampler
from monitor.processors.trace._acks import Ack, Acknowledgements
from monitor.processors.trace._assembler import FinishedTrace, TraceAssembler
from monitor.processors.trace._handoff import HAND_ON_ITEMS, HandOn
from monitor.processors.trace._intake import Pending, Ready, TraceIntake
from monitor.processors.trace._outcomes import Outcomes, log
from monitor.processors.trace._sampling import TraceSampling
from monitor.processors.trace._triage import TraceTriage
from monitor.record_limits import SizeLimits
from monitor.records import RagRecord, RawRecord
from monitor.telemetry import Telemetry

# Spans and records the event loop assembles itself when it hands them in (`_work_here`).
LOOP_ASSEMBLY_ITEMS = 64


class TraceStage:
    """Owns trace assembly and the sampling decision for every receiver."""

    def __init__(
        self,
        assembly: TraceAssembly,
        sampler: Sampler,
        consumer: RecordConsumer,
        telemetry: Telemetry,
        *,
        route_attribute: str = "http.route",
        route_in_sampling: bool = True,
        observer: TraceObserver | None = None,
        limits: SizeLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        pace_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._outcomes = Outcomes(telemetry, observer, limits or SizeLimits())
        self._sampling = TraceSampling(
            sampler, self._outcomes, route_attribute if route_in_sampling else None
        )
        self._acks = Acknowledgements()
        self._clock = clock  # trace expiry
        self._tick = min(1.0, assembly.idle_timeout_s / 4)
        self._hand_on = HandOn(consumer, self._outcomes, tick=self._tick, pace_clock=pace_clock)
        self._intake = TraceIntake(assembly.queue_size, assembly.queue_bytes, self._made_room)
        self._assembler = TraceAssembler(
            idle_timeout_s=assembly.idle_timeout_s,
            max_open_traces=assembly.max_open_traces,
            max_open_bytes=assembly.max_open_bytes,
            on_drop=self._outcomes.assembly_dropped,
            clock=clock,
            log_events_wait_s=assembly.log_events_wait_s,
        )
        self._metadata: dict[str, Mapping[str, str]] = {}  # by trace id, from its first delivery
        self._suspended: set[Hashable] = set()  # origins whose open traces idle expiry keeps
        # Assembly state (assembler, open traces' acknowledgements, metadata): the thread
        # that hands a delivery in does its work when it can take this lock, else the
        # worker does.
        self._work_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._flush = False
        self._next_expiry = 0.0
        # Owned by the event loop.
        self._loop_thread = 0
        self._room: asyncio.Event | None = None
        self._room_wanted = False
        self._thread: threading.Thread | None = None
        self._finished: asyncio.Future[None] | None = None
        self._stopped = False
        self.open_traces = self._outcomes.open_traces
        self.open_trace_bytes = self._outcomes.open_trace_bytes
        self.assembled = self._outcomes.assembled
        self.unsampled = self._outcomes.unsampled
        # For the receivers that decode with it. Off while /debug/records is served: it
        # lists unsampled traces, which the triage never builds.
        self.triage = (
            TraceTriage(
                sampler,
                telemetry,
                assembled=self.assembled,
                unsampled=self.unsampled,
                max_remembered=assembly.max_open_traces,
            )
            if observer is None
            else None
        )

    @property
    def abandoned(self) -> int:
        """Past the shutdown deadline: records and sampled traces never taken by the
        consumer (a trace counts as one: its records were never built)."""
        return self._hand_on.abandoned

    # -- TraceConsumer (any thread) --------------------------------------------------------

    def refuses(self) -> bool:
        refused = self._intake.full()
        if refused:
            self._outcomes.dropped(refused)
        return bool(refused)

    def consume(self, deliveries: Sequence[Delivery]) -> bool:
        return self._consume(deliveries, on_the_loop=True)

    def _consume(self, deliveries: Sequence[Delivery], *, on_the_loop: bool) -> bool:
        """`consume`; `on_the_loop`: the event loop may assemble what it hands in
        (`_work_here`)."""
        # Records are sampled here, in the caller's thread: most are not sampled, and
        # those need no trip through the intake (they are counted and acknowledged now).
        # A `RawRecord` is validated only when sampled.
        pending: list[Pending] = []
        done: list[Delivery] = []  # record deliveries with nothing left to evaluate
        unsampled: list[tuple[str, Sequence[RagRecord | RawRecord]]] = []  # by source
        rejected: list[tuple[Delivery, list[Invalid]]] = []
        for delivery in deliveries:
            if delivery.spans:
                pending.append(Pending(delivery, None))
                continue
            chosen, skipped, problems = self._sampling.records(delivery.records)
            if skipped:
                unsampled.append((delivery.source, skipped))
            if problems:
                rejected.append((delivery, problems))
            if chosen:
                pending.append(Pending(delivery, chosen))
            else:
                done.append(delivery)
        refused = self._intake.admit(pending)
        if refused:
            self._outcomes.dropped(refused)
            return False
        for delivery, problems in rejected:
            self._outcomes.rejected(delivery, problems)
        if unsampled:
            self._sampling.count_skipped(unsampled)
        for item in pending:
            if item.chosen is None:
                self._outcomes.spans_received(item.delivery.source, len(item.delivery.spans))
        for delivery in done:
            if delivery.on_done is not None:
                delivery.on_done(True)
        if pending:
            self._outcomes.depth.set(self._intake.queued)
            first_ready = self._work_here(on_the_loop)
            # Wake the worker only when there is work left for it: spans this thread could
            # not assemble, the first records since its last hand-on (it times the next
            # one), or enough records to hand on now. A wake-up per request would cost GIL
            # hand-offs on the ingest path. Whoever adds work later checks again.
            if self._intake or first_ready or self._intake.ready >= HAND_ON_ITEMS:
                self._wake.set()
        return True

    def _work_here(self, on_the_loop: bool) -> bool:
        """Assemble what is in the intake in this thread — the receiver's decode or
        consumer thread — when no other thread is at it: one thread decodes and
        assembles a request's spans, as two threads would only contend for the GIL. The
        event loop does it only when `on_the_loop` (a `consume`, not replay's `put`) and
        for up to `LOOP_ASSEMBLY_ITEMS` (the spans an OTLP request decoded on the loop
        kept: waking the worker for them costs more than assembling them); the rest is
        left to the worker. True when it made the first records ready since the last
        hand-on."""
        if (
            threading.get_ident() == self._loop_thread
            and (not on_the_loop or self._intake.queued > LOOP_ASSEMBLY_ITEMS)
        ) or not self._work_lock.acquire(False):
            return False
        try:
            out = self._process(self._take(), expire=False)
        finally:
            self._work_lock.release()
        return self._intake.add_ready(out)

    def flush(self) -> None:
        self._flush = True
        self._wake.set()

    def holds(self, origins: Collection[Hashable]) -> int:
        with self._work_lock:
            return self._acks.holds(origins)

    def abandon(self, origins: Collection[Hashable]) -> None:
        if not origins:
            return
        with self._work_lock:
            # Queued deliveries first: their spans may belong to the traces handed back.
            out = self._process(self._take(), expire=False)
            self._suspended.difference_update(origins)
            gone = self._acks.handed_back(frozenset(origins), self._assembler.is_open)
            spans = self._assembler.abandon(gone)
            for trace_id in gone:
                self._metadata.pop(trace_id, None)
            self._gauge_open()
        if self._intake.add_ready(out):
            self._wake.set()
        if gone:
            self._outcomes.dropped("handed_back", spans)
            log.info(
                "trace stage: %d open traces (%d spans) handed back unevaluated: the source "
                "of their spans gave them away, and its next reader reads them again",
                len(gone),
                spans,
            )

    def suspend(self, origins: Collection[Hashable]) -> None:
        with self._work_lock:
            self._suspended.update(origins)

    def resume(self, origins: Collection[Hashable]) -> None:
        with self._work_lock:
            self._suspended.difference_update(origins)

    def _kept(self, trace_id: str) -> bool:
        """Whether idle expiry keeps an open trace: its source is suspended."""
        return self._acks.from_any(trace_id, self._suspended)

    async def put(self, deliveries: Sequence[Delivery]) -> bool:
        """`consume`, waiting for room instead of refusing (for receivers that read at
        their own pace, such as replay). False once the stage stopped accepting."""
        assert self._room is not None, "start() first"
        while True:
            self._room.clear()
            # Set before trying, so that room made after a refusal is always signalled.
            self._room_wanted = True
            if not self._intake.accepting:
                return False
            if self._consume(deliveries, on_the_loop=False):
                return True
            await self._room.wait()

    def _made_room(self) -> None:
        """Items left the intake or the ready records: wake a waiting `put`."""
        if self._room_wanted:  # only `put` waits for room; waking the loop costs
            self._room_wanted = False
            loop = self._hand_on.loop
            assert loop is not None and self._room is not None
            loop.call_soon_threadsafe(self._room.set)

    # -- lifecycle (event loop) ------------------------------------------------------------

    @property
    def accepting(self) -> bool:
        return self._intake.accepting

    async def start(self) -> None:
        if self._thread is not None or self._stopped:
            return
        loop = asyncio.get_running_loop()
        self._hand_on.loop = loop
        self._loop_thread = threading.get_ident()
        self._room = asyncio.Event()
        self._finished = loop.create_future()
        self._thread = threading.Thread(target=self._main, name="trace-stage", daemon=True)
        self._intake.accepting = True
        self._thread.start()

    async def shutdown(self, deadline_s: float) -> None:
        """Stop intake, assemble what is queued and release every open trace to the
        consumer (which must still accept); past the deadline, abandon what is left
        (counted in `abandoned`)."""
        self._intake.stop_accepting()
        if self._stopped:
            return
        self._stopped = True
        if self._thread is None or self._finished is None:
            return
        self._stopping = True
        self._wake.set()
        if self._room is not None:
            self._room.set()
        try:
            async with asyncio.timeout(deadline_s):
                await asyncio.shield(self._finished)
        except TimeoutError:
            self._hand_on.abandon = True
            self._wake.set()
            await self._finished
            if self._hand_on.abandoned:  # else there was nothing to wait for (a failed start)
                log.warning("trace stage shutdown deadline of %.1fs passed", deadline_s)
        await asyncio.to_thread(self._thread.join)

    # -- the worker thread -----------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._run()
        except BaseException:
            log.exception("trace stage stopped on an internal error")
            raise
        finally:
            loop = self._hand_on.loop
            assert loop is not None and self._finished is not None
            loop.call_soon_threadsafe(_resolve, self._finished)

    def _run(self) -> None:
        intake = self._intake
        self._next_expiry = self._clock() + self._tick
        while True:
            wait = min(self._tick, max(0.0, self._next_expiry - self._clock()))
            if intake.ready:
                wait = min(wait, self._hand_on.wait_s())
            self._wake.wait(wait)
            self._wake.clear()
            stopping = False
            # Take the assembly lock only for work that needs it: woken just to hand
            # records on, the worker must not take over the receivers' assembly, as two
            # threads assembling on one core only trade the GIL.
            if intake or self._flush or self._stopping or self._clock() >= self._next_expiry:
                with self._work_lock:
                    stopping = self._stopping and not intake
                    out = self._process(self._take(), expire=True, stopping=stopping)
                intake.add_ready(out)
            if intake.ready and (stopping or self._hand_on.due(intake.ready)):
                self._hand_on(intake.take_ready())
            if stopping and not intake and not intake.ready:
                return

    def _take(self) -> list[Pending]:
        batch = self._intake.take()
        if batch:
            self._outcomes.depth.set(self._intake.queued)
        return batch

    def _process(
        self, batch: list[Pending], *, expire: bool, stopping: bool = False
    ) -> list[Ready]:
        """Assemble a batch, and (the worker) release idle, flushed or, when stopping,
        all open traces. Holds `_work_lock`."""
        out: list[Ready] = []
        finished: list[FinishedTrace] = []
        for pending in batch:
            self._take_apart(pending, out, finished)
        if expire:
            now = self._clock()
            if now >= self._next_expiry:
                self._next_expiry = now + self._tick
                finished += self._assembler.expire(keep=self._kept if self._suspended else None)
            if self._flush or stopping:
                self._flush = False
                finished += self._assembler.drain() if stopping else self._assembler.flush()
        if finished:
            self._release(finished, out)
        self._gauge_open()
        return out

    def _gauge_open(self) -> None:
        self.open_traces.set(self._assembler.open_traces)
        self.open_trace_bytes.set(self._assembler.open_bytes)

    def _take_apart(
        self, pending: Pending, out: list[Ready], finished: list[FinishedTrace]
    ) -> None:
        delivery = pending.delivery
        ack = (
            self._acks.ack(delivery.on_done, delivery.origin)
            if delivery.on_done is not None
            else None
        )
        try:
            if pending.chosen is None:
                released = self._assembler.add(delivery.spans, delivery.source)
                if ack is not None or delivery.metadata:
                    self._register(delivery, ack, released)
                finished += released
            else:
                for record, sampled, delivered in pending.chosen:
                    if ack is not None:
                        ack.owe(1)
                    self._outcomes.record(record, delivery.source)
                    out.append(
                        SampledRecord(
                            record,
                            delivery.source,
                            sampled,
                            ack.settle if ack else None,
                            partial(delivery.on_failed, delivered) if delivery.on_failed else None,
                        )
                    )
        except Exception:
            # A bug must not stop the stage: count the delivery and keep serving.
            log.exception("trace stage failed on a delivery from %s", delivery.source)
            self._outcomes.dropped("internal_error", pending.items)
        finally:
            if ack is not None:
                ack.settle()

    def _register(self, delivery: Delivery, ack: Ack | None, released: list[FinishedTrace]) -> None:
        """The delivery owes one unit per trace it added spans to, and the first delivery
        of a trace gives its records their metadata. Late spans (of a released trace) owe
        one to their trace while its records are not finished, and nothing after."""
        done_now = {trace.trace_id for trace in released}
        assembling: list[str] = []
        late: list[str] = []
        for trace_id in {span.trace_id for span in delivery.spans}:
            if trace_id in done_now or self._assembler.is_open(trace_id):
                assembling.append(trace_id)
                if delivery.metadata:
                    self._metadata.setdefault(trace_id, delivery.metadata)
            else:
                late.append(trace_id)
        if ack is not None:
            self._acks.register(ack, assembling, late)

    def _release(self, finished: list[FinishedTrace], out: list[Ready]) -> None:
        triggers: Tally[str] = Tally()
        unsampled: Tally[str] = Tally()
        events_only = 0
        for trace in finished:
            triggers[trace.trigger] += 1
            acks = self._acks.released(trace.trace_id)
            metadata = self._metadata.pop(trace.trace_id, None)
            if trace.trigger == "events_only":  # no span ever came: nothing to evaluate
                events_only += len(trace.spans)
                for ack in acks:
                    ack.settle()
                continue
            sampled, service = self._sampling.trace(trace, unsampled)
            if not sampled:
                for ack in acks:
                    ack.settle()
                continue
            waiting = self._acks.evaluating(trace.trace_id, acks)
            out.append(
                SampledTrace(
                    trace.spans,
                    trace.source,
                    sampled,
                    partial(self._outcomes.extracted, trace, service),
                    waiting.settle if waiting else None,
                    metadata,
                    sum(span.size for span in trace.spans),
                )
            )
        self._outcomes.released(triggers)
        self._outcomes.unsampled_by_service(unsampled)
        if events_only:
            self._outcomes.assembly_dropped("events_only", events_only)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
