"""The evaluation stage's queue: sampled traces and records waiting for a worker task, and
the cost of those in work, bounded together in items and in bytes.

The trace stage hands items in with `take`, which never waits, past the bounds if need
be; while the queue is `full` the trace stage refuses new deliveries, and `put` (benches,
tests) and `room` wait for room instead. The byte bound counts what is queued and what is
in work together, each at what it will cost (`recost`: a trace at its spans' bytes until
its records are built, at their estimated size after); while the items in work weigh
more than the bound, the queue is full as soon as one item waits.

Workers (asyncio tasks) wait in `next_batch` and are woken one per batch the queue
holds, for new items at most once per `BATCH_INTERVAL_S` unless a whole batch waits (the
first items after a quiet interval at once): a task costs the pool a pickle and a round
trip whatever its size, so at a steady sampled rate items go in batches rather than one
task each (what that saves: docs/performance.md).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import Gauge

from monitor.component import SampledRecord, SampledTrace
from monitor.shared.bounded import BoundedQueue

Item = SampledRecord | SampledTrace


@dataclass(slots=True)
class InWork:
    """An item taken for work, until it is finished or abandoned: the stage's one record
    of it."""

    item: Item
    cost: int  # its bytes in the byte bound
    writing: asyncio.Future[list[bool]] | None = None  # its results, being persisted
    told: bool = False  # its trace's `on_extracted` was called


# The least time between two wake-ups of the workers for less than a batch.
BATCH_INTERVAL_S = 0.05


class WorkQueue:
    """`max_batch` items at most per batch; `depth` shows how many wait."""

    def __init__(self, max_items: int, max_bytes: int, max_batch: int, depth: Gauge) -> None:
        self._queue: BoundedQueue[Item] = BoundedQueue(max_items, max_bytes)
        self._max_batch = max_batch
        self._depth = depth
        self._in_work_bytes = 0
        self.in_work: dict[int, InWork] = {}  # by the item's id
        # Workers waiting for work, each woken alone: items handed in wake as many workers
        # as they make batches, not all of them.
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._has_room = asyncio.Event()  # items left the queue or work, or stopping
        self._woken_at = -BATCH_INTERVAL_S  # loop time of the last wake-up for new items
        self._wake_later: asyncio.TimerHandle | None = None
        self.accepting = False

    @property
    def max_items(self) -> int:
        return self._queue.max_items

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[Item]:
        return iter(self._queue)

    @property
    def full(self) -> bool:
        """Whether the queue holds what its bounds allow (an empty queue never does)."""
        return bool(self._queue) and not self._room_for(1)

    def take(self, items: Sequence[Item]) -> int:
        """Queue `items` at once, past the bounds if need be; 0 once not accepting."""
        if not self.accepting:
            return 0
        for item in items:
            self._queue.append(item, item.size)
        self._queued()
        return len(items)

    async def room(self) -> bool:
        """Wait until the queue is not `full`; False once it stopped accepting."""
        while self.accepting and self.full:
            self._has_room.clear()
            await self._has_room.wait()
        return self.accepting

    async def put(self, items: Sequence[Item]) -> int:
        """Take items in order, waiting for room for each; returns how many were taken
        before the queue stopped accepting (the caller still owns the rest)."""
        taken = 0
        while taken < len(items) and self.accepting:
            if not self._room_for(items[taken].size):
                self._has_room.clear()
                await self._has_room.wait()
                continue
            # Everything that fits at once: one wake-up of the workers, not one an item.
            while taken < len(items) and self._room_for(items[taken].size):
                self._queue.append(items[taken], items[taken].size)
                taken += 1
            self._queued()
        return taken

    def stop(self) -> None:
        """Take no more; whoever waits for room gives up."""
        self.accepting = False
        self._has_room.set()
        if self._wake_later is not None:
            self._wake_later.cancel()
            self._wake_later = None

    def clear(self) -> list[Item]:
        """Every item still queued (at the shutdown deadline), oldest first."""
        self._depth.set(0)
        return self._queue.clear()

    async def next_batch(self) -> list[Item]:
        """Wait for work; up to a batch of items, in work from now."""
        while not self._queue:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            await waiter
        batch = [self._queue.popleft()]
        while len(batch) < self._max_batch and self._queue:
            batch.append(self._queue.popleft())
        for item in batch:
            self.in_work[id(item)] = InWork(item, item.size)
            self._in_work_bytes += item.size
        self._depth.set(len(self._queue))
        if self._queue:
            self._wake(1)  # more than this batch was waiting: pass it on
        self._has_room.set()
        return batch

    def recost(self, item: Item, cost: int) -> None:
        """An item in work now costs `cost` (a trace once its records are built)."""
        work = self.in_work.get(id(item))
        if work is not None:
            self._in_work_bytes += cost - work.cost
            work.cost = cost
            self._has_room.set()

    def done(self, item: Item) -> InWork | None:
        """An item left work (finished or abandoned); None if it already had."""
        work = self.in_work.pop(id(item), None)
        if work is not None:
            self._in_work_bytes -= work.cost
            self._has_room.set()
        return work

    def _room_for(self, size: int) -> bool:
        """Room for one more item of `size` bytes. One item larger than the byte bound
        still enters an empty queue."""
        return not self._queue or self._queue.fits(size, beside=self._in_work_bytes)

    def _queued(self) -> None:
        """Items entered the queue: wake a worker per batch they make, now if a whole
        batch waits or the last wake-up is `BATCH_INTERVAL_S` old, else then."""
        self._depth.set(len(self._queue))
        loop = asyncio.get_running_loop()
        wait = self._woken_at + BATCH_INTERVAL_S - loop.time()
        if len(self._queue) >= self._max_batch or wait <= 0:
            self._wake_for_queued()
        elif self._wake_later is None:
            self._wake_later = loop.call_later(wait, self._wake_for_queued)

    def _wake_for_queued(self) -> None:
        if self._wake_later is not None:
            self._wake_later.cancel()
            self._wake_later = None
        self._woken_at = asyncio.get_running_loop().time()
        self._wake(-(-len(self._queue) // self._max_batch))

    def _wake(self, workers: int) -> None:
        while workers and self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                workers -= 1
