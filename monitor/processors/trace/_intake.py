"""The trace stage's intake: deliveries waiting to be assembled, and what is ready to hand
on, bounded together in items and in bytes.

Receivers add from their own threads (`admit`); the thread that assembles takes batches
(`take`), and the stage's worker takes what is ready (`take_ready`). One lock guards both
queues: admission reads both bounds at once.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from monitor.component import Delivery, SampledRecord, SampledTrace
from monitor.processors.trace._sampling import Chosen
from monitor.record_limits import record_bytes

# Items taken per pass: large enough to amortise a pass, small enough that expiry and
# acknowledgements stay timely under load.
PASS_ITEMS = 8192


@dataclass(slots=True)
class Pending:
    """A delivery in the intake; for records, the ones sampled and by which evaluators."""

    delivery: Delivery
    chosen: list[Chosen] | None
    # Bytes held: the spans as received, or the sampled records as parsed (a record's
    # documents weigh far more than their text).
    size: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        chosen = self.chosen
        self.size = (
            self.delivery.size
            if chosen is None
            else sum(record_bytes(record) for record, _, _ in chosen)
        )

    @property
    def items(self) -> int:
        return len(self.delivery.spans) if self.chosen is None else len(self.chosen)


Ready = SampledRecord | SampledTrace  # handed on together


class TraceIntake:
    def __init__(self, max_items: int, max_bytes: int, on_room: Callable[[], None]) -> None:
        self._max_items = max_items
        self._max_bytes = max_bytes
        self._on_room = on_room  # items left: called outside the lock
        self._lock = threading.Lock()
        self._queue: deque[Pending] = deque()
        self._queued_items = 0
        self._queued_bytes = 0
        self._ready: deque[Ready] = deque()
        self._ready_items = 0
        self._ready_bytes = 0
        self.accepting = False

    @property
    def queued(self) -> int:
        """Items waiting to be assembled."""
        return self._queued_items

    @property
    def ready(self) -> int:
        """Records and sampled traces waiting to be handed on."""
        return self._ready_items

    def __bool__(self) -> bool:
        """Whether deliveries wait to be assembled."""
        return bool(self._queue)

    def full(self) -> str:
        """Why a delivery would be refused now ("shutting_down", "queue_full"), or ""."""
        if not self.accepting:
            return "shutting_down"
        if (
            self._queued_items + self._ready_items >= self._max_items
            or self._queued_bytes + self._ready_bytes >= self._max_bytes
        ):
            return "queue_full"
        return ""

    def admit(self, pending: Sequence[Pending]) -> str:
        """Take all of `pending` or none: "" when taken, else why not."""
        items = sum(p.items for p in pending)
        size = sum(p.size for p in pending)
        with self._lock:
            if not self.accepting:
                return "shutting_down"
            if (self._queued_items or self._ready_items) and (
                self._queued_items + self._ready_items + items > self._max_items
                or self._queued_bytes + self._ready_bytes + size > self._max_bytes
            ):
                return "queue_full"
            # One delivery larger than the whole bound is still taken into an empty
            # intake, so nothing is refused forever.
            self._queue.extend(pending)
            self._queued_items += items
            self._queued_bytes += size
        return ""

    def stop_accepting(self) -> None:
        with self._lock:
            self.accepting = False

    def take(self) -> list[Pending]:
        """The next batch to assemble (up to `PASS_ITEMS` items)."""
        batch: list[Pending] = []
        items = size = 0
        with self._lock:
            while self._queue and items < PASS_ITEMS:
                pending = self._queue.popleft()
                batch.append(pending)
                items += pending.items
                size += pending.size
            self._queued_items -= items
            self._queued_bytes -= size
        if batch:
            self._on_room()
        return batch

    def add_ready(self, out: Sequence[Ready]) -> bool:
        """Queue records for the next hand-on; True if none were queued before."""
        if not out:
            return False
        with self._lock:
            first = not self._ready
            self._ready.extend(out)
            self._ready_items += len(out)
            self._ready_bytes += sum(item.size for item in out)
        return first

    def take_ready(self) -> list[Ready]:
        with self._lock:
            ready = list(self._ready)
            self._ready.clear()
            self._ready_items = 0
            self._ready_bytes = 0
        if ready:
            self._on_room()
        return ready
