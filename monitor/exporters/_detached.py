"""Blocking calls an exporter cannot interrupt (an OpenTelemetry exporter's `export` and
`shutdown`, which wait on their collector), run so that they never hold the process past
its shutdown deadline.

`asyncio.to_thread` runs a call in the loop's default executor, whose threads
`asyncio.run` joins when it returns, and `concurrent.futures` joins every executor's
threads again at interpreter exit: a call blocked on a collector that never answers would
keep the process alive until the call gives up. `detached` runs the call in a daemon
thread of its own, which nothing joins: cancelling the wait abandons the call, and the
process exits whatever the call is doing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def detached(call: Callable[[], T], name: str) -> T:
    """`call()` in a daemon thread named `name`, awaited; cancelling the await leaves the
    thread to finish on its own (its result is then discarded)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # the await was cancelled
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]  # None only with an error

    def run() -> None:
        try:
            outcome: tuple[T | None, BaseException | None] = (call(), None)
        except BaseException as exc:  # handed to the awaiting task
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more

    threading.Thread(target=run, name=name, daemon=True).start()
    return await future
