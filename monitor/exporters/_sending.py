"""The exporters' one sending path, as the OpenTelemetry Collector's `exporterhelper`: a
bounded queue, one worker that sends batches from its head under the retry policy, every
lost item counted, and a flush on shutdown within the deadline.

An exporter gives `SendingQueue` what it knows and nothing else: `send` (one attempt at one
batch; it raises `RetryableError` — with the server's throttle delay, if any — or
`PermanentError`), the stage label its drops are counted under, its limits and its retry
policy (`monitor/shared/retry.py`), and hooks for its own counters. The queue knows no stage and
no exporter:

- `put` takes an item unless the queue holds `max_items` items or `max_bytes` bytes
  already (the item's own size counts too) or shutdown has begun: a refused item is
  counted (`queue_full`, `shutting_down`) and `put` returns False. It never blocks.
- The worker sends up to `max_batch` items from the head; they stay queued (and count
  against the limits) until the attempt ends, so at every moment the queue holds
  everything accepted and not yet sent or given up. With `split_failed_batches`, a batch
  that fails is tried again at once at half its size (down to one item) before backing
  off, and the size grows back after each success: a destination with room for part of a
  batch (a disk nearly full) takes that part. A retryable failure otherwise waits the
  policy's delay (full jitter, or the server's `Retry-After`); `PermanentError` drops the
  batch (`rejected`), and so do the policy's spent attempts or deadline (`failed`).
  Any other exception from `send` is logged and retried like a retryable one.
- `shutdown(deadline_s)` refuses new items, lets the worker send what is queued, and at
  the deadline cancels it (an attempt in flight included: its items are not sent as far
  as the queue knows); a retry whose wait would end past the deadline is not waited for.
  What is left is dropped (`shutdown`).

Every drop is counted in `rag_monitor_dropped_total{stage,reason}` (the exporter may name
a reason its own way, `reasons`), passed to `on_drop`, and logged at most once per reason
per `_LOG_INTERVAL_S`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Generic, Literal, TypeVar

from monitor.shared.bounded import BoundedQueue
from monitor.shared.retry import Retry, RetryPolicy
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

T = TypeVar("T")
DropReason = Literal["queue_full", "shutting_down", "rejected", "failed", "shutdown"]
_LOG_INTERVAL_S = 30.0
# Drops of items the queue had accepted are errors; refusals at the door are warnings
# (the queue does its job).
_REFUSALS: frozenset[DropReason] = frozenset({"queue_full", "shutting_down"})


class RetryableError(Exception):
    """The batch did not arrive; another attempt may. `retry_after`: the seconds the
    destination asked to wait, if it asked."""

    def __init__(self, message: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(Exception):
    """The destination refused the batch; sending it again will not help."""


class SendingQueue(Generic[T]):
    """A bounded queue in front of one destination (see the module docstring).

    **Parameters:**
    - `send`: one attempt at a batch (a list of queued items, oldest first).
    - `telemetry`, `stage`: drops go to `dropped_total{stage=stage}`.
    - `name`: names the destination in log lines and the worker task.
    - `retry`: the retry policy of each batch.
    - `max_items`, `max_bytes`: the queue's limits (`max_bytes` None: items only).
    - `max_batch`: items per attempt at most; `split_failed_batches`: see above.
    - `count`: how many of what the exporter counts an item holds (1 each by default).
    - `reasons`: label values for the drop reasons where the exporter's differ.
    - `on_sent(batch)`, `on_retry(batch, error)`, `on_drop(batch, reason)`: the
      exporter's own bookkeeping; `on_retry` runs before each wait for a retry.
    - `rng`, `sleep`: the backoff's randomness and its wait (tests inject them).
    - `logger`: where the drop lines go (the exporter's logger, so they carry its name).
    """

    def __init__(
        self,
        send: Callable[[list[T]], Awaitable[None]],
        telemetry: Telemetry,
        stage: str,
        *,
        name: str,
        retry: RetryPolicy,
        max_items: int,
        max_bytes: int | None = None,
        max_batch: int = 1,
        split_failed_batches: bool = False,
        count: Callable[[T], int] | None = None,
        reasons: Mapping[DropReason, str] | None = None,
        on_sent: Callable[[list[T]], None] | None = None,
        on_retry: Callable[[list[T], Exception], None] | None = None,
        on_drop: Callable[[list[T], DropReason], None] | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        logger: logging.Logger = log,
    ) -> None:
        if max_items < 1 or max_batch < 1 or (max_bytes is not None and max_bytes < 1):
            raise ValueError(f"{name}: the queue's limits must be positive")
        self._send = send
        self._dropped = telemetry.counter("dropped")
        self._stage = stage
        self.name = name
        self._retry = retry
        self._max_batch = max_batch
        self._split = split_failed_batches
        self._count = count
        self._reasons = dict(reasons or {})
        self._on_sent = on_sent
        self._on_retry = on_retry
        self._on_drop = on_drop
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._quiet = RateLimitedLog(logger, _LOG_INTERVAL_S)
        self._items: BoundedQueue[T] = BoundedQueue(max_items, max_bytes)
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._deadline = 0.0  # loop time at which shutdown stops sending
        self.in_flight = 0  # items of the attempt under way (0 between attempts)

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        """Bytes of the items queued, those in flight included."""
        return self._items.nbytes

    def put(self, item: T, nbytes: int = 0) -> bool:
        """Queue `item` (of `nbytes` bytes); False, counted, when it is refused."""
        if self._closed:
            self._drop([item], "shutting_down", "shutdown has begun")
            return False
        if not self._items.fits(nbytes):
            self._drop([item], "queue_full", "the queue is full")
            return False
        self._items.append(item, nbytes)
        self._ready.set()
        return True

    async def start(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._work(), name=self.name)

    async def shutdown(self, deadline_s: float) -> None:
        """Send what is queued until `deadline_s`, then drop the rest (counted). Safe
        without `start` and safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._deadline = asyncio.get_running_loop().time() + deadline_s
        self._ready.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                async with asyncio.timeout(deadline_s):
                    await asyncio.shield(task)
            except TimeoutError:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self.in_flight = 0
        if self._items:
            self._drop(self._items.clear(), "shutdown", "the shutdown deadline passed")

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        batch_size = self._max_batch
        while True:
            if not self._items:
                if self._closed:
                    return
                self._ready.clear()
                await self._ready.wait()
                continue
            n = min(batch_size, len(self._items))
            batch = self._items.head(n)
            retry = Retry(self._retry, self._rng, loop.time)
            while True:
                self.in_flight = n
                try:
                    await self._send(batch)
                except PermanentError as exc:
                    self._drop(self._pop(batch), "rejected", str(exc))
                    break
                except Exception as exc:
                    if not isinstance(exc, RetryableError):
                        self._quiet.warning("raised", "%s: sending raised %r", self.name, exc)
                    if self._split and n > 1:
                        n = batch_size = n // 2
                        del batch[n:]
                        continue
                    delay = retry.next_delay(getattr(exc, "retry_after", None))
                    if delay is None:
                        self._drop(
                            self._pop(batch),
                            "failed",
                            f"gave up after {retry.failures} attempts: {exc or type(exc).__name__}",
                        )
                        break
                    if self._closed and loop.time() + delay > self._deadline:
                        return  # no retry before the deadline: shutdown drops what is left
                    if self._on_retry is not None:
                        self._on_retry(batch, exc)
                    self.in_flight = 0
                    await self._sleep(delay)
                    continue
                sent = self._pop(batch)
                if self._on_sent is not None:
                    self._on_sent(sent)
                if self._split:
                    batch_size = min(self._max_batch, batch_size * 2)
                break
            self.in_flight = 0

    def _pop(self, batch: list[T]) -> list[T]:
        """Take `batch`, the queue's first items, off the queue."""
        for _ in batch:
            self._items.popleft()
        return batch

    def _drop(self, items: list[T], reason: DropReason, why: str) -> None:
        n = len(items) if self._count is None else sum(self._count(item) for item in items)
        self._dropped.labels(self._stage, self._reasons.get(reason, reason)).inc(n)
        level = logging.WARNING if reason in _REFUSALS else logging.ERROR
        self._quiet.log(reason, level, "%s: dropped %d (%s): %s", self.name, n, reason, why)
        if self._on_drop is not None:
            self._on_drop(items, reason)
