"""The shared back half of the OTLP receivers: span queue → trace assembly → records.

Receivers decode a request (off the event loop, in this component's one worker thread),
then `enqueue` its spans on a bounded queue (`receivers.otlp.queue_size` spans). A full
queue is refused — the receiver answers with a retryable status — and counted as
`dropped_total{stage="assemble",reason="queue_full"}`; accepted spans are never dropped
for lack of room. One task drains the queue, assembles traces in the worker thread,
extracts records and hands each to the evaluation stage with `await stage.put(...)`, so a
slow stage holds the queue full and pushes back on senders rather than growing memory.

Sampling comes before extraction: when the stage exposes its `Sampler` (`stage.sampler`),
each released trace is first reduced to what the sampler reads (`sampling_view`: trace
id, service, route, feedback, error — one or two attribute lookups, no decoding of the
rest) and asked the stage's own question (`Sampler.samples_any`); a trace no evaluator
would sample is counted in `traces_unsampled_total{service}` and never extracted. The
view is never less of a priority than the records built from the trace, so a trace
dropped here is one the stage would have skipped for every evaluator.

Self-metrics beyond DESIGN.md's table (registered here, on the service's registry):
`rag_monitor_open_traces` (gauge), `rag_monitor_traces_assembled_total{trigger}` and
`rag_monitor_traces_unsampled_total{service}`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter as Tally
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from prometheus_client import Counter, Gauge

from monitor.config import Config
from monitor.processors.sampler import Sampler
from monitor.receivers.otlp.assembler import TRIGGERS, FinishedTrace, TraceAssembler
from monitor.receivers.otlp.decode import DecodeError, Span
from monitor.receivers.otlp.extract import extract_records, sampling_view
from monitor.records import RagRecord
from monitor.telemetry import NAMESPACE, RateLimitedLog, Telemetry

log = logging.getLogger(__name__)
T = TypeVar("T")
STAGE = "assemble"


class RecordConsumer(Protocol):
    """The evaluation stage as the receivers see it."""

    async def put(
        self, record: RagRecord, source: str, on_done: Callable[[], None] | None = None
    ) -> None: ...


class OtlpIngest:
    def __init__(self, config: Config, stage: RecordConsumer, telemetry: Telemetry) -> None:
        otlp = config.receivers.otlp
        self._capacity = otlp.queue_size
        self._route_attribute = otlp.route_attribute
        # The sampler compares routes only for overrides that name one: without such an
        # override the view skips the route lookup (a span decode per trace).
        self._view_route: str | None = (
            otlp.route_attribute
            if any(o.route is not None for o in config.sampling.overrides)
            else None
        )
        self._stage = stage
        sampler = getattr(stage, "sampler", None)
        # Without a sampler (a stand-in stage) every trace is extracted and handed on.
        self._sampler: Sampler | None = sampler if isinstance(sampler, Sampler) else None
        self._t = telemetry
        self._queue: deque[tuple[str, list[Span]]] = deque()
        self._queued = 0
        self._ready = asyncio.Event()
        self._idle_s = config.trace_assembly.idle_timeout_s
        self._assembler = TraceAssembler(
            idle_timeout_s=config.trace_assembly.idle_timeout_s,
            max_open_traces=config.trace_assembly.max_open_traces,
            on_drop=self._count_drop,
        )
        self._executor: ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None
        self._accepting = False
        self._stopped = False
        self.warn = RateLimitedLog(log)
        self.open_traces = Gauge(
            "open_traces",
            "Traces buffered by trace assembly.",
            namespace=NAMESPACE,
            registry=telemetry.registry,
        )
        self.assembled = Counter(
            "traces_assembled",
            "Traces released by trace assembly, by what released them.",
            ("trigger",),
            namespace=NAMESPACE,
            registry=telemetry.registry,
        )
        for trigger in TRIGGERS:
            self.assembled.labels(trigger)
        self.unsampled = Counter(
            "traces_unsampled",
            "Assembled traces no evaluator would sample, dropped before record extraction.",
            ("service",),
            namespace=NAMESPACE,
            registry=telemetry.registry,
        )
        telemetry.queue_depth.labels(STAGE).set(0)

    @property
    def accepting(self) -> bool:
        return self._accepting

    async def start(self) -> None:
        if self._task is not None or self._stopped:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="otlp-ingest")
        self._task = asyncio.create_task(self._run(), name="otlp-assemble")
        self._accepting = True

    async def offload(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run CPU work (decompression, decoding) in the ingest thread."""
        call = functools.partial(fn, *args, **kwargs)
        if self._executor is None:
            return call()
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def has_room(self) -> bool:
        return self._accepting and self._queued < self._capacity

    def refuse(self) -> None:
        """Count a request turned away with a retryable status."""
        self._t.dropped.labels(STAGE, "queue_full" if self._accepting else "shutting_down").inc()

    def enqueue(self, spans: list[Span], receiver: str) -> bool:
        """Queue decoded spans for assembly; False (counted) when full or stopping."""
        # One request larger than the whole queue is still accepted into an empty queue.
        if not self._accepting or (self._queued and self._queued + len(spans) > self._capacity):
            self.refuse()
            return False
        if spans:
            self._queue.append((receiver, spans))
            self._queued += len(spans)
            self._t.queue_depth.labels(STAGE).set(self._queued)
            self._ready.set()
        self._t.spans_received.labels(receiver).inc(len(spans))
        return True

    async def shutdown(self, deadline_s: float = 10.0) -> None:
        """Stop intake, assemble what is queued, release open traces to the stage."""
        self._accepting = False
        if self._stopped:
            return
        self._stopped = True
        if self._task is None:
            return
        self._ready.set()
        try:
            async with asyncio.timeout(deadline_s):
                await self._task
        except TimeoutError:
            self._task.cancel()
            left = self._queued + self._assembler.open_traces
            log.warning("OTLP ingest shutdown deadline passed; abandoning %d spans/traces", left)
            self._t.dropped.labels(STAGE, "shutdown_deadline").inc(left)
            await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def _count_drop(self, reason: str, n: int) -> None:
        self._t.dropped.labels(STAGE, reason).inc(n)
        self.warn.warning(reason, "trace assembly dropped %d spans: %s", n, reason)

    async def _run(self) -> None:
        tick = min(1.0, self._idle_s / 4)
        next_expiry = time.monotonic() + tick
        while True:
            if not self._queue:
                if self._stopped:
                    break
                self._ready.clear()
                try:
                    async with asyncio.timeout(max(0.0, next_expiry - time.monotonic())):
                        await self._ready.wait()
                except TimeoutError:
                    pass
            batch: list[tuple[str, list[Span]]] = []
            size = 0
            while self._queue and size < 8192:
                source, spans = self._queue.popleft()
                batch.append((source, spans))
                size += len(spans)
            now = time.monotonic()
            expire = now >= next_expiry
            if expire:
                next_expiry = now + tick
            try:
                records = await self.offload(self._assemble, batch, expire, False)
            except Exception:
                # A bug must not stop ingestion: count the batch and keep serving.
                log.exception("trace assembly failed on a batch of %d spans", size)
                self._t.dropped.labels(STAGE, "internal_error").inc(size)
                records = []
            self._queued -= size
            self._t.queue_depth.labels(STAGE).set(self._queued)
            await self._deliver(records)
        records = await self.offload(self._assemble, [], False, True)
        await self._deliver(records)

    def _assemble(
        self, batch: list[tuple[str, list[Span]]], expire: bool, drain: bool
    ) -> list[tuple[str, RagRecord]]:
        finished: list[FinishedTrace] = []
        for source, spans in batch:
            finished += self._assembler.add(spans, source)
        if expire:
            finished += self._assembler.expire()
        if drain:
            finished += self._assembler.drain()
        self.open_traces.set(self._assembler.open_traces)
        out: list[tuple[str, RagRecord]] = []
        triggers: Tally[str] = Tally()
        unsampled: Tally[str] = Tally()
        sampler = self._sampler
        for trace in finished:
            triggers[trace.trigger] += 1
            try:
                if sampler is not None and trace.spans:
                    view = sampling_view(trace.spans, route_attribute=self._view_route)
                    if not sampler.samples_any(view):
                        unsampled[view.service] += 1
                        continue
                records = extract_records(trace.spans, route_attribute=self._route_attribute)
            except DecodeError as exc:
                # An attribute value that is not valid protobuf, found when first read.
                self._t.records_rejected.labels(trace.source, exc.reason).inc()
                self.warn.warning(exc.reason, "trace %s: %s", trace.trace_id, exc.detail)
                continue
            except Exception as exc:
                self._t.records_rejected.labels(trace.source, "extract_failed").inc()
                self.warn.warning(
                    "extract_failed", "trace %s: cannot build a record: %s", trace.trace_id, exc
                )
                continue
            if not records:
                self._t.dropped.labels(STAGE, "not_rag").inc()
                continue
            out += [(trace.source, r) for r in records]
        for trigger, n in triggers.items():
            self.assembled.labels(trigger).inc(n)
        for service, n in unsampled.items():
            self.unsampled.labels(self._t.service_cap(service)).inc(n)
        return out

    async def _deliver(self, records: list[tuple[str, RagRecord]]) -> None:
        for source, record in records:
            try:
                await self._stage.put(record, source=source)
            except RuntimeError:
                self._t.dropped.labels(STAGE, "shutting_down").inc()
