"""The pool the stages submit tasks to, on the event loop, over pebble's process pool,
used as pebble documents it.

pebble runs each task in a worker process, kills a worker that is past its task's
timeout (`TimeoutError`), answers the task a dead worker was on with `ProcessExpired`
and starts a new worker in its place. This adapter adds what the stages rely on: a bound
on the tasks in flight (pushback), `WorkerLost` and `TaskFailed` for them to decide on,
the workers' self-metrics and log lines, a start that waits for the workers' set-up, and
a shutdown that lets the tasks in flight finish until its deadline.

One case pebble does not survive: a worker that dies while no task runs anywhere breaks
its pool (`active` turns False; tasks waiting get `BrokenProcessPool`). No task was
running, so none is lost: the adapter opens a new pebble pool and sends the tasks that
were waiting to it.
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

from monitor.pool._processes import worker_context
from monitor.pool._worker import Initializer, Pickled, run_task, set_up
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

P = TypeVar("P")
R = TypeVar("R")

# Tasks in flight per worker: the one it runs and the one waiting behind it, so that it
# does not idle while the parent pickles the next task and unpickles the last answer.
DEPTH = 2
# Starting a worker imports its task modules and runs the initializers (models load).
_STARTUP_TIMEOUT_S = 120.0
# How often the pool is looked at for a break no task would notice (pebble looks at its
# workers every 0.1 s).
_WATCH_S = 0.2


class WorkerLost(Exception):
    """The worker running the task was lost (died, hung, or stopped when the pool shut
    down: `stopping`) before it answered. Whether to send the task again is the
    submitter's call: the task may be what took the worker down."""

    def __init__(self, error: str, *, stopping: bool) -> None:
        super().__init__(error)
        self.error = error
        self.stopping = stopping


class TaskFailed(Exception):
    """The task function raised in the worker: "ExceptionType: message"."""


class ProcessPool:
    """`processes` worker processes, `DEPTH` tasks in flight per worker.

    Each worker imports the `preload` modules and runs `initializers` once, then the
    tasks it is given: `submit(function, payload)` with a module-level function, answered
    with what it returns. With every slot taken, `submit` waits: a caller that keeps slots
    taken pushes back on its own intake.

    A worker that dies, or does not answer a task within its timeout (`timeout_s`, or the
    task's own; counted from when the worker took the task), is killed and replaced,
    counted in `worker_restarts_total{reason}`; the submitter of the task it was on gets
    `WorkerLost`, and tasks no worker had taken yet go to the others.
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
        self._set_up = (list(preload), list(initializers))
        self._label = label
        self._pebble: pebble.ProcessPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._context = worker_context(processes, preload)
        # The workers' set-up notices: one pipe, which every worker writes to once.
        self._notices: tuple[Connection, Connection] | None = None
        self._reported: dict[int, str] = {}  # pid → why its set-up failed ("": it did not)
        self._reported_changed = asyncio.Event()
        # Exits already counted (the task the worker was on was answered) or to be counted
        # as hung (pebble killed it): the others are deaths no task saw.
        self._exits_counted: set[int] = set()
        self._hung_kills = 0
        self._gone: set[int] = set()  # seen exited at the last look
        self._slots = asyncio.Semaphore(processes * DEPTH)
        self._in_flight = 0
        self._renewing = asyncio.Lock()
        self._answers: set[asyncio.Future[object]] = set()
        self._watching: asyncio.Task[None] | None = None
        self._started = self._stopping = False
        self._running = telemetry.gauge("worker_processes", "Evaluation worker processes running.")
        self._running.set_function(lambda: len(self.pids))
        self._busy = telemetry.gauge(
            "worker_processes_busy",
            "Evaluation worker processes working on a batch (scoring or extracting).",
        )
        self._restarts = telemetry.counter(
            "worker_restarts",
            "Evaluation worker processes replaced, by reason (died, hung).",
            ("reason",),
        )
        for reason in ("died", "hung"):
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
        """Process ids of the running workers (those that reported their set-up)."""
        return sorted(pid for pid in self._reported if _running(pid))

    async def start(self) -> None:
        """Start the workers and wait until each has run its initializers; raises (with
        every worker stopped) if one cannot. Idempotent."""
        if self._started:
            return
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._notices = self._context.Pipe(duplex=False)
        reader = self._notices[0]
        self._loop.add_reader(reader.fileno(), self._read_notice, reader)
        await self._open()
        problem = ""
        try:
            async with asyncio.timeout(_STARTUP_TIMEOUT_S):
                while len(self._reported) < self._size and not any(self._reported.values()):
                    self._reported_changed.clear()
                    await self._reported_changed.wait()
        except TimeoutError:
            problem = f"did not start within {_STARTUP_TIMEOUT_S:g}s"
        failed = next((why for why in self._reported.values() if why), "")
        if failed or problem:
            await self.shutdown(0.0)
            raise RuntimeError(f"an {self._label} {problem or f'failed to initialize: {failed}'}")
        self._watching = self._loop.create_task(self._watch(), name="pool-watch")
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
        task = Pickled((function, payload))
        async with self._slots:
            self._in_flight += 1
            self._busy.set(min(self._in_flight, self._size))
            try:
                for attempt in (1, 2):
                    try:
                        ok, value = await self._run(task, timeout_s or self._timeout, items)
                    except BrokenProcessPool:  # the task never started: send it again
                        if attempt == 1:
                            continue
                        raise WorkerLost(f"{self._label} died", stopping=self._stopping) from None
                    if not ok:
                        raise TaskFailed(cast(str, value))
                    return cast(R, value)
                raise AssertionError("unreachable")
            finally:
                self._in_flight -= 1
                self._busy.set(min(self._in_flight, self._size))

    async def shutdown(self, deadline_s: float) -> None:
        """Stop every worker: wait up to `deadline_s` for the tasks in flight, then stop
        the workers (killed if they do not exit). Tasks still unanswered get
        `WorkerLost(stopping=True)`. Idempotent; safe without start."""
        if self._stopping:
            return
        self._stopping = True
        if self._watching is not None:
            self._watching.cancel()
        if self._answers and deadline_s > 0:
            await asyncio.wait(list(self._answers), timeout=deadline_s)
        if self._pebble is not None:
            await asyncio.to_thread(_close, self._pebble)
        for answer in list(self._answers):
            if not answer.done():
                answer.set_exception(WorkerLost(f"{self._label} stopped", stopping=True))
        if self._loop is not None and self._notices is not None:
            self._loop.remove_reader(self._notices[0].fileno())
            for end in self._notices:
                end.close()
        self._reported.clear()
        self._busy.set(0)

    async def _run(self, task: Pickled, deadline_s: float, items: int) -> tuple[bool, object]:
        """The worker's answer to `task`; `WorkerLost`, or `BrokenProcessPool` for a task
        no worker took."""
        if self._stopping:
            raise WorkerLost(f"the {self._label} pool is shut down", stopping=True)
        pool = self._pebble
        assert pool is not None and self._loop is not None, "start() first"
        try:
            future = pool.schedule(run_task, (task,), timeout=deadline_s)
        except RuntimeError:  # the pebble pool broke since the watch last looked
            await self._renew(pool)
            raise BrokenProcessPool from None
        answer: asyncio.Future[object] = self._loop.create_future()
        self._answers.add(answer)
        future.add_done_callback(lambda done: _settle_soon(self._loop, answer, done))
        try:
            return cast(tuple[bool, object], await answer)
        except pebble.ProcessExpired as expired:
            if self._stopping:
                raise WorkerLost(f"{self._label} stopped", stopping=True) from None
            self._restarts.labels("died").inc()
            self._exits_counted.add(expired.pid)
            log.warning(
                "%s %s died (exit code %s) on a task of %d items; starting a replacement",
                self._label,
                expired.pid,
                expired.exitcode,
                items,
            )
            raise WorkerLost(f"{self._label} died", stopping=False) from None
        except TimeoutError:
            self._restarts.labels("hung").inc()
            self._hung_kills += 1
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
            await self._renew(pool)
            raise
        finally:
            self._answers.discard(answer)

    async def _open(self) -> None:
        """A new pebble pool, its workers started (reading `active` starts them)."""
        pool = pebble.ProcessPool(
            self._size,
            initializer=set_up,
            initargs=(*self._set_up, self._notices[1] if self._notices else None),
            context=self._context,
        )
        await asyncio.to_thread(lambda: pool.active)
        self._pebble = pool

    async def _renew(self, broken: pebble.ProcessPool) -> None:
        """Replace a broken pebble pool, once however many tasks noticed."""
        async with self._renewing:
            if self._pebble is not broken or self._stopping or broken.active:
                return
            log.warning("a %s died while no task ran: starting the pool again", self._label)
            self._count_exits(at_once=True)
            self._reported.clear()  # the new pool's workers report themselves
            await asyncio.to_thread(_close, broken)
            if not self._stopping:
                await self._open()

    async def _watch(self) -> None:
        """Count the workers that died with no task to tell, and renew the pebble pool
        when that broke it."""
        while True:
            await asyncio.sleep(_WATCH_S)
            self._count_exits()
            if self._pebble is not None and not self._pebble.active:
                await self._renew(self._pebble)

    def _count_exits(self, *, at_once: bool = False) -> None:
        """Forget the workers that exited; count those that died with no task to tell.
        A worker seen gone waits one look (unless `at_once`), by when the task it was on,
        if any, has been answered."""
        gone = {pid for pid in self._reported if not _running(pid)}
        handled = gone if at_once else gone & self._gone
        for pid in handled:
            del self._reported[pid]
            if pid in self._exits_counted:
                self._exits_counted.discard(pid)
            elif self._hung_kills:
                self._hung_kills -= 1
            else:
                self._restarts.labels("died").inc()
                log.warning("%s %s died while idle; starting a replacement", self._label, pid)
        self._gone = gone - handled

    def _read_notice(self, reader: Connection) -> None:
        """A worker's set-up is done (the loop reads the notices as they come)."""
        try:
            pid, failed = cast(tuple[int, str], reader.recv())
        except (EOFError, OSError):
            return
        if failed:
            log.error("%s %s failed to initialize: %s", self._label, pid, failed)
        self._reported[pid] = failed
        self._reported_changed.set()


def _settle_soon(
    loop: asyncio.AbstractEventLoop | None, answer: asyncio.Future[object], done: Future[bytes]
) -> None:
    """In pebble's result thread: the answer unpickled, then settled on the loop."""
    error = done.exception()
    try:
        outcome: object = pickle.loads(done.result()) if error is None else None
    except Exception as exc:
        outcome, error = None, exc
    assert loop is not None
    try:
        loop.call_soon_threadsafe(_settle, answer, outcome, error)
    except RuntimeError:  # the loop is closed: nobody waits for it any more
        pass


def _settle(answer: asyncio.Future[object], outcome: object, error: BaseException | None) -> None:
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(outcome)


def _close(pool: pebble.ProcessPool) -> None:
    """Stop a pebble pool's workers (killed if they do not exit) and its threads."""
    pool.stop()  # type: ignore[no-untyped-call]
    pool.join()


def _running(pid: int) -> bool:
    """Whether process `pid` runs (a dead worker its parent has not reaped yet does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")
