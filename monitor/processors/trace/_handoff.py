"""Hand-on: released, sampled traces (their spans as assembled) and sampled records go to
the evaluation stage, with the sampling decision attached; it extracts the traces' records.

Items go on at most once per `HAND_ON_INTERVAL_S` unless `HAND_ON_ITEMS` are ready: a
hand-on wakes the stage's worker thread and the event loop, so at a steady sampled rate
items go on in batches instead of one hand-on per request. The first item after a quiet
interval goes on at once. The worker waits while the evaluation stage is full; past the
shutdown deadline (`abandon`) it stops waiting, and what was never taken is abandoned: its
deliveries done with False, counted once each (a sampled trace counts as one).
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future

from monitor.component import RecordConsumer, SampledRecord, SampledTrace
from monitor.processors.trace._outcomes import Outcomes

log = logging.getLogger("monitor.processors.trace")
HAND_ON_INTERVAL_S = 0.05
HAND_ON_ITEMS = 256


class HandOn:
    """The worker thread's side of handing items on; `loop` is set when the stage
    starts, `abandon` past its shutdown deadline."""

    def __init__(
        self,
        consumer: RecordConsumer,
        outcomes: Outcomes,
        *,
        tick: float,
        pace_clock: Callable[[], float],
    ) -> None:
        self._consumer = consumer
        self._outcomes = outcomes
        self._tick = tick
        self._pace_clock = pace_clock  # when ready items go on (real time unless a test's)
        self._last = -math.inf  # by `pace_clock`
        self._lock = threading.Lock()  # `abandoned` is counted from two threads
        self.loop: asyncio.AbstractEventLoop | None = None
        self.abandon = False
        # Past the shutdown deadline: items never taken by the consumer (a sampled trace
        # counts as one: its records were never built).
        self.abandoned = 0

    def due(self, ready: int) -> bool:
        """Whether `ready` items should go on now."""
        return ready >= HAND_ON_ITEMS or self._pace_clock() >= self.next_at()

    def next_at(self) -> float:
        return self._last + HAND_ON_INTERVAL_S

    def wait_s(self) -> float:
        return max(0.0, self.next_at() - self._pace_clock())

    def __call__(self, out: Sequence[SampledRecord | SampledTrace]) -> None:
        """Give items to the consumer, waiting while it is full. Past the shutdown
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
                log.exception("the evaluation stage refused a batch of %d items", len(out))
                taken = 0
            self._abandon_rest(out, taken)
            return
        future.add_done_callback(lambda f: self._abandon_rest(out, _taken(f)))

    def _abandon_rest(self, out: Sequence[SampledRecord | SampledTrace], taken: int) -> None:
        if taken >= len(out):
            return
        left = out[taken:]
        with self._lock:
            self.abandoned += len(left)
        traces = sum(1 for item in left if isinstance(item, SampledTrace))
        if traces:
            self._outcomes.abandoned("sampled traces", traces)
        if len(left) > traces:
            self._outcomes.abandoned("records", len(left) - traces)
        for item in left:
            if item.on_done is not None:
                item.on_done(False)


def _taken(future: Future[int]) -> int:
    if future.cancelled() or future.exception() is not None:
        return 0
    return future.result()
