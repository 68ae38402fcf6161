"""The trace stage as the consumer thread reaches it: through the event loop.

The trace stage lives on the event loop; the consumer thread (kafka-python blocks) hands
it a poll's deliveries, and its rebalance callbacks ask it to suspend, resume or hand
back partitions, each as a call run on the loop whose answer the thread waits for (an
awaited round trip: the thread does nothing meanwhile). Before the receiver starts there
is no loop to go through, and calls run where they are made (the unit tests drive the
receiver's parts that way), as do calls made on the loop itself. Once the loop is closed
(the process is stopping past its service), a call answers what a stopped stage would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import TypeVar

from monitor.component import Accepted, Delivery, OriginConsumer, Refused

A = TypeVar("A")
R = TypeVar("R")
_STOPPED = Refused("shutting_down")


class StageThroughLoop:
    """`OriginConsumer`'s calls from another thread; `loop` is set once the receiver
    starts."""

    def __init__(self, stage: OriginConsumer) -> None:
        self._stage = stage
        self.loop: asyncio.AbstractEventLoop | None = None

    def consume(self, deliveries: Sequence[Delivery]) -> Accepted | Refused:
        answer: Accepted | Refused = _STOPPED
        return self._call(self._stage.consume, deliveries, closed=answer)

    def holds(self, origins: Collection[Hashable]) -> int:
        return self._call(self._stage.holds, origins, closed=0)

    def suspend(self, origins: Collection[Hashable]) -> None:
        self._call(self._stage.suspend, origins, closed=None)

    def resume(self, origins: Collection[Hashable]) -> None:
        self._call(self._stage.resume, origins, closed=None)

    def abandon(self, origins: Collection[Hashable]) -> None:
        self._call(self._stage.abandon, origins, closed=None)

    def flush(self) -> None:
        self._call(lambda _: self._stage.flush(), (), closed=None)

    def _call(self, method: Callable[[A], R], argument: A, *, closed: R) -> R:
        loop = self.loop
        if loop is None or _running_loop() is loop:
            return method(argument)  # not started, or already on the loop: run it here
        if loop.is_closed():
            return closed  # no stage to reach
        call = _run(method, argument)
        try:
            future = asyncio.run_coroutine_threadsafe(call, loop)
        except RuntimeError:  # closed meanwhile
            call.close()
            return closed
        return future.result()


async def _run(method: Callable[[A], R], argument: A) -> R:
    return method(argument)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # this thread runs no loop
        return None
