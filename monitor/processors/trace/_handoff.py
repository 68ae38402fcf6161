"""Hand-on: released, sampled traces → their records, extracted in a batch just before
they go to the evaluation stage, with the sampling decision attached.

Records go on at most once per `HAND_ON_INTERVAL_S` unless `HAND_ON_ITEMS` are ready: a
hand-on wakes the stage's worker thread and the event loop, so at a steady sampled rate
records go on in batches instead of one hand-on per request. The first record after a
quiet interval goes on at once. The worker waits while the extractor works and while the
evaluation stage is full; past the shutdown deadline (`abandon`) it stops waiting, and
what was never extracted or never taken is abandoned: its deliveries done with False,
counted once each.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future
from dataclasses import dataclass
from typing import cast

from monitor.component import RecordConsumer, SampledRecord
from monitor.processors.trace._acks import Contributors, TraceDone
from monitor.processors.trace._assembler import FinishedTrace
from monitor.processors.trace._extract import Extraction, Extractor, Unreadable, extract_traces
from monitor.processors.trace._outcomes import Outcomes
from monitor.records import RagRecord, RecordError
from monitor.spans import Span

log = logging.getLogger("monitor.processors.trace")
HAND_ON_INTERVAL_S = 0.05
HAND_ON_ITEMS = 256


@dataclass(slots=True)
class Sampled:
    """A released trace that is sampled, waiting to be extracted at the next hand-on."""

    trace: FinishedTrace
    sampled: frozenset[str]
    service: str  # the root's, as the records get it
    contributors: Contributors
    metadata: Mapping[str, str] | None
    size: int


class HandOn:
    """The worker thread's side of handing records on; `loop` is set when the stage
    starts, `abandon` past its shutdown deadline."""

    def __init__(
        self,
        extractor: Extractor,
        consumer: RecordConsumer,
        outcomes: Outcomes,
        *,
        route_attribute: str,
        tick: float,
        pace_clock: Callable[[], float],
        acks_lock: threading.Lock,
    ) -> None:
        self._extractor = extractor
        self._consumer = consumer
        self._outcomes = outcomes
        self._route_attribute = route_attribute
        self._tick = tick
        self._pace_clock = pace_clock  # when ready records go on (real time unless a test's)
        self._acks_lock = acks_lock
        self._last = -math.inf  # by `pace_clock`
        self._lock = threading.Lock()  # `abandoned` is counted from two threads
        self.loop: asyncio.AbstractEventLoop | None = None
        self.abandon = False
        # Past the shutdown deadline: records never taken by the consumer, and sampled
        # traces never extracted (one each: their records were never built).
        self.abandoned = 0

    def due(self, ready: int) -> bool:
        """Whether `ready` records should go on now."""
        return ready >= HAND_ON_ITEMS or self._pace_clock() >= self.next_at()

    def next_at(self) -> float:
        return self._last + HAND_ON_INTERVAL_S

    def wait_s(self) -> float:
        return max(0.0, self.next_at() - self._pace_clock())

    def __call__(self, ready: Sequence[SampledRecord | Sampled]) -> None:
        """Extract the sampled traces of `ready` and give everything to the consumer."""
        self._hand_on(self._extracted(ready))

    def _extracted(self, ready: Sequence[SampledRecord | Sampled]) -> list[SampledRecord]:
        """`ready` with each sampled trace replaced by its records, extracted by the
        extractor (waited for in this thread; past the shutdown deadline the traces not
        extracted yet are abandoned)."""
        traces = [item for item in ready if isinstance(item, Sampled)]
        if not traces:
            return cast(list[SampledRecord], list(ready))
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
        if self.abandon:
            return None
        try:
            future = self._extractor.extract(traces, self._route_attribute)
            while not self.abandon:
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

    def _records_of(self, item: Sampled, extraction: Extraction, out: list[SampledRecord]) -> None:
        """A sampled trace's records, counted, to `out`; a trace that yields none (not a
        RAG trace, or unreadable: counted) settles its deliveries at once."""
        trace, service = item.trace, item.service
        records: list[RagRecord] = []
        if isinstance(extraction, Unreadable):
            self._outcomes.unreadable(trace, service, extraction)
        else:
            for record in extraction:
                try:
                    records.append(self._outcomes.bounded(record))
                except RecordError as exc:
                    why = Unreadable(exc.reason, exc.detail)
                    self._outcomes.unreadable(trace, service, why)
            if not extraction:
                self._outcomes.not_rag(trace, service)
        if not records:
            item.contributors.settle()
            return
        done = (
            TraceDone(item.contributors, len(records), self._acks_lock)
            if item.contributors
            else None
        )
        for record in records:
            if item.metadata:
                record = record.model_copy(
                    update={"metadata": {**record.metadata, **item.metadata}}
                )
            self._outcomes.record(record, trace.source)
            out.append(SampledRecord(record, trace.source, item.sampled, done))

    def _abandon_traces(self, traces: list[Sampled]) -> None:
        """Past the shutdown deadline: sampled traces never extracted are abandoned."""
        with self._lock:
            self.abandoned += len(traces)
        self._outcomes.abandoned("sampled traces", len(traces))
        for item in traces:
            item.contributors.settle(False)

    def _hand_on(self, out: list[SampledRecord]) -> None:
        """Give records to the consumer, waiting while it is full. Past the shutdown
        deadline the worker stops waiting; what the consumer never takes is abandoned
        once it returns (it returns when it stops accepting)."""
        if not out:
            return
        assert self.loop is not None
        self._last = self._pace_clock()
        future = asyncio.run_coroutine_threadsafe(self._consumer.put_many(out), self.loop)
        while not self.abandon:
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
        self._outcomes.abandoned("records", left)
        for item in out[taken:]:
            if item.on_done is not None:
                item.on_done(False)


def _taken(future: Future[int]) -> int:
    if future.cancelled() or future.exception() is not None:
        return 0
    return future.result()
