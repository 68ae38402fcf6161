"""The pool the stages submit tasks to, on the event loop, over pebble's process pool.

pebble runs each task in a worker process, kills a worker that is past its task's
timeout, answers the task a dead worker was on with `ProcessExpired` and starts a new
worker in its place. This adapter adds what the stages rely on: a bound on the tasks in
flight (pushback), `WorkerLost` and `TaskFailed` for them to decide on, the workers'
self-metrics and log lines, a start that waits for the workers' set-up, and a shutdown
that lets the tasks in flight finish until its deadline.

One case pebble does not survive: a worker that dies while no task runs anywhere (the
set-up of a worker that cannot start looks the same to it) breaks the whole pebble pool.
No task was running, so none is lost: the adapter replaces the pebble pool and sends the
tasks that were waiting to the new one.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import Connection
from typing import TypeVar, cast

import pebble

from monitor.pool._processes import Watch, WorkerContext
from monitor.pool._worker import PICKLE, Initializer, run_task, set_up
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

P = TypeVar("P")
R = TypeVar("R")

# Tasks in flight per worker: the one it runs and the one waiting behind it, so that it
# does not idle while the parent pickles the next task and unpickles the last answer.
DEPTH = 2
# Starting a worker imports its task modules and runs the initializers (models load).
_STARTUP_TIMEOUT_S = 120.0
# How long after a worker died the pebble pool may take to say it is broken (it looks
# at its workers every 0.1 s).
_BREAK_WAIT_S = 1.0
REASONS = ("died", "hung")


class WorkerLost(Exception):
    """The worker running the task was lost (`reason`: died, hung, or stopped when the
    pool shut down: `stopping`) before it answered. Whether to send the task again is
    the submitter's call: the task may be what took the worker down."""

    def __init__(self, error: str, *, stopping: bool) -> None:
        super().__init__(error)
        self.error = error
        self.stopping = stopping


class TaskFailed(Exception):
    """The task function raised in the worker: "ExceptionType: message"."""


class _SendAgain(Exception):
    """The task never started: its pebble pool broke before a worker took it."""


class ProcessPool:
    """`processes` worker processes, `DEPTH` tasks in flight per worker.

    Each worker imports the `preload` modules and runs `initializers` once, then the
    tasks it is given: `submit(function, payload)` with a module-level function, answered
    with what it returns. With every slot taken, `submit` waits: a caller that keeps slots
    taken pushes back on its own intake.

    A worker that dies, or does not answer a task within its timeout (`timeout_s`, or the
    task's own; counted from when the worker took the task), is killed and replaced,
    counted in `worker_restarts_total{reason}`; the submitter of the task it was on gets
    `WorkerLost`, and tasks no worker had taken yet go to the others. With several
    workers, the fork server imports the `preload` modules once, so that what they load
    at import is shared by every worker's pages (`_processes.py`).
    """

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
        self._size = processes
        self._timeout = timeout_s
        self._initializers = list(initializers)
        self._preload = list(preload)
        self._label = label
        self._pebble: pebble.ProcessPool | None = None
        self._context: WorkerContext | None = None
        self._watch = Watch(self._running_changed, self._died)
        self._loop: asyncio.AbstractEventLoop | None = None
        # The workers' set-up notices: one pipe, which every worker writes to once.
        self._ready_pipe: tuple[Connection, Connection] | None = None
        self._ready = 0  # workers that finished their set-up
        self._ready_changed = asyncio.Event()
        self._set_up_failed = ""
        self._in_flight = 0
        self._room = asyncio.Event()  # a slot freed
        self._answers: set[asyncio.Future[bytes]] = set()
        self._renewing: asyncio.Task[None] | None = None
        self._checks: set[asyncio.Task[None]] = set()
        self._started = self._stopped = self._stopping = False
        self._running = telemetry.gauge("worker_processes", "Evaluation worker processes running.")
        self._busy = telemetry.gauge(
            "worker_processes_busy",
            "Evaluation worker processes working on a batch (scoring or extracting).",
        )
        self._restarts = telemetry.counter(
            "worker_restarts",
            "Evaluation worker processes replaced, by reason (died, hung).",
            ("reason",),
        )
        for reason in REASONS:
            self._restarts.labels(reason)

    @property
    def size(self) -> int:
        return self._size

    @property
    def slots(self) -> int:
        """Tasks the pool takes at once (`DEPTH` per worker)."""
        return self._size * DEPTH

    @property
    def in_flight(self) -> int:
        """Tasks submitted and not answered yet."""
        return self._in_flight

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers."""
        return self._watch.pids

    async def start(self) -> None:
        """Start the workers and wait until each has run its initializers; raises (with
        every worker stopped) if one cannot. Idempotent."""
        if self._started:
            return
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._context = WorkerContext(self._size, self._preload, self._watch)
        self._ready_pipe = self._context.Pipe(duplex=False)
        reader = self._ready_pipe[0]
        self._loop.add_reader(reader.fileno(), self._read_ready, reader)
        problem = ""
        try:
            await self._open()
            async with asyncio.timeout(_STARTUP_TIMEOUT_S):
                while self._ready < self._size and not self._set_up_failed:
                    self._ready_changed.clear()
                    await self._ready_changed.wait()
            if self._set_up_failed:
                problem = f"failed to initialize: {self._set_up_failed}"
        except TimeoutError:
            problem = f"did not start within {_STARTUP_TIMEOUT_S:g}s"
        if problem:
            await self.shutdown(0.0)
            raise RuntimeError(f"an {self._label} {problem}")
        log.info("%d %ses, %d tasks in flight each", self._size, self._label, DEPTH)

    async def submit(
        self,
        function: Callable[[P], R],
        payload: P,
        *,
        items: int = 1,
        timeout_s: float | None = None,
    ) -> R:
        """`function(payload)` in a worker, once a slot is free; `timeout_s` replaces the
        pool's for this task. Raises `WorkerLost` if the worker is lost while on it or
        the pool is shut down (`stopping`), `TaskFailed` if the function raised.
        Cancelled, the worker still runs the task; its answer is dropped."""
        task = pickle.dumps((function, payload), PICKLE)
        timeout = timeout_s or self._timeout
        await self._slot()
        self._in_flight += 1
        self._count_busy()
        try:
            for attempt in (1, 2):
                try:
                    answer = await self._run(task, timeout, items)
                except _SendAgain:
                    if attempt == 2:
                        raise WorkerLost(f"{self._label} died", stopping=self._stopping) from None
                    continue
                ok, value = cast(tuple[bool, object], pickle.loads(answer))
                if not ok:
                    raise TaskFailed(cast(str, value))
                return cast(R, value)
            raise AssertionError("unreachable")
        finally:
            self._in_flight -= 1
            self._count_busy()
            self._room.set()

    async def shutdown(self, deadline_s: float) -> None:
        """Stop every worker: wait up to `deadline_s` for the tasks in flight, then stop
        the workers (killed if they do not exit). Tasks still unanswered get
        `WorkerLost(stopping=True)`. Idempotent; safe without start."""
        if self._stopped:
            return
        self._stopped = self._stopping = True
        self._room.set()  # callers waiting for a slot give up
        if self._answers and deadline_s > 0:
            await asyncio.wait(list(self._answers), timeout=deadline_s)
        if self._renewing is not None:
            await asyncio.gather(self._renewing, return_exceptions=True)
        if self._pebble is not None:
            await asyncio.to_thread(_close, self._pebble)
        for answer in list(self._answers):
            if not answer.done():
                answer.set_exception(WorkerLost(f"{self._label} stopped", stopping=True))
        for task in list(self._checks):
            task.cancel()
        if self._loop is not None and self._ready_pipe is not None:
            reader, writer = self._ready_pipe
            self._loop.remove_reader(reader.fileno())
            reader.close()
            writer.close()
        self._running.set(0)
        self._count_busy()

    # -- tasks ------------------------------------------------------------------------------

    async def _slot(self) -> None:
        while True:
            if self._stopping:
                raise WorkerLost(f"the {self._label} pool is shut down", stopping=True)
            if self._in_flight < self.slots:
                return
            self._room.clear()
            await self._room.wait()

    async def _run(self, task: bytes, deadline_s: float, items: int) -> bytes:
        """The worker's answer to `task`; `WorkerLost` or `_SendAgain` if there is none."""
        if self._stopping:
            raise WorkerLost(f"{self._label} stopped", stopping=True)
        if self._renewing is not None:
            await self._renewing
        assert self._pebble is not None and self._loop is not None, "start() first"
        try:
            future = self._pebble.schedule(run_task, (task,), timeout=deadline_s)
        except RuntimeError:  # the pebble pool broke since
            self._renew()
            raise _SendAgain from None
        answer: asyncio.Future[bytes] = self._loop.create_future()
        self._answers.add(answer)
        future.add_done_callback(lambda done: self._settle_soon(answer, done))
        try:
            return await answer
        except pebble.ProcessExpired:
            raise WorkerLost(f"{self._label} died", stopping=self._stopping) from None
        except TimeoutError:
            self._restarts.labels("hung").inc()
            log.warning(
                "%s hung: no answer within %gs to a task of %d items; killed, starting a "
                "replacement",
                self._label,
                deadline_s,
                items,
            )
            raise WorkerLost(
                f"{self._label} hung (no answer within {deadline_s:g}s)", stopping=False
            ) from None
        except BrokenProcessPool:
            if self._stopping:
                raise WorkerLost(f"{self._label} stopped", stopping=True) from None
            self._renew()
            raise _SendAgain from None
        finally:
            self._answers.discard(answer)

    def _settle_soon(self, answer: asyncio.Future[bytes], done: Future[bytes]) -> None:
        """From the library's thread: settle `answer` on the loop."""
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(_settle, answer, done)
        except RuntimeError:  # the loop is closed: nobody waits for it any more
            pass

    # -- workers ----------------------------------------------------------------------------

    async def _open(self) -> None:
        """A new pebble pool, its workers started."""
        assert self._context is not None and self._ready_pipe is not None
        pool = pebble.ProcessPool(
            self._size,
            initializer=set_up,
            initargs=(self._preload, self._initializers, self._ready_pipe[1]),
            context=self._context,
        )
        # Reading `active` starts the pool: its threads, then its workers.
        await asyncio.to_thread(lambda: pool.active)
        self._pebble = pool

    def _renew(self) -> None:
        """Replace a broken pebble pool (once, however many tasks noticed)."""
        if self._renewing is None and not self._stopping:
            self._renewing = asyncio.get_running_loop().create_task(
                self._replace(), name="pool-renew"
            )

    async def _replace(self) -> None:
        broken = self._pebble
        try:
            if broken is not None:
                await asyncio.to_thread(_close, broken)
            if not self._stopping:
                log.warning("the %s pool broke; starting its workers again", self._label)
                await self._open()
        finally:
            self._renewing = None

    async def _check_broken(self) -> None:
        """After a worker died: replace the pebble pool if that broke it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _BREAK_WAIT_S
        while loop.time() < deadline and not self._stopping:
            pool = self._pebble
            if pool is not None and self._renewing is None and not pool.active:
                self._renew()
                return
            await asyncio.sleep(0.1)

    def _died(self, pid: int, exitcode: int | None) -> None:
        """From the library's thread: a worker exited without being told to."""
        if self._stopping:
            return
        self._restarts.labels("died").inc()
        log.warning(
            "%s %s died (exit code %s): the task it was on goes back to its submitter; "
            "starting a replacement",
            self._label,
            pid,
            exitcode,
        )
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._spawn_check)
            except RuntimeError:
                pass

    def _spawn_check(self) -> None:
        task = asyncio.get_running_loop().create_task(self._check_broken(), name="pool-check")
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    def _read_ready(self, reader: Connection) -> None:
        """A worker's set-up is done (the loop reads the notices as they come)."""
        try:
            pid, failed = cast(tuple[int, str], reader.recv())
        except (EOFError, OSError):
            return
        if failed:
            log.error("%s %s failed to initialize: %s", self._label, pid, failed)
            self._set_up_failed = self._set_up_failed or failed
        self._ready += 1
        self._ready_changed.set()

    def _running_changed(self, running: int) -> None:
        self._running.set(running)

    def _count_busy(self) -> None:
        self._busy.set(min(self._in_flight, len(self._watch.pids)))


def _settle(answer: asyncio.Future[bytes], done: Future[bytes]) -> None:
    if answer.done():
        return
    error = done.exception()
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(done.result())


def _close(pool: pebble.ProcessPool) -> None:
    """Stop a pebble pool's workers (killed if they do not exit) and its threads."""
    pool.stop()  # type: ignore[no-untyped-call]
    pool.join()
