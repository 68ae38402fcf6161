"""A worker lost on a task that pebble never saw it take is answered when its replacement
reports (`ProcessPool._ready`), and its death counted there. Pebble's own answer
to that task may come later, when a second death breaks its pool (`BrokenProcessPool`): the
pool reads the notices waiting on its pipe as it takes that answer, and the replacement's
report among them answers the task first. The death is then counted once, and no
replacement is expected for it beyond the one that reported."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures.process import BrokenProcessPool

import pytest

from harness.children import forget, spawn_async
from monitor.pool import ProcessPool, WorkerLost
from monitor.pool._pool import Ready, _InFlight
from monitor.telemetry import create_telemetry


async def test_a_broken_pools_answer_read_with_the_replacements_report_counts_the_death_once() -> (
    None
):
    telemetry = create_telemetry()
    pool = ProcessPool(1, 60.0, telemetry)
    ended = await spawn_async("true")
    await ended.wait()  # reaped: the pid of a worker that died
    forget(ended)
    try:
        answer: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        pool._in_flight[7] = _InFlight(answer, worker=ended.pid)
        # The replacement reported on the pipe; the loop has not read it yet.
        pool._notices[1].send(Ready(os.getpid(), ""))
        pool._settle(answer, 7, 60.0, None, BrokenProcessPool("its pool broke"))
        with pytest.raises(WorkerLost, match="died"):
            answer.result()
        died = telemetry.registry.get_sample_value(
            "rag_monitor_worker_restarts_total", {"reason": "died"}
        )
        assert died == 1
        assert pool._expected == 0, "no second replacement is waited for"
        assert pool._answered == set(), "no answer is waited for from pebble any more"
    finally:
        await pool.shutdown(0.0)
