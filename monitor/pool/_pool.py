"""`ProcessPool`: pebble's process pool, used as pebble documents it, on the event loop.

pebble kills a worker past its task's timeout (`TimeoutError`), answers the task a dead
worker was on with `ProcessExpired` and starts a replacement. This adds the slots in flight
(pushback), `WorkerLost` and `TaskFailed`, the self-metrics and log lines, a start that
waits for the workers' set-up, a shutdown with a deadline, and a new pebble pool when a
worker's death while no task ran broke it (no task was lost: those waiting go to the new one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pickle
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from multiprocessing.connection import Connection
from typing import TypeVar, cast

import pebble

from monitor.pool._processes import worker_context
from monitor.pool._worker import Initializer, Pickled, run_task, set_up
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)
P = TypeVar("P")
R = TypeVar("R")
DEPTH = 2  # tasks in flight per worker: it never idles waiting for the next
_STARTUP_TIMEOUT_S = 120.0  # imports and initializers (models load)
_WATCH_S = 0.2  # how often exits no task would tell are looked for


class WorkerLost(Exception):
    """The task's worker died, hung, or was stopped (`stopping`) before it answered."""

    def __init__(self, error: str, *, stopping: bool) -> None:
        super().__init__(error)
        self.error = error
        self.stopping = stopping


class TaskFailed(Exception):
    """The task function raised in the worker: "ExceptionType: message"."""


class ProcessPool:
    """`processes` workers, each set up by importing `preload` and running `initializers`,
    `DEPTH` tasks in flight per worker (`README.md`)."""

    def __init__(
        self,
        processes: int,
        timeout_s: float,
        telemetry: Telemetry,
        *,
        initializers: Sequence[Initializer] = (),
        preload: Sequence[str] = (),
        label: str = "evaluation worker process",
    ) -> None:
        self.size, self.slots = processes, processes * DEPTH
        self.in_flight = 0  # tasks submitted and not answered yet
        self._timeout, self._label = timeout_s, label
        self._set_up = (list(preload), list(initializers))
        self._context = worker_context(processes, preload)
        self._pebble: pebble.ProcessPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._notices: tuple[Connection, Connection] | None = None  # every worker's set-up
        self._reported: dict[int, str] = {}  # pid → why its set-up failed ("": it did not)
        self._reported_changed = asyncio.Event()
        self._hung_kills = 0  # hung workers killed, not yet seen gone: not deaths
        self._gone: set[int] = set()  # seen exited at the last look
        self._slots = asyncio.Semaphore(self.slots)
        self._renewing = asyncio.Lock()
        self._answers: set[asyncio.Future[object]] = set()
        self._watching: asyncio.Task[None] | None = None
        self._started = self._stopping = False
        running = telemetry.gauge("worker_processes", "Evaluation worker processes running.")
        running.set_function(lambda: len(self.pids))
        busy = "Evaluation worker processes working on a batch (scoring or extracting)."
        self._busy = telemetry.gauge("worker_processes_busy", busy)
        restarts = "Evaluation worker processes replaced, by reason (died, hung)."
        self._restarts = telemetry.counter("worker_restarts", restarts, ("reason",))
        for reason in ("died", "hung"):
            self._restarts.labels(reason)

    @property
    def pids(self) -> list[int]:
        return sorted(pid for pid in self._reported if _running(pid))

    async def start(self) -> None:
        """Start the workers and wait for their set-up; raises if one fails. Idempotent."""
        if self._started:
            return
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._notices = self._context.Pipe(duplex=False)
        self._loop.add_reader(self._notices[0].fileno(), self._read_notice, self._notices[0])
        await self._open()
        problem = ""
        try:
            async with asyncio.timeout(_STARTUP_TIMEOUT_S):
                while len(self._reported) < self.size and not any(self._reported.values()):
                    self._reported_changed.clear()
                    await self._reported_changed.wait()
        except TimeoutError:
            problem = f"did not start within {_STARTUP_TIMEOUT_S:g}s"
        failed = next((why for why in self._reported.values() if why), "")
        if failed or problem:
            await self.shutdown(0.0)
            raise RuntimeError(f"an {self._label} {problem or f'failed to initialize: {failed}'}")
        self._watching = self._loop.create_task(self._watch(), name="pool-watch")
        log.info("%d %ses, %d tasks in flight each", self.size, self._label, DEPTH)

    async def submit(
        self, function: Callable[[P], R], payload: P, *, items: int = 1, timeout_s: float = 0.0
    ) -> R:
        """`function(payload)` in a worker, once a slot is free. Raises `WorkerLost` or
        `TaskFailed`; cancelled, the worker still runs the task."""
        task = Pickled((function, payload))
        async with self._slots:
            self._count_busy(+1)
            try:
                ok, value = await self._answer(task, timeout_s or self._timeout, items)
            finally:
                self._count_busy(-1)
        if not ok:
            raise TaskFailed(cast(str, value))
        return cast(R, value)

    async def shutdown(self, deadline_s: float) -> None:
        """Wait up to `deadline_s` for the tasks in flight, then stop the workers; tasks
        unanswered get `WorkerLost(stopping=True)`. Idempotent; safe without start."""
        if self._stopping:
            return
        self._stopping = True
        if self._watching is not None:
            self._watching.cancel()
        if self._answers and deadline_s > 0:
            await asyncio.wait(list(self._answers), timeout=deadline_s)
        async with self._renewing:  # a renewal under way opens its pool first
            if self._pebble is not None:
                await asyncio.to_thread(_close, self._pebble)
        for answer in [answer for answer in self._answers if not answer.done()]:
            answer.set_exception(WorkerLost(f"{self._label} stopped", stopping=True))
        if self._loop is not None and self._notices is not None:
            self._loop.remove_reader(self._notices[0].fileno())
            for end in self._notices:
                end.close()
        self._reported.clear()

    async def _answer(self, task: Pickled, deadline_s: float, items: int) -> tuple[bool, object]:
        for _ in (1, 2):  # a task no worker took when a death broke the pool goes again, once
            pool, loop = self._pebble, self._loop
            if self._stopping or pool is None or loop is None:
                raise WorkerLost(f"the {self._label} pool is shut down", stopping=True)
            try:
                future = pool.schedule(run_task, (task,), timeout=deadline_s)
            except RuntimeError:  # broken since the watch last looked
                await self._renew(pool)
                continue
            answer: asyncio.Future[object] = loop.create_future()
            self._answers.add(answer)
            future.add_done_callback(partial(_settle_soon, loop, answer))
            try:
                return cast(tuple[bool, object], await answer)
            except pebble.ProcessExpired as expired:
                raise self._lost(
                    "died", f"exit code {expired.exitcode}", items, expired.pid
                ) from None
            except TimeoutError:
                raise self._lost("hung", f"no answer within {deadline_s:g}s", items) from None
            except BrokenProcessPool:
                if not self._stopping:
                    await self._renew(pool)
            finally:
                self._answers.discard(answer)
        raise WorkerLost(f"{self._label} died", stopping=self._stopping)

    def _lost(self, reason: str, detail: str, items: int, pid: int = 0) -> WorkerLost:
        if self._stopping:
            return WorkerLost(f"{self._label} stopped", stopping=True)
        # A death is counted once: here, unless the watch saw it first.
        if self._reported.pop(pid, None) is not None or not pid:
            self._restarts.labels(reason).inc()
        if not pid:
            self._hung_kills += 1
        error = f"{self._label} {reason}"
        log.warning("%s %s (%s) on a task of %d items; replaced", error, pid or "", detail, items)
        return WorkerLost(error if pid else f"{error} ({detail})", stopping=False)

    async def _open(self) -> None:
        """A new pebble pool, started (reading `active` starts it)."""
        assert self._notices is not None
        pool = pebble.ProcessPool(
            self.size,
            initializer=set_up,
            initargs=(*self._set_up, self._notices[1]),
            context=self._context,
        )
        await asyncio.to_thread(lambda: pool.active)
        self._pebble = pool

    async def _renew(self, broken: pebble.ProcessPool) -> None:
        """Replace a broken pebble pool, once however many tasks noticed."""
        async with self._renewing:
            if self._pebble is not broken or self._stopping or broken.active:
                return
            log.warning("an %s died while no task ran: starting the pool again", self._label)
            self._count_exits(at_once=True)
            self._reported.clear()  # the new pool's workers report themselves
            await asyncio.to_thread(_close, broken)
            if not self._stopping:
                await self._open()

    async def _watch(self) -> None:
        """Count deaths no task saw; renew the pebble pool if one broke it."""
        while True:
            await asyncio.sleep(_WATCH_S)
            self._count_exits()
            if self._pebble is not None and not self._pebble.active:
                await self._renew(self._pebble)

    def _count_exits(self, *, at_once: bool = False) -> None:
        """Forget exited workers; count deaths no task counted. An exit waits one look (unless
        `at_once`), so that the answer of the task a worker was on is read first."""
        gone = {pid for pid in self._reported if not _running(pid)}
        handled = gone if at_once else gone & self._gone
        for pid in handled:
            del self._reported[pid]
            if self._hung_kills:
                self._hung_kills -= 1
            else:
                self._restarts.labels("died").inc()
                log.warning("%s %s died; replaced", self._label, pid)
        self._gone = gone - handled

    def _read_notice(self, reader: Connection) -> None:
        with contextlib.suppress(EOFError, OSError):
            pid, failed = cast(tuple[int, str], reader.recv())
            if failed:
                log.error("%s %s failed to initialize: %s", self._label, pid, failed)
            self._reported[pid] = failed
            self._reported_changed.set()

    def _count_busy(self, change: int) -> None:
        self.in_flight += change
        self._busy.set(min(self.in_flight, self.size) if not self._stopping else 0)


def _settle_soon(
    loop: asyncio.AbstractEventLoop, answer: asyncio.Future[object], done: Future[bytes]
) -> None:
    """In pebble's thread: the answer unpickled, then settled on the loop."""
    error = done.exception()
    try:
        outcome: object = pickle.loads(done.result()) if error is None else None
    except Exception as exc:
        outcome, error = None, exc
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for it any more
        loop.call_soon_threadsafe(_settle, answer, outcome, error)


def _settle(answer: asyncio.Future[object], outcome: object, error: BaseException | None) -> None:
    if not answer.done():
        answer.set_result(outcome) if error is None else answer.set_exception(error)


def _close(pool: pebble.ProcessPool) -> None:
    pool.stop()  # type: ignore[no-untyped-call]
    pool.join()


def _running(pid: int) -> bool:
    """Whether process `pid` runs (an exited one its parent has not reaped does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False
