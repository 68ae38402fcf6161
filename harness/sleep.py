"""An injected `sleep` for code that backs off: it records each wait and returns at once,
so retry tests check the waits (`monitor/shared/retry.py`) without spending them."""

from __future__ import annotations

import asyncio


class RecordedSleep(list[float]):
    """Pass as `sleep=`; the list holds every wait asked for, in order."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)
        await asyncio.sleep(0)
