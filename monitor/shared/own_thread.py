"""`in_own_thread`: CPU work of this process (`pipeline.processes: 0`) in a thread of its
own, never in the event loop's default executor. A call the caller gave up on (its
deadline passed: a hang) keeps only its own thread: the default executor's threads, which
`/metrics`, the results file and shutdown use, stay free, and the thread, a daemon, never
holds the process's exit. Starting a thread per call costs a fraction of a millisecond,
against a batch's extraction and scoring."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

R = TypeVar("R")


async def in_own_thread(function: Callable[[], R], name: str) -> R:
    """`function()` in a new daemon thread named `name`; cancelled, the caller stops
    waiting and the thread runs on alone."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[R] = loop.create_future()

    def settle(value: R | None, error: BaseException | None) -> None:
        if answer.done():
            return
        if error is None:
            answer.set_result(value)  # type: ignore[arg-type]
        else:
            answer.set_exception(error)

    def call() -> None:
        try:
            value, error = function(), None
        except BaseException as exc:  # handed to the caller, as `to_thread` does
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=call, name=name, daemon=True).start()
    return await answer
