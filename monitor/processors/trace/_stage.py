"""The trace stage: spans and records from every receiver → assembled traces → one
sampling decision → the evaluation stage, which extracts the sampled traces' records.

Everything here runs on the event loop, in the call that hands it work: a receiver's
`consume` (the Kafka consumer thread calls it through the loop and waits for the answer),
the expiry timer, a Kafka rebalance's `abandon`. `consume` builds the spans worth
building (`_filter.py`), adds them to their traces (`TraceAssembler`, bounded in traces
and bytes), decides sampling once per released trace and per record (`_sampling.py`),
and hands sampled traces (their spans as assembled) and records to the evaluation stage
with the decision attached, before it returns. While the evaluation stage holds what its
bounds allow, `consume` refuses: receivers push back (HTTP 503, gRPC UNAVAILABLE, paused
Kafka partitions, replay waits) instead of the process buffering without bound. A
delivery's `on_done` is called once everything built from it has finished (`_acks.py`);
a receiver can hand back what came from an origin (`abandon`): open traces made only of
its deliveries are dropped unevaluated and those deliveries done with False; and it can
suspend an origin (`suspend`) while it does not know whether it will read it again: open
traces holding its deliveries are then not released for idleness, since no span of
theirs can come, until it resumes the origin or hands it back.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter as Tally
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from functools import partial

from monitor.component import (
    ACCEPTED,
    Accepted,
    Delivery,
    OnDone,
    RecordConsumer,
    Refused,
    SampledRecord,
    SampledTrace,
    TraceObserver,
)
from monitor.config import TraceAssembly
from monitor.conventions import LOG_EVENTS
from monitor.processors.sampler import Sampler
from monitor.processors.trace._acks import Ack, Acknowledgements
from monitor.processors.trace._assembler import FinishedTrace, TraceAssembler
from monitor.processors.trace._filter import SpanFilter
from monitor.processors.trace._outcomes import Outcomes, log
from monitor.processors.trace._sampling import TraceSampling
from monitor.processors.trace._shares import FairShares
from monitor.records import CLIENT_ADDRESS, RagRecord, RawRecord
from monitor.records.limits import SizeLimits
from monitor.spans import Built, Span
from monitor.telemetry import Telemetry

Ready = SampledRecord | SampledTrace
_QUEUE_FULL = Refused("queue_full")
_SHUTTING_DOWN = Refused("shutting_down")


def _late_causes(assembly: TraceAssembly) -> dict[str, str]:
    """Why a span came too late for its trace's record, by what released the trace, and
    what to change."""
    return {
        "root_ended": "its root had ended and the trace had waited "
        f"trace_assembly.late_spans_wait_s ({assembly.late_spans_wait_s:g}s) for late spans; "
        "raise it if the service's instrumentation sends spans that long after the root",
        "idle_timeout": "no span of it had come for trace_assembly.idle_timeout_s "
        f"({assembly.idle_timeout_s:g}s); raise it if the service has steps that slow",
        "evicted": "it was pushed out early by trace_assembly.max_open_traces or "
        "max_open_bytes; raise them",
        "flushed": "the source of its spans had handed it to another replica",
        "shutdown": "the monitor was stopping",
    }


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
        shares: FairShares | None = None,
        log_events: frozenset[str] = LOG_EVENTS,
    ) -> None:
        """`shares`: fair admission per service while the evaluation stage is full
        (`_shares.py`); without it, everything is refused then."""
        self._outcomes = Outcomes(telemetry, observer, limits or SizeLimits())
        self._shares = shares
        self._sampling = TraceSampling(
            sampler, self._outcomes, route_attribute if route_in_sampling else None
        )
        # Off while /debug/records is served: it lists unsampled traces, which the filter
        # would never build.
        self._filter = SpanFilter(
            sampler, max_remembered=assembly.max_open_traces, keep_all=observer is not None
        )
        self._acks = Acknowledgements()
        self._next = consumer
        self._tick = min(1.0, assembly.idle_timeout_s / 4)  # real seconds between expiries
        self._assembler = TraceAssembler(
            idle_timeout_s=assembly.idle_timeout_s,
            max_open_traces=assembly.max_open_traces,
            max_open_bytes=assembly.max_open_bytes,
            on_drop=self._outcomes.assembly_dropped,
            clock=clock,
            log_events_wait_s=assembly.log_events_wait_s,
            log_events=log_events,
            late_spans_wait_s=assembly.late_spans_wait_s,
            on_late=partial(self._outcomes.late_spans, _late_causes(assembly)),
            open_calls_wait_s=assembly.open_calls_wait_s,
            missing_parent_wait_s=assembly.missing_parent_wait_s,
        )
        self._idle_timeout_s = assembly.idle_timeout_s
        self._metadata: dict[str, Mapping[str, str]] = {}  # by trace id, from its first delivery
        self._suspended: set[Hashable] = set()  # origins whose open traces idle expiry keeps
        self._accepting = False
        self._stopped = False
        self._expiry: asyncio.TimerHandle | None = None
        # Records and sampled traces the evaluation stage stopped taking (a trace counts
        # as one: its records were never built).
        self.abandoned = 0
        # Readings, not events: read from the assembler when scraped.
        assembler = self._assembler
        self._outcomes.open_traces.set_function(lambda: assembler.open_traces)
        self._outcomes.open_trace_bytes.set_function(lambda: assembler.open_bytes)
        self.assembled = self._outcomes.assembled
        self.unsampled = self._outcomes.unsampled

    @property
    def accepting(self) -> bool:
        return self._accepting

    # -- receivers (TraceConsumer, OriginConsumer) ----------------------------------------

    def refuses(self) -> bool:
        refused = self._refusal()
        if refused is not None:
            self._outcomes.dropped(refused.reason)
        return refused is not None

    def consume(self, deliveries: Sequence[Delivery]) -> Accepted | Refused:
        refused = self._refusal()
        built: list[Built | None] = [None] * len(deliveries)
        if refused is None and self._next.full:
            # Full, but a service below its share is still taken (`_shares.py`).
            built = [self._build(delivery) for delivery in deliveries]
            if not self._fair(deliveries, built):
                refused = _QUEUE_FULL
        if refused is not None:
            self._outcomes.dropped(refused.reason)
            return refused
        out: list[Ready] = []
        finished: list[FinishedTrace] = []
        unsampled: list[tuple[str, Sequence[RagRecord | RawRecord]]] = []  # records, by source
        for delivery, spans in zip(deliveries, built, strict=True):
            self._take_apart(delivery, out, finished, unsampled, spans)
        if unsampled:
            self._sampling.count_skipped(unsampled)
        self._release(finished, out)
        return ACCEPTED

    async def put(self, deliveries: Sequence[Delivery]) -> bool:
        while self._accepting and self._next.full:
            if not await self._next.room():
                break
        return bool(self.consume(deliveries))

    def flush(self) -> None:
        self._release(self._assembler.flush(), [])

    def holds(self, origins: Collection[Hashable]) -> int:
        return self._acks.holds(origins)

    def suspend(self, origins: Collection[Hashable]) -> None:
        self._suspended.update(origins)

    def resume(self, origins: Collection[Hashable]) -> None:
        self._suspended.difference_update(origins)

    def abandon(self, origins: Collection[Hashable]) -> None:
        if not origins:
            return
        self._suspended.difference_update(origins)
        gone = self._acks.handed_back(frozenset(origins), self._assembler.is_open)
        spans = self._assembler.abandon(gone)
        for trace_id in gone:
            self._metadata.pop(trace_id, None)
        if gone:
            self._outcomes.dropped("handed_back", spans)
            log.info(
                "trace stage: %d open traces (%d spans) handed back unevaluated: the source "
                "of their spans gave them away, and its next reader reads them again",
                len(gone),
                spans,
            )

    def _refusal(self) -> Refused | None:
        """What every delivery is refused for now, before it is decoded: shutting down, or
        a full evaluation stage (without fair admission, or past what it allows)."""
        if not self._accepting:
            return _SHUTTING_DOWN
        if self._next.full and (self._shares is None or self._shares.exhausted):
            return _QUEUE_FULL
        return None

    def _fair(self, deliveries: Sequence[Delivery], built: list[Built | None]) -> bool:
        """While the evaluation stage is full: whether to take these deliveries, their
        spans built (records wait for room: their receivers, Kafka and replay, do)."""
        if self._shares is None or any(delivery.records for delivery in deliveries):
            return False
        services = {span.service for b in built if b is not None for span in b.spans}
        return not services or self._shares.admits(services)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._accepting or self._stopped:
            return
        self._accepting = True
        self._expiry = asyncio.get_running_loop().call_later(self._tick, self._expire)

    async def shutdown(self, deadline_s: float) -> None:
        """Stop intake and release every open trace to the consumer (which must still
        accept: the service stops it after this stage). What it no longer takes is
        abandoned (counted in `abandoned`). Returns at once."""
        self._accepting = False
        if self._stopped:
            return
        self._stopped = True
        if self._expiry is not None:
            self._expiry.cancel()
        self._release(self._assembler.drain(), [])

    def _expire(self) -> None:
        """Release the traces idle too long (or done waiting for their log events), then
        come again in a tick."""
        self._expiry = asyncio.get_running_loop().call_later(self._tick, self._expire)
        try:
            expired = self._assembler.expire(keep=self._kept if self._suspended else None)
            self._release(expired, [])
        except Exception:  # a bug must not stop expiry
            log.exception("trace stage: releasing idle traces failed")

    def _kept(self, trace_id: str) -> bool:
        """Whether idle expiry keeps an open trace: its source is suspended."""
        return self._acks.from_any(trace_id, self._suspended)

    # -- assembly -----------------------------------------------------------------------------

    def _take_apart(
        self,
        delivery: Delivery,
        out: list[Ready],
        finished: list[FinishedTrace],
        unsampled: list[tuple[str, Sequence[RagRecord | RawRecord]]],
        built: Built | None = None,
    ) -> None:
        """`built`: the delivery's spans, if `_build` made them already."""
        ack = Ack(delivery.on_done, delivery.origin) if delivery.on_done is not None else None
        try:
            if delivery.records:
                self._records(delivery, ack, out, unsampled)
            spans = self._spans(delivery) if built is None else self._count(delivery, built)
            if spans:
                address = delivery.metadata.get(CLIENT_ADDRESS) if delivery.metadata else None
                released = self._assembler.add(spans, delivery.source, address=address)
                if ack is not None or delivery.metadata:
                    self._register(delivery, spans, ack, released)
                finished += released
        except Exception:
            # A bug must not stop the stage: count the delivery and keep serving.
            log.exception("trace stage failed on a delivery from %s", delivery.source)
            items = len(delivery.spans) + len(delivery.records) + len(delivery.unbuilt or ())
            self._outcomes.dropped("internal_error", items)
        finally:
            if ack is not None:
                ack.settle()

    def _spans(self, delivery: Delivery) -> list[Span]:
        """The spans of `delivery` to assemble, all of them counted as received."""
        return self._count(delivery, self._build(delivery))

    def _build(self, delivery: Delivery) -> Built:
        """The spans of `delivery`, not yet counted: a delivery the stage then refuses was
        never received."""
        if delivery.unbuilt is not None:
            built = self._filter.request(delivery.unbuilt)
        elif delivery.log_events:
            built = self._filter.events(delivery.spans)
        else:
            return Built(delivery.spans)
        return built

    def _count(self, delivery: Delivery, built: Built) -> list[Span]:
        """`built` counted as received; what the filter did not build is counted as the
        stage counts a trace nobody samples."""
        self._outcomes.spans_received(delivery.source, len(built.spans) + built.forgotten)
        if built.forgotten_roots:
            self._outcomes.forgotten(built.forgotten_roots)
        return built.spans

    def _records(
        self,
        delivery: Delivery,
        ack: Ack | None,
        out: list[Ready],
        unsampled: list[tuple[str, Sequence[RagRecord | RawRecord]]],
    ) -> None:
        """Records are sampled as they come; only the sampled ones go on (a `RawRecord`
        is validated only then)."""
        chosen, skipped, problems = self._sampling.records(delivery.records)
        if skipped:
            unsampled.append((delivery.source, skipped))
        if problems:
            self._outcomes.rejected(delivery, problems)
        for record, sampled, delivered in chosen:
            if ack is not None:
                ack.owe(1)
            self._outcomes.record(record, delivery.source)
            on_failed = partial(delivery.on_failed, delivered) if delivery.on_failed else None
            on_done: OnDone | None = ack.settle if ack else None
            if self._shares is not None:
                on_done = self._shares.hold(record.service, on_done)
            out.append(SampledRecord(record, delivery.source, sampled, on_done, on_failed))

    def _register(
        self,
        delivery: Delivery,
        spans: list[Span],
        ack: Ack | None,
        released: list[FinishedTrace],
    ) -> None:
        """The delivery owes one unit per trace it added spans to, and the first delivery
        of a trace gives its records their metadata. Late spans (of a released trace) owe
        one to their trace while its records are not finished, and nothing after."""
        done_now = {trace.trace_id for trace in released}
        assembling: list[str] = []
        late: list[str] = []
        for trace_id in {span.trace_id for span in spans}:
            if trace_id in done_now or self._assembler.is_open(trace_id):
                assembling.append(trace_id)
                if delivery.metadata:
                    self._metadata.setdefault(trace_id, delivery.metadata)
            else:
                late.append(trace_id)
        if ack is not None:
            self._acks.register(ack, assembling, late)

    def _release(self, finished: list[FinishedTrace], out: list[Ready]) -> None:
        """Decide sampling for the released traces and hand them, with the records in
        `out`, to the evaluation stage."""
        triggers: Tally[str] = Tally()
        unsampled: Tally[str] = Tally()
        events_only = 0
        for trace in finished:
            triggers[trace.trigger] += 1
            if trace.incomplete:
                self._outcomes.cut_by_idle_timeout(trace, self._idle_timeout_s)
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
            on_done: OnDone | None = waiting.settle if waiting else None
            if self._shares is not None:
                on_done = self._shares.hold(service, on_done)
            out.append(
                SampledTrace(
                    trace.spans,
                    trace.source,
                    sampled,
                    partial(self._outcomes.extracted, trace, service),
                    on_done,
                    metadata,
                    sum(span.size for span in trace.spans),
                )
            )
        self._outcomes.released(triggers)
        self._outcomes.unsampled_by_service(unsampled)
        if events_only:
            self._outcomes.assembly_dropped("events_only", events_only)
        if out:
            taken = self._next.take(out)
            if taken < len(out):
                self._abandon(out[taken:])

    def _abandon(self, left: Sequence[Ready]) -> None:
        """The evaluation stage stopped taking items (it stopped before this stage):
        they are abandoned, their deliveries done with False."""
        self.abandoned += len(left)
        traces = sum(1 for item in left if isinstance(item, SampledTrace))
        if traces:
            self._outcomes.abandoned("sampled traces", traces)
        if len(left) > traces:
            self._outcomes.abandoned("records", len(left) - traces)
        for item in left:
            if item.on_done is not None:
                item.on_done(False)
