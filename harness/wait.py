"""Waiting on conditions, not sleeping: the one polling helper of the test suite.

A test that needs something to have happened asks for the condition and a deadline; the
deadline is generous (it only bounds a failing test) and the poll interval short, so a
passing test takes as long as the system does, on a fast machine or a loaded one.
"""

from __future__ import annotations

import asyncio
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
T = TypeVar("T")


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
    least MIN_DEADLINE_S."""
    timeout_s = max(timeout_s, MIN_DEADLINE_S)
    deadline = time.monotonic() + timeout_s
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
        if time.monotonic() >= deadline:
            detail = f"\n{context()}" if context is not None else ""
            pytest.fail(
                f"timed out after {timeout_s:g}s waiting for {what}; last: {last!r}{detail}"
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
    timeout_s = max(timeout_s, MIN_DEADLINE_S)
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            detail = f"\n{context()}" if context is not None else ""
            pytest.fail(f"timed out after {timeout_s:g}s waiting for {what}{detail}")
        await asyncio.sleep(interval_s)
