"""The trace stage as the consumer thread reaches it: through the event loop.

The trace stage lives on the event loop; the consumer thread (kafka-python blocks) hands
it a poll's deliveries and asks what it holds, each as a call run on the loop whose answer
the thread waits for (an awaited round trip: the thread does nothing meanwhile). The
rebalance callbacks' orders (suspend, resume or hand back partitions, flush) are sent and
not waited for: the loop runs them in the order sent, before any later question, and one
must never be withdrawn (the stage's state would no longer match the partitions owned).
Before the receiver starts there
is no loop to go through, and calls run where they are made (the unit tests drive the
receiver's parts that way), as do calls made on the loop itself. Once the loop is closed
(the process is stopping past its service), a call answers what a stopped stage would.

The thread waits for an answer at most `answer_within_s` (half the consumer's
`max_poll_interval_ms`, so that a stalled loop does not also cost the group membership):
past it, a call the loop has not started yet is withdrawn — it will not run — counted in
`kafka_stage_calls_expired_total{call}` and logged, and the thread goes on with what a
stopped stage would answer (a poll's deliveries refused: held and offered again). A call
the loop has started is synchronous on the loop and is waited for to its end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import TypeVar, cast

from monitor.component import Accepted, Delivery, OriginConsumer, Refused
from monitor.telemetry import Telemetry

A = TypeVar("A")
R = TypeVar("R")
_STOPPED = Refused("shutting_down")

log = logging.getLogger("monitor.receivers.kafka")


class StageThroughLoop:
    """`OriginConsumer`'s calls from another thread; `loop` is set once the receiver
    starts."""

    def __init__(self, stage: OriginConsumer, telemetry: Telemetry, answer_within_s: float) -> None:
        self._stage = stage
        self._answer_within_s = answer_within_s
        self._expired = telemetry.counter("kafka_stage_calls_expired")
        self._failed = telemetry.counter("dropped")
        self.loop: asyncio.AbstractEventLoop | None = None

    def consume(self, deliveries: Sequence[Delivery]) -> Accepted | Refused:
        answer: Accepted | Refused = _STOPPED
        return self._call("consume", self._stage.consume, deliveries, closed=answer)

    def holds(self, origins: Collection[Hashable]) -> int:
        return self._call("holds", self._stage.holds, origins, closed=0)

    def suspend(self, origins: Collection[Hashable]) -> None:
        self._tell("suspend", self._stage.suspend, origins)

    def resume(self, origins: Collection[Hashable]) -> None:
        self._tell("resume", self._stage.resume, origins)

    def abandon(self, origins: Collection[Hashable]) -> None:
        self._tell("abandon", self._stage.abandon, origins)

    def flush(self) -> None:
        self._tell("flush", lambda _: self._stage.flush(), ())

    def _tell(self, name: str, method: Callable[[A], None], argument: A) -> None:
        """An order: run on the loop after what was sent before it, not waited for."""
        loop = self.loop
        if loop is None or _running_loop() is loop:
            method(argument)  # not started, or already on the loop: run it here
            return
        try:
            loop.call_soon_threadsafe(self._obey, name, method, argument)
        except RuntimeError:  # the loop is closed: no stage to reach
            pass

    def _obey(self, name: str, method: Callable[[A], None], argument: A) -> None:
        try:
            method(argument)
        except Exception:
            self._failed.labels("kafka", f"stage_{name}_failed").inc()
            log.exception("the trace stage failed the Kafka consumer's %s order", name)

    def _call(self, name: str, method: Callable[[A], R], argument: A, *, closed: R) -> R:
        loop = self.loop
        if loop is None or _running_loop() is loop:
            return method(argument)  # not started, or already on the loop: run it here
        if loop.is_closed():
            return closed  # no stage to reach
        pending = _Pending()
        call = _run(method, argument, pending)
        try:
            future = asyncio.run_coroutine_threadsafe(call, loop)
        except RuntimeError:  # closed meanwhile
            call.close()
            return closed
        try:
            return cast(R, future.result(timeout=self._answer_within_s))
        except concurrent.futures.TimeoutError:
            if not pending.withdraw():
                # Running on the loop now: it ends with the call.
                return cast(R, future.result())
        self._expired.labels(name).inc()
        log.warning(
            "the event loop did not take the Kafka consumer's %s call within %.1f s "
            "(a blocked or overloaded loop); withdrawn, the consumer goes on as if the "
            "stage were stopped",
            name,
            self._answer_within_s,
        )
        return closed


class _Pending:
    """Whether a call sent to the loop started, or was withdrawn first: one of the two."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = False
        self._withdrawn = False

    def start(self) -> bool:
        """On the loop: False when the thread withdrew the call."""
        with self._lock:
            self._started = not self._withdrawn
            return self._started

    def withdraw(self) -> bool:
        """In the thread: False when the loop started the call already."""
        with self._lock:
            self._withdrawn = not self._started
            return self._withdrawn


async def _run(method: Callable[[A], R], argument: A, pending: _Pending) -> R | None:
    """The call on the loop, unless the thread withdrew it first (then None, unread)."""
    return method(argument) if pending.start() else None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # this thread runs no loop
        return None
