"""Waiting on conditions, not sleeping: the one polling helper of the test suite.

A test that needs something to have happened asks for the condition and a deadline; the
deadline is generous (it only bounds a failing test) and the poll interval short, so a
passing test takes as long as the system does, on a fast machine or a loaded one.
"""

from __future__ import annotations

import asyncio
import os
import time
import urllib.error
from collections.abc import Callable
from typing import TypeVar

import pytest

POLL_S = 0.02
# How long a server that has not exited is given to answer, and a pipeline to finish what
# it was given: on a machine loaded by other work a start takes minutes. Only a failing
# test waits this long (a server that exits fails at once).
SERVER_START_S = 300.0
CONDITION_S = 120.0
# The shortest deadline any wait gets, whatever the test asks: a deadline a fast machine
# meets in a second may pass on a loaded one before the condition does.
MIN_DEADLINE_S = 60.0
# A deadline stretches with the machine's load (runnable processes per core, over one), up
# to this many times: beside four busy processes on two cores, the system under test gets a
# third of the CPU it gets alone, and a fixed deadline sized on a quiet machine passes first.
MAX_STRETCH = 4.0
T = TypeVar("T")


def load_stretch() -> float:
    """How many times longer work takes now than on a quiet machine, as the one-minute load
    average over the cores tells it (1 when the machine is not overloaded)."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return min(MAX_STRETCH, max(1.0, load / (os.cpu_count() or 1)))


class Deadline:
    """A test's deadline that stretches while the machine is loaded: checked against
    `timeout_s` times the largest stretch seen while waiting, so a condition that a loaded
    machine reaches late still passes and a failing test still ends."""

    def __init__(
        self,
        timeout_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        stretch: Callable[[], float] = load_stretch,
    ) -> None:
        self.timeout_s = max(timeout_s, MIN_DEADLINE_S)
        self._clock = clock
        self._load = stretch
        self._start = clock()
        self._stretch = 1.0

    def passed(self) -> bool:
        elapsed = self._clock() - self._start
        if elapsed < self.timeout_s:
            return False
        self._stretch = max(self._stretch, min(MAX_STRETCH, self._load()))
        return elapsed >= self.timeout_s * self._stretch

    def describe(self) -> str:
        waited = self._clock() - self._start
        return (
            f"{waited:.0f}s (deadline {self.timeout_s:g}s, stretched x{self._stretch:.1f} by load)"
        )


def wait_until(
    condition: Callable[[], T],
    timeout_s: float,
    what: str,
    *,
    interval_s: float = POLL_S,
    errors: tuple[type[BaseException], ...] = (),
    context: Callable[[], str] | None = None,
) -> T:
    """Poll `condition` until it returns something true, and return that; fail the test
    naming `what` (and `context()`, e.g. a server log) at the deadline. Exceptions of the
    types in `errors` count as "not yet" (a server still starting). The deadline is at
    least MIN_DEADLINE_S, stretched by the machine's load (`Deadline`)."""
    deadline = Deadline(timeout_s)
    last: object = None
    while True:
        try:
            value = condition()
            if value:
                return value
            last = value
        except errors as exc:
            if isinstance(exc, urllib.error.HTTPError):
                # It holds the open response: closed here, not by the GC (whose
                # ResourceWarning would fail whichever test is running then).
                exc.close()
            last = exc
        if deadline.passed():
            detail = f"\n{context()}" if context is not None else ""
            pytest.fail(
                f"timed out after {deadline.describe()} waiting for {what}; last: {last!r}{detail}"
            )
        time.sleep(interval_s)


async def wait_until_async(
    condition: Callable[[], object],
    timeout_s: float,
    what: str,
    *,
    interval_s: float = POLL_S,
    context: Callable[[], str] | None = None,
) -> None:
    """`wait_until` for coroutines: the event loop keeps running while it waits."""
    deadline = Deadline(timeout_s)
    while not condition():
        if deadline.passed():
            detail = f"\n{context()}" if context is not None else ""
            pytest.fail(f"timed out after {deadline.describe()} waiting for {what}{detail}")
        await asyncio.sleep(interval_s)
