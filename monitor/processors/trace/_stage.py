"""The trace stage: spans and records from every receiver → assembled traces → one
sampling decision → extracted records → the evaluation stage.

Receivers hand `Delivery`s to `consume` from any thread (the OTLP decode thread, the
Kafka consumer thread, the event loop for replay). They wait in a bounded intake —
bounded in items and in bytes — that one worker thread drains: it assembles spans into
traces (`TraceAssembler`, bounded in traces and bytes), reduces each released trace to
what sampling reads (`sampling_view`, no attribute decoding), asks the sampler once
which evaluators sample it, and hands records on with the decision attached, in batches
(at most one hand-on per `_HAND_ON_INTERVAL_S` unless many are ready). Only sampled
traces become records: just before a hand-on, the worker has that batch's sampled traces
extracted by its `Extractor` (the evaluation worker processes, or in this thread). Records that arrive as records (Kafka JSON, replay) are
sampled the same way. The worker blocks while the evaluation stage is full, so the intake
fills and `consume` refuses: receivers push back (HTTP 503, gRPC UNAVAILABLE, paused
Kafka partitions) instead of the process buffering without bound.

Acknowledgement: a delivery's `on_done` is called once everything built from it has
finished. Spans of one trace may come in several deliveries (Kafka messages), so each
delivery owes one unit per trace it added spans to, and a trace settles every delivery
that contributed once all its records are finished (at once when it yields none: not
sampled, not a RAG trace, or unreadable). A late span of a released trace owes its unit
to that trace until its records are finished, and nothing after. A receiver can hand back
what came from an origin (`abandon`): open traces made only of its deliveries are dropped
unevaluated and those deliveries done with False.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import Counter as Tally
from collections import deque
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future
from dataclasses import dataclass
from operator import attrgetter
from typing import cast

from monitor.component import (
    Delivery,
    Invalid,
    OnDone,
    RecordConsumer,
    SampledRecord,
    TraceObserver,
)
from monitor.config import TraceAssembly
from monitor.processors.sampler import Sampler
from monitor.processors.trace._assembler import TRIGGERS, FinishedTrace, TraceAssembler
from monitor.processors.trace._extract import (
    Extraction,
    Extractor,
    InProcess,
    Unreadable,
    extract_traces,
    sampling_view,
)
from monitor.processors.trace._triage import TraceTriage
from monitor.records import RagRecord, RawRecord, RecordError, SizeLimits, bound_record
from monitor.spans import DecodeError, Span
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)
STAGE = "assemble"
# Items taken from the intake per pass: large enough to amortise a pass, small enough
# that expiry and acknowledgements stay timely under load.
_PASS_ITEMS = 8192
# Records are handed to the evaluation stage at most once per interval, unless this many
# are ready: a hand-on wakes the worker thread and the event loop, so at a steady
# sampled rate records go on in batches instead of one hand-on per request. The first
# record after a quiet interval goes on at once.
_HAND_ON_INTERVAL_S = 0.05
_HAND_ON_ITEMS = 256
_ACKS = threading.Lock()  # acknowledgements are settled from several threads
_SERVICE = attrgetter("service")


def _key(record: RagRecord | RawRecord) -> str:
    """The record's sampling key, or "" for one whose key cannot be read (a record without
    an id, nested too deeply to derive one: never read when nothing is sampled)."""
    try:
        return record.sampling_key
    except RecordError:
        return ""


class _Ack:
    """What one delivery still owes before its `on_done` is called. Starts held by one
    unit while the delivery is taken apart, so it cannot finish half-registered."""

    __slots__ = ("_ok", "_on_done", "_owed", "origin")

    def __init__(self, on_done: OnDone, origin: Hashable | None = None) -> None:
        self._on_done = on_done
        self._owed = 1
        self._ok = True
        self.origin = origin  # the delivery's, for `TraceStage.abandon`

    def owe(self, units: int) -> None:
        with _ACKS:
            self._owed += units

    def settle(self, ok: bool = True) -> None:
        with _ACKS:
            self._owed -= 1
            self._ok &= ok
            if self._owed:
                return
            ok = self._ok
        self._on_done(ok)


class _Contributors:
    """The deliveries of a released, sampled trace, settled together once it is finished.
    Until then the deliveries of its late spans join them: a late span is acknowledged
    only once the trace it belongs to was really evaluated (False if it was abandoned)."""

    __slots__ = ("_acks", "_evaluating", "_trace_id")

    def __init__(
        self, trace_id: str, acks: list[_Ack], evaluating: dict[str, _Contributors]
    ) -> None:
        self._trace_id = trace_id
        self._acks: list[_Ack] | None = acks  # None once settled
        self._evaluating = evaluating
        if acks:
            evaluating[trace_id] = self

    def __bool__(self) -> bool:
        return bool(self._acks)

    def join(self, ack: _Ack) -> bool:
        """Add a late span's delivery; False when the trace is settled already."""
        with _ACKS:
            if self._acks is None:
                return False
            self._acks.append(ack)
            ack._owed += 1
            return True

    def settle(self, ok: bool = True) -> None:
        with _ACKS:
            acks, self._acks = self._acks or [], None
            if self._evaluating.get(self._trace_id) is self:
                del self._evaluating[self._trace_id]
        for ack in acks:
            ack.settle(ok)


class _TraceDone:
    """Settles every delivery that contributed to a trace once all its records finished."""

    __slots__ = ("_contributors", "_ok", "_remaining")

    def __init__(self, contributors: _Contributors, records: int) -> None:
        self._contributors = contributors
        self._remaining = records
        self._ok = True

    def __call__(self, ok: bool) -> None:
        with _ACKS:
            self._remaining -= 1
            self._ok &= ok
            if self._remaining:
                return
            ok = self._ok
        self._contributors.settle(ok)


@dataclass(slots=True)
class _Sampled:
    """A released trace that is sampled, waiting to be extracted at the next hand-on."""

    trace: FinishedTrace
    sampled: frozenset[str]
    service: str  # the root's, as the records get it
    contributors: _Contributors
    metadata: Mapping[str, str] | None
    size: int


@dataclass(slots=True)
class _Pending:
    """A delivery in the intake; for records, the ones sampled and by which evaluators."""

    delivery: Delivery
    chosen: list[tuple[RagRecord, frozenset[str]]] | None

    @property
    def items(self) -> int:
        return len(self.delivery.spans) if self.chosen is None else len(self.chosen)


class TraceStage:
    """Owns trace assembly, the sampling decision and extraction for every receiver."""

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
        extractor: Extractor | None = None,
        limits: SizeLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        pace_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sampler = sampler
        self._observer = observer
        # Sampled traces become records in the worker thread, just before they go on:
        # with worker processes, extraction costs the ingest process no CPU.
        self._extractor: Extractor = extractor or InProcess()
        self._consumer = consumer
        self._t = telemetry
        # Applied to every record before it goes on: no text reaches a worker unbounded.
        self._limits = limits or SizeLimits()
        self._route_attribute = route_attribute
        # The route is read for sampling only when an override names one: otherwise it
        # cannot change a decision, and reading it costs an attribute lookup per trace.
        self._view_route = route_attribute if route_in_sampling else None
        self._max_items = assembly.queue_size
        self._max_bytes = assembly.queue_bytes
        self._clock = clock  # trace expiry
        self._pace_clock = pace_clock  # when ready records go on (real time unless a test's)
        self._tick = min(1.0, assembly.idle_timeout_s / 4)
        self._assembler = TraceAssembler(
            idle_timeout_s=assembly.idle_timeout_s,
            max_open_traces=assembly.max_open_traces,
            max_open_bytes=assembly.max_open_bytes,
            on_drop=self._count_drop,
            clock=clock,
            log_events_wait_s=assembly.log_events_wait_s,
        )
        self._contributors: dict[str, list[_Ack]] = {}
        # Released, sampled traces whose records are not finished yet (any thread removes
        # them, under `_ACKS`): their late spans' deliveries wait with them.
        self._evaluating: dict[str, _Contributors] = {}
        self._metadata: dict[str, Mapping[str, str]] = {}  # by trace id, from its first delivery
        # Intake, shared with the receivers' threads.
        self._lock = threading.Lock()  # the intake and the records ready to hand on
        # Assembly state (assembler, contributors, metadata): the thread that hands a
        # delivery in does its work when it can take this lock, else the worker does.
        self._work_lock = threading.Lock()
        # Records and sampled traces (`_Sampled`, extracted when handed on) to hand on.
        self._ready: deque[SampledRecord | _Sampled] = deque()
        self._ready_items = 0
        self._ready_bytes = 0
        self._last_hand_on = -math.inf  # by `pace_clock`; the worker's own
        self._intake: deque[_Pending] = deque()
        self._queued_items = 0
        self._queued_bytes = 0
        self._wake = threading.Event()
        self._accepting = False
        self._stopping = False
        self._flush = False
        self._abandon = False
        # Owned by the event loop.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._next_expiry = 0.0
        self._room: asyncio.Event | None = None
        self._room_wanted = False
        self._thread: threading.Thread | None = None
        self._finished: asyncio.Future[None] | None = None
        self._stopped = False
        # Past the shutdown deadline: records never taken by the consumer, and sampled
        # traces never extracted (one each: their records were never built).
        self.abandoned = 0
        self._warn = RateLimitedLog(log)
        self._depth = telemetry.queue_depth.labels(STAGE)
        self._depth.set(0)
        self.open_traces = telemetry.gauge(
            "open_traces",
            "Traces buffered by trace assembly.",
        )
        self.open_trace_bytes = telemetry.gauge(
            "open_trace_bytes",
            "Approximate bytes of the spans buffered by trace assembly.",
        )
        self.assembled = telemetry.counter(
            "traces_assembled",
            "Traces released by trace assembly, by what released them.",
            ("trigger",),
        )
        for trigger in TRIGGERS:
            self.assembled.labels(trigger)
        self.unsampled = telemetry.counter(
            "traces_unsampled",
            "Traces and records no evaluator samples, finished without extraction.",
            ("service",),
        )
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

    # -- TraceConsumer (any thread) --------------------------------------------------------

    def refuses(self) -> bool:
        if not self._accepting:
            refused = "shutting_down"
        elif (
            self._queued_items + self._ready_items >= self._max_items
            or self._queued_bytes + self._ready_bytes >= self._max_bytes
        ):
            refused = "queue_full"
        else:
            return False
        self._t.child(self._t.dropped, STAGE, refused).inc()
        return True

    def consume(self, deliveries: Sequence[Delivery]) -> bool:
        # Records are sampled here, in the caller's thread: most are not sampled, and
        # those need no trip through the intake (they are counted and acknowledged now).
        # A `RawRecord` is validated only when sampled.
        pending: list[_Pending] = []
        done: list[Delivery] = []  # record deliveries with nothing left to evaluate
        unsampled: list[tuple[str, Sequence[RagRecord | RawRecord]]] = []  # by source
        rejected: list[tuple[Delivery, list[Invalid]]] = []
        for delivery in deliveries:
            if delivery.spans:
                pending.append(_Pending(delivery, None))
                continue
            chosen, skipped, problems = self._choose(delivery.records)
            if skipped:
                unsampled.append((delivery.source, skipped))
            if problems:
                rejected.append((delivery, problems))
            if chosen:
                pending.append(_Pending(delivery, chosen))
            else:
                done.append(delivery)
        items = sum(p.items for p in pending)
        size = sum(p.delivery.size for p in pending)
        with self._lock:
            if not self._accepting:
                refused = "shutting_down"
            elif (self._queued_items or self._ready_items) and (
                self._queued_items + self._ready_items + items > self._max_items
                or self._queued_bytes + self._ready_bytes + size > self._max_bytes
            ):
                refused = "queue_full"
            else:
                # One delivery larger than the whole bound is still taken into an empty
                # intake, so nothing is refused forever.
                self._intake.extend(pending)
                self._queued_items += items
                self._queued_bytes += size
                refused = ""
        if refused:
            self._t.child(self._t.dropped, STAGE, refused).inc()
            return False
        for delivery, problems in rejected:
            self._reject(delivery, problems)
        if unsampled:
            self._count_skipped(unsampled)
        for item in pending:
            if item.chosen is None:
                self._t.child(self._t.spans_received, item.delivery.source).inc(
                    len(item.delivery.spans)
                )
        for delivery in done:
            if delivery.on_done is not None:
                delivery.on_done(True)
        if pending:
            self._depth.set(self._queued_items)
            first_ready = self._work_here()
            # Wake the worker only when there is work left for it: spans this thread could
            # not assemble, the first records since its last hand-on (it times the next
            # one), or enough records to hand on now. A wake-up per request would cost GIL
            # hand-offs on the ingest path. Whoever adds work later checks again.
            if self._intake or first_ready or self._ready_items >= _HAND_ON_ITEMS:
                self._wake.set()
        return True

    def _count_skipped(self, unsampled: list[tuple[str, Sequence[RagRecord | RawRecord]]]) -> None:
        """Count (and show the observer) the records no evaluator samples, by the source
        of their delivery."""
        counts: Tally[str] = Tally()
        observer = self._observer
        for source, records in unsampled:
            counts.update(map(_SERVICE, records))  # counted in C: this runs for most records
            if observer is not None:
                for record in records:
                    observer.no_record(_key(record), record.service, source, "unsampled", 0)
        self._count_unsampled(counts)

    def _work_here(self) -> bool:
        """Assemble what is in the intake in this thread — the receiver's decode or
        consumer thread — when no other thread is at it: one thread decodes and
        assembles a request's spans, as two threads would only contend for the GIL. The
        event loop never does it (replay's `put` leaves it to the worker). True when it
        made the first records ready since the last hand-on."""
        if threading.get_ident() == self._loop_thread or not self._work_lock.acquire(False):
            return False
        try:
            out = self._process(self._take(), expire=False)
        finally:
            self._work_lock.release()
        return self._add_ready(out)

    def _add_ready(self, out: list[SampledRecord | _Sampled]) -> bool:
        """Queue records for the next hand-on; True if none were queued before."""
        if not out:
            return False
        with self._lock:
            first = not self._ready
            self._ready.extend(out)
            self._ready_items += len(out)
            self._ready_bytes += sum(item.size for item in out)
        return first

    def _choose(
        self, records: Sequence[RagRecord | RawRecord]
    ) -> tuple[
        list[tuple[RagRecord, frozenset[str]]],
        Sequence[RagRecord | RawRecord],
        list[Invalid],
    ]:
        """Records split by the sampling decision: the sampled ones, validated, with their
        evaluators; the unsampled ones; and the problems of the sampled records that did
        not validate and of those whose sampling key could not be read. No other
        effects."""
        try:
            decisions: list[frozenset[str] | RecordError] = list(
                map(self._sampler.sampled, records)
            )
        except RecordError:  # a record without a readable sampling key: find which
            decisions = [self._decide(record) for record in records]
        if not any(decisions):  # most deliveries: nothing sampled, nothing copied
            return [], records, []
        chosen: list[tuple[RagRecord, frozenset[str]]] = []
        skipped: list[RagRecord | RawRecord] = []
        problems: list[Invalid] = []
        for record, sampled in zip(records, decisions, strict=True):
            if isinstance(sampled, RecordError):
                assert isinstance(record, RawRecord)  # a validated record's key is read
                problems.append((record, sampled.reason, sampled.detail))
            elif not sampled:
                skipped.append(record)
            else:
                try:
                    parsed = record.parse() if isinstance(record, RawRecord) else record
                    chosen.append((self._bounded(parsed), sampled))
                except RecordError as exc:
                    raw = (
                        record if isinstance(record, RawRecord) else RawRecord(record.model_dump())
                    )
                    problems.append((raw, exc.reason, exc.detail))
        return chosen, skipped, problems

    def _bounded(self, record: RagRecord) -> RagRecord:
        """`record` within the size limits (truncations counted); raises `RecordError`."""
        bounded, cut = bound_record(record, self._limits)
        for part in cut:
            self._t.child(self._t.records_truncated, part).inc()
        return bounded

    def _decide(self, record: RagRecord | RawRecord) -> frozenset[str] | RecordError:
        try:
            return self._sampler.sampled(record)
        except RecordError as exc:
            return exc

    def _reject(self, delivery: Delivery, problems: list[Invalid]) -> None:
        for _, reason, _ in problems:
            self._t.child(self._t.records_rejected, delivery.source, reason).inc()
        _, reason, detail = problems[0]
        self._warn.warning(
            "reject:" + reason, "%s: a sampled record is invalid: %s", delivery.source, detail
        )
        if delivery.on_rejected is not None:
            delivery.on_rejected(problems)

    def flush(self) -> None:
        self._flush = True
        self._wake.set()

    def holds(self, origins: Collection[Hashable]) -> int:
        wanted = frozenset(origins)
        with self._work_lock:
            waiting = {
                id(ack): ack
                for acks in self._contributors.values()
                for ack in acks
                if ack.origin in wanted
            }
        return len(waiting)

    def abandon(self, origins: Collection[Hashable]) -> None:
        if not origins:
            return
        with self._work_lock:
            # Queued deliveries first: their spans may belong to the traces handed back.
            out = self._process(self._take(), expire=False)
            traces, spans = self._abandon_open(frozenset(origins))
        if self._add_ready(out):
            self._wake.set()
        if traces:
            self._t.child(self._t.dropped, STAGE, "handed_back").inc(spans)
            log.info(
                "trace stage: %d open traces (%d spans) handed back unevaluated: the source "
                "of their spans gave them away, and its next reader reads them again",
                traces,
                spans,
            )

    def _abandon_open(self, origins: frozenset[Hashable]) -> tuple[int, int]:
        """Drop the open traces whose acknowledged deliveries all came from `origins`, and
        settle those deliveries as not finished. Holds `_work_lock`. Returns (traces,
        spans) dropped."""
        gone = [
            trace_id
            for trace_id, acks in self._contributors.items()
            if acks
            and self._assembler.is_open(trace_id)
            and all(ack.origin in origins for ack in acks)
        ]
        spans = self._assembler.abandon(gone)
        for trace_id in gone:
            self._metadata.pop(trace_id, None)
            for ack in self._contributors.pop(trace_id):
                ack.settle(False)
        self.open_traces.set(self._assembler.open_traces)
        self.open_trace_bytes.set(self._assembler.open_bytes)
        return len(gone), spans

    async def put(self, deliveries: Sequence[Delivery]) -> bool:
        """`consume`, waiting for room instead of refusing (for receivers that read at
        their own pace, such as replay). False once the stage stopped accepting."""
        assert self._room is not None, "start() first"
        while True:
            self._room.clear()
            # Set before trying, so that room made after a refusal is always signalled.
            self._room_wanted = True
            if not self._accepting:
                return False
            if self.consume(deliveries):
                return True
            await self._room.wait()

    # -- lifecycle (event loop) ------------------------------------------------------------

    @property
    def accepting(self) -> bool:
        return self._accepting

    async def start(self) -> None:
        if self._thread is not None or self._stopped:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._room = asyncio.Event()
        self._finished = self._loop.create_future()
        self._thread = threading.Thread(target=self._main, name="trace-stage", daemon=True)
        self._accepting = True
        self._thread.start()

    async def shutdown(self, deadline_s: float = 10.0) -> None:
        """Stop intake, assemble what is queued and release every open trace to the
        consumer (which must still accept); past the deadline, abandon what is left."""
        with self._lock:
            self._accepting = False
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
            log.warning("trace stage shutdown deadline of %.1fs passed; abandoning", deadline_s)
            self._abandon = True
            self._wake.set()
            await self._finished
        await asyncio.to_thread(self._thread.join)

    # -- the worker thread -----------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._run()
        except BaseException:
            log.exception("trace stage stopped on an internal error")
            raise
        finally:
            assert self._loop is not None and self._finished is not None
            self._loop.call_soon_threadsafe(_resolve, self._finished)

    def _run(self) -> None:
        self._next_expiry = self._clock() + self._tick
        while True:
            wait = min(self._tick, max(0.0, self._next_expiry - self._clock()))
            if self._ready:
                wait = min(wait, max(0.0, self._next_hand_on() - self._pace_clock()))
            self._wake.wait(wait)
            self._wake.clear()
            stopping = False
            # Take the assembly lock only for work that needs it: woken just to hand
            # records on, the worker must not take over the receivers' assembly, as two
            # threads assembling on one core only trade the GIL.
            if self._intake or self._flush or self._stopping or self._clock() >= self._next_expiry:
                with self._work_lock:
                    stopping = self._stopping and not self._intake
                    out = self._process(self._take(), expire=True, stopping=stopping)
                self._add_ready(out)
            if self._ready and (
                stopping
                or self._ready_items >= _HAND_ON_ITEMS
                or self._pace_clock() >= self._next_hand_on()
            ):
                self._hand_on(self._extracted(self._take_ready()))
            if stopping and not self._intake and not self._ready:
                return

    def _next_hand_on(self) -> float:
        return self._last_hand_on + _HAND_ON_INTERVAL_S

    def _process(
        self, batch: list[_Pending], *, expire: bool, stopping: bool = False
    ) -> list[SampledRecord | _Sampled]:
        """Assemble a batch, and (the worker) release idle, flushed or, when stopping,
        all open traces. Holds `_work_lock`."""
        out: list[SampledRecord | _Sampled] = []
        finished: list[FinishedTrace] = []
        for pending in batch:
            self._take_apart(pending, out, finished)
        if expire:
            now = self._clock()
            if now >= self._next_expiry:
                self._next_expiry = now + self._tick
                finished += self._assembler.expire()
            if self._flush or stopping:
                self._flush = False
                finished += self._assembler.drain() if stopping else self._assembler.flush()
        if finished:
            self._release(finished, out)
        self.open_traces.set(self._assembler.open_traces)
        self.open_trace_bytes.set(self._assembler.open_bytes)
        return out

    def _take_ready(self) -> list[SampledRecord | _Sampled]:
        with self._lock:
            ready = list(self._ready)
            self._ready.clear()
            self._ready_items = 0
            self._ready_bytes = 0
        if ready:
            self._made_room()
        return ready

    def _take(self) -> list[_Pending]:
        batch: list[_Pending] = []
        items = size = 0
        with self._lock:
            while self._intake and items < _PASS_ITEMS:
                pending = self._intake.popleft()
                batch.append(pending)
                items += pending.items
                size += pending.delivery.size
            self._queued_items -= items
            self._queued_bytes -= size
            queued = self._queued_items
        if batch:
            self._depth.set(queued)
            self._made_room()
        return batch

    def _made_room(self) -> None:
        """Items left the intake or the ready records: wake a waiting `put`."""
        if self._room_wanted:  # only `put` waits for room; waking the loop costs
            self._room_wanted = False
            assert self._loop is not None and self._room is not None
            self._loop.call_soon_threadsafe(self._room.set)

    def _take_apart(
        self,
        pending: _Pending,
        out: list[SampledRecord | _Sampled],
        finished: list[FinishedTrace],
    ) -> None:
        delivery = pending.delivery
        ack = _Ack(delivery.on_done, delivery.origin) if delivery.on_done is not None else None
        try:
            if pending.chosen is None:
                released = self._assembler.add(delivery.spans, delivery.source)
                if ack is not None or delivery.metadata:
                    self._register(delivery, ack, released)
                finished += released
            else:
                for record, sampled in pending.chosen:
                    if ack is not None:
                        ack.owe(1)
                    self._count_record(record, delivery.source)
                    out.append(
                        SampledRecord(record, delivery.source, sampled, ack.settle if ack else None)
                    )
        except Exception:
            # A bug must not stop the stage: count the delivery and keep serving.
            log.exception("trace stage failed on a delivery from %s", delivery.source)
            self._t.child(self._t.dropped, STAGE, "internal_error").inc(pending.items)
        finally:
            if ack is not None:
                ack.settle()

    def _register(
        self, delivery: Delivery, ack: _Ack | None, released: list[FinishedTrace]
    ) -> None:
        """The delivery owes one unit per trace it added spans to, and the first delivery
        of a trace gives its records their metadata. Late spans (of a released trace) owe
        one to their trace while its records are not finished, and nothing after."""
        done_now = {trace.trace_id for trace in released}
        joined = 0
        for trace_id in {span.trace_id for span in delivery.spans}:
            if trace_id in done_now or self._assembler.is_open(trace_id):
                if ack is not None:
                    self._contributors.setdefault(trace_id, []).append(ack)
                    joined += 1
                if delivery.metadata:
                    self._metadata.setdefault(trace_id, delivery.metadata)
            elif ack is not None:
                evaluating = self._evaluating.get(trace_id)
                if evaluating is not None:
                    evaluating.join(ack)
        if ack is not None:
            ack.owe(joined)

    def _release(self, finished: list[FinishedTrace], out: list[SampledRecord | _Sampled]) -> None:
        triggers: Tally[str] = Tally()
        unsampled: Tally[str] = Tally()
        for trace in finished:
            triggers[trace.trigger] += 1
            contributors = self._contributors.pop(trace.trace_id, [])
            metadata = self._metadata.pop(trace.trace_id, None)
            sampled, service = self._sampled(trace, unsampled)
            if not sampled:
                for ack in contributors:
                    ack.settle()
                continue
            size = sum(span.size for span in trace.spans)
            waiting = _Contributors(trace.trace_id, contributors, self._evaluating)
            out.append(_Sampled(trace, sampled, service, waiting, metadata, size))
        for trigger, n in triggers.items():
            self.assembled.labels(trigger).inc(n)
        self._count_unsampled(unsampled)

    def _sampled(self, trace: FinishedTrace, unsampled: Tally[str]) -> tuple[frozenset[str], str]:
        """The evaluators that sample a released trace, and its service (the root's);
        none when no evaluator does (counted) or when what sampling reads is unreadable
        (counted)."""
        if not trace.spans:
            return frozenset(), ""
        service = trace.spans[0].service
        try:
            view = sampling_view(trace.spans, route_attribute=self._view_route)
            sampled = self._sampler.sampled(view)
        except DecodeError as exc:
            # An attribute value that is not valid protobuf, found when first read.
            self._unreadable(trace, service, Unreadable(exc.reason, exc.detail))
            return frozenset(), service
        except Exception as exc:  # e.g. parent links that form a cycle: no root
            why = Unreadable("extract_failed", f"cannot build a record: {exc}")
            self._unreadable(trace, service, why)
            return frozenset(), service
        if not sampled:
            unsampled[view.service] += 1
            if self._observer is not None:
                self._observe_none(trace, view.service, "unsampled")
        return sampled, view.service

    def _extracted(self, ready: list[SampledRecord | _Sampled]) -> list[SampledRecord]:
        """`ready` with each sampled trace replaced by its records, extracted by the
        extractor (waited for in this thread; past the shutdown deadline the traces not
        extracted yet are abandoned)."""
        traces = [item for item in ready if isinstance(item, _Sampled)]
        if not traces:
            return cast(list[SampledRecord], ready)
        extractions = self._extract([item.trace.spans for item in traces])
        if extractions is None:
            self._abandon_traces(traces)
        extracted = iter(extractions or ())
        out: list[SampledRecord] = []
        for item in ready:
            if isinstance(item, SampledRecord):
                out.append(item)
            elif extractions is not None:
                self._records_of(item, next(extracted), out)
        return out

    def _extract(self, traces: list[list[Span]]) -> list[Extraction] | None:
        """The extractor's work on `traces`, waited for; None when abandoned (the
        shutdown deadline passed first)."""
        if self._abandon:
            return None
        try:
            future = self._extractor.extract(traces, self._route_attribute)
            while not self._abandon:
                try:
                    return future.result(timeout=self._tick)
                except TimeoutError:
                    continue
            future.cancel()  # its workers' slots go back to the evaluation stage's drain
            return None
        except (FutureCancelled, Exception):
            # The extractor failed as a whole (a bug, or its workers are gone): the traces
            # are extracted here instead, so none is lost.
            log.exception("extraction of %d sampled traces failed; extracting here", len(traces))
            return extract_traces(traces, self._route_attribute)

    def _records_of(self, item: _Sampled, extraction: Extraction, out: list[SampledRecord]) -> None:
        """A sampled trace's records, counted, to `out`; a trace that yields none (not a
        RAG trace, or unreadable: counted) settles its deliveries at once."""
        trace, service = item.trace, item.service
        if isinstance(extraction, Unreadable):
            self._unreadable(trace, service, extraction)
            records: list[RagRecord] = []
        else:
            records = []
            for record in extraction:
                try:
                    records.append(self._bounded(record))
                except RecordError as exc:
                    self._unreadable(trace, service, Unreadable(exc.reason, exc.detail))
            if not extraction:
                self._t.child(self._t.dropped, STAGE, "not_rag").inc()
                self._observe_none(trace, service, "not_rag")
        if not records:
            item.contributors.settle()
            return
        done = _TraceDone(item.contributors, len(records)) if item.contributors else None
        for record in records:
            if item.metadata:
                record = record.model_copy(
                    update={"metadata": {**record.metadata, **item.metadata}}
                )
            self._count_record(record, trace.source)
            out.append(SampledRecord(record, trace.source, item.sampled, done))

    def _unreadable(self, trace: FinishedTrace, service: str, why: Unreadable) -> None:
        self._t.child(self._t.records_rejected, trace.source, why.reason).inc()
        self._warn.warning(why.reason, "trace %s: %s", trace.trace_id, why.detail)
        self._observe_none(trace, service, why.reason)

    def _abandon_traces(self, traces: list[_Sampled]) -> None:
        """Past the shutdown deadline: sampled traces never extracted are abandoned."""
        with self._lock:  # `_abandon_rest` may count from the event loop's thread
            self.abandoned += len(traces)
        self._t.child(self._t.dropped, STAGE, "shutting_down").inc(len(traces))
        self._warn.warning(
            "abandoned", "trace stage stopping: %d sampled traces abandoned", len(traces)
        )
        for item in traces:
            item.contributors.settle(False)

    def _observe_none(self, trace: FinishedTrace, service: str, reason: str) -> None:
        if self._observer is not None:
            self._observer.no_record(
                trace.trace_id, service, trace.source, reason, len(trace.spans)
            )

    def _count_record(self, record: RagRecord, source: str) -> None:
        if self._observer is not None:
            self._observer.extracted(record, source)
        service = self._t.service_cap(record.service)
        self._t.child(self._t.records, service, source).inc()
        for part in sorted(record.missing()):
            self._t.child(self._t.records_incomplete, service, part).inc()

    def _count_unsampled(self, unsampled: Tally[str]) -> None:
        for service, n in unsampled.items():
            self._t.child(self.unsampled, self._t.service_cap(service)).inc(n)

    def _count_drop(self, reason: str, n: int) -> None:
        self._t.child(self._t.dropped, STAGE, reason).inc(n)
        self._warn.warning(reason, "trace assembly dropped %d spans: %s", n, reason)

    def _hand_on(self, out: list[SampledRecord]) -> None:
        """Give records to the consumer, waiting while it is full. Past the shutdown
        deadline the worker stops waiting; what the consumer never takes is abandoned
        once it returns (it returns when it stops accepting)."""
        if not out:
            return
        assert self._loop is not None
        self._last_hand_on = self._pace_clock()
        future = asyncio.run_coroutine_threadsafe(self._consumer.put_many(out), self._loop)
        while not self._abandon:
            try:
                taken = future.result(timeout=self._tick)
            except TimeoutError:
                continue
            except (FutureCancelled, Exception):
                log.exception("the evaluation stage refused a batch of %d records", len(out))
                taken = 0
            self._abandon_rest(out, taken)
            return
        future.add_done_callback(lambda f: self._abandon_rest(out, _taken(f)))

    def _abandon_rest(self, out: list[SampledRecord], taken: int) -> None:
        if taken >= len(out):
            return
        left = len(out) - taken
        with self._lock:
            self.abandoned += left
        self._t.child(self._t.dropped, STAGE, "shutting_down").inc(left)
        self._warn.warning("abandoned", "trace stage stopping: %d records abandoned", left)
        for item in out[taken:]:
            if item.on_done is not None:
                item.on_done(False)


def _taken(future: Future[int]) -> int:
    if future.cancelled() or future.exception() is not None:
        return 0
    return future.result()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
