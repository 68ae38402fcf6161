"""A call repeated on the event loop while a component runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


class Ticker:
    """Awaits `tick()` every `interval_s`, from `start` until `stop`."""

    def __init__(self, interval_s: float, tick: Callable[[], Awaitable[None]]) -> None:
        self._interval = interval_s
        self._tick = tick
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self._tick()
            await asyncio.sleep(self._interval)
