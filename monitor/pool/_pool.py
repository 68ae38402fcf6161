"""The parent's side of the pool: a fixed number of worker processes, tasks dispatched to
the least busy one, dead or hung workers replaced.

The event loop drives the parent's end of every worker's socket itself: it writes a
pickled task without blocking and reads answers as they arrive, so a task costs the
calling process no thread hand-off.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

from monitor.pool._launch import Direct, Forked, ForkServer, Launcher, WorkerProcess
from monitor.pool._worker import HEADER, Initializer, frame
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

P = TypeVar("P")
R = TypeVar("R")

# Tasks in flight per worker: the one it runs and the one waiting behind it, so that it
# does not idle while the parent pickles the next task and unpickles the last answer.
DEPTH = 2
# Starting a worker imports its task modules and runs the initializers (models load).
_STARTUP_TIMEOUT_S = 120.0
_RESPAWN_DELAY_S = 5.0
# How long a worker asked to stop, then a killed one, is waited for.
_STOP_WAIT_S = 1.0
_KILLED_WAIT_S = 10.0
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


@dataclass(frozen=True, slots=True)
class _Lost:
    error: str
    stopping: bool


# What a job's future gets: the worker's (ok, value); _Lost; None: send it again.
_Outcome = tuple[bool, object] | _Lost | None


@dataclass(eq=False)
class _Job:
    payload: bytes  # the frame, pickled once: sent again as is if its worker never starts it
    items: int  # what the task holds (records, traces), for the log of a lost worker
    timeout_s: float  # for the worker's answer, once it could start the task
    answer: asyncio.Future[_Outcome]

    def settle(self, outcome: _Outcome) -> None:
        if not self.answer.done():  # a cancelled caller dropped it
            self.answer.set_result(outcome)


@dataclass(eq=False)
class _Worker:
    process: WorkerProcess
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    jobs: deque[_Job] = field(default_factory=deque)  # sent, in the order answered
    deadline: asyncio.TimerHandle | None = None  # for the answer to jobs[0]
    lost: bool = False
    reading: asyncio.Task[None] | None = None


async def _read_frame(reader: asyncio.StreamReader) -> object:
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    return pickle.loads(await reader.readexactly(size))


class ProcessPool:
    """`processes` worker processes, `DEPTH` tasks in flight per worker.

    Each worker is a process started from a fresh interpreter, or forked from one (see
    `monitor.pool._launch`), that runs `initializers` once, then the tasks it is sent:
    `submit(function, payload)` with a module-level function, answered with what it
    returns. With every slot taken, `submit` waits: a caller that keeps slots taken
    pushes back on its own intake.

    A worker that dies (its socket closes) or does not answer a task within its timeout
    (`timeout_s`, or the task's own; counted from when it could start that task) is
    killed and replaced, counted in
    `worker_restarts_total{reason}`; the submitter of the task it was on gets
    `WorkerLost`, and the tasks queued behind it, which it had not started, go to other
    workers. `preload` names modules each worker imports before its initializers run;
    with several workers, a fork server imports them once and forks the workers, so that
    what they load at import (read-only tables) is shared by every worker's pages.
    `forked` (from `fork_here(processes)`), forked from the calling process, is the lone
    worker or the fork server of several: they then also share the caller's pages.
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
        forked: Forked | None = None,
    ) -> None:
        self._size = processes
        self._timeout = timeout_s
        self._initializers = list(initializers)
        self._preload = list(preload)
        self._label = label
        self._launcher: Launcher | None = None
        if forked is not None and forked.workers != processes:
            forked.close()  # forked for another pool size
            forked = None
        self._forked = forked
        self._workers: set[_Worker] = set()
        self._room: asyncio.Event | None = None  # a slot freed or a worker added
        self._stopping = False
        self._started = False
        self._stopped = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # replacements being started
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
        self._server_exits = telemetry.counter(
            "worker_fork_server_exits",
            "Times the worker processes' fork server exited on its own (the next worker "
            "to start starts a new one).",
        )

    @property
    def size(self) -> int:
        return self._size

    @property
    def slots(self) -> int:
        """Tasks the pool takes at once (`DEPTH` per worker)."""
        return self._size * DEPTH

    @property
    def in_flight(self) -> int:
        """Tasks sent to the workers and not answered yet."""
        return sum(len(w.jobs) for w in self._workers)

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers."""
        return [w.process.pid for w in self._workers]

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the pool runs on (for submitters in other threads)."""
        assert self._loop is not None, "start() first"
        return self._loop

    async def start(self) -> None:
        """Start the workers and wait until each has run its initializers; raises (with
        every worker stopped) if one cannot. Idempotent."""
        if self._started:
            return
        self._started = True
        self._launcher = (
            Direct(self._forked)
            if self._size == 1
            else ForkServer(self._preload, self._forked, on_exit=self._server_exits.inc)
        )
        self._loop = asyncio.get_running_loop()
        self._room = asyncio.Event()
        started = await asyncio.gather(
            *(self._spawn() for _ in range(self._size)), return_exceptions=True
        )
        workers = [w for w in started if isinstance(w, _Worker)]
        failed = [e for e in started if isinstance(e, BaseException)]
        for worker in workers:
            self._add(worker)
        if failed:
            await self.shutdown(0.0)
            raise failed[0]
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
        pool's for this task. Raises `WorkerLost` if the worker is
        lost while on it or the pool is shut down (`stopping`), `TaskFailed` if the
        function raised. Cancelled, the worker still runs the task; its answer is
        dropped."""
        message = frame((function, payload))
        loop = asyncio.get_running_loop()
        while True:
            worker = await self._free_worker()
            job = _Job(message, items, timeout_s or self._timeout, loop.create_future())
            self._send(worker, job)
            outcome = await job.answer
            if outcome is None:
                continue  # its worker was lost before it started the task
            if isinstance(outcome, _Lost):
                raise WorkerLost(outcome.error, stopping=outcome.stopping)
            ok, value = outcome
            if not ok:
                raise TaskFailed(cast(str, value))
            return cast(R, value)

    async def shutdown(self, deadline_s: float) -> None:
        """Stop every worker: ask (after the tasks it has), wait up to `deadline_s`, then
        kill. Tasks still unanswered get `WorkerLost`. Idempotent; safe without start."""
        if self._stopped:
            return
        self._stopped = self._stopping = True
        if self._room is not None:
            self._room.set()  # callers waiting for a slot give up
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        workers = list(self._workers)
        for worker in workers:
            worker.writer.write(frame(None))
        readers = [w.reading for w in workers if w.reading is not None]
        if readers and deadline_s > 0:
            await asyncio.wait(readers, timeout=deadline_s)
        for worker in workers:
            self._lose(worker, "stopped")
        await asyncio.gather(*(_reap(w.process) for w in workers))
        await asyncio.gather(*readers, return_exceptions=True)
        if self._launcher is not None:
            await self._launcher.close()
        elif self._forked is not None:
            self._forked.close()

    # -- dispatch (event loop) ---------------------------------------------------------------

    async def _free_worker(self) -> _Worker:
        """The worker with the fewest tasks in flight, once one has fewer than DEPTH."""
        assert self._room is not None, "start() first"
        while True:
            if self._stopping:
                raise WorkerLost(f"the {self._label} pool is shut down", stopping=True)
            free = [w for w in self._workers if len(w.jobs) < DEPTH]
            if free:
                return min(free, key=lambda w: len(w.jobs))
            self._room.clear()
            await self._room.wait()

    def _send(self, worker: _Worker, job: _Job) -> None:
        worker.jobs.append(job)
        worker.writer.write(job.payload)  # buffered by the transport if the socket is full
        if len(worker.jobs) == 1:
            self._arm(worker)
        self._count_busy()

    def _arm(self, worker: _Worker) -> None:
        """Start the deadline of the task the worker is now on."""
        loop = asyncio.get_running_loop()
        worker.deadline = loop.call_later(worker.jobs[0].timeout_s, self._lose, worker, "hung")

    async def _read(self, worker: _Worker) -> None:
        """Answers of one worker, in the order its tasks were sent."""
        try:
            while True:
                answer = await _read_frame(worker.reader)
                if worker.lost:
                    return
                if not worker.jobs:
                    log.error("%s %s answered no task", self._label, worker.process.pid)
                    self._lose(worker, "died")
                    return
                self._answered(worker, cast(tuple[bool, object], answer))
        except (asyncio.IncompleteReadError, ConnectionError):
            self._lose(worker, "died")
        except Exception:
            log.exception("unreadable answer from %s %s", self._label, worker.process.pid)
            self._lose(worker, "died")

    def _answered(self, worker: _Worker, answer: tuple[bool, object]) -> None:
        job = worker.jobs.popleft()
        if worker.deadline is not None:
            worker.deadline.cancel()
            worker.deadline = None
        if worker.jobs:
            self._arm(worker)
        job.settle(answer)
        self._count_busy()
        assert self._room is not None
        self._room.set()

    # -- worker lifecycle --------------------------------------------------------------------

    async def _spawn(self) -> _Worker:
        assert self._launcher is not None, "start() first"
        # What the worker reads first: the modules to import, then its initializers.
        setup = frame(self._preload) + frame(self._initializers)
        process, parent = await self._launcher.launch()
        reader, writer = await asyncio.open_connection(sock=parent)
        writer.write(setup)
        problem = ""
        try:
            async with asyncio.timeout(_STARTUP_TIMEOUT_S):
                status, detail = cast(tuple[str, str], await _read_frame(reader))
            if status != "ready":
                problem = f"failed to initialize: {detail}"
        except TimeoutError:
            problem = f"did not start within {_STARTUP_TIMEOUT_S:g}s"
        except (asyncio.IncompleteReadError, ConnectionError):
            problem = "exited before it was ready"
        except BaseException:  # cancelled: the pool shuts down while this worker starts
            writer.close()
            process.kill()
            raise
        if problem:
            writer.close()
            await _reap(process)
            raise RuntimeError(f"an {self._label} {problem} (exit code {process.exitcode})")
        worker = _Worker(process, reader, writer)
        worker.reading = asyncio.create_task(self._read(worker), name="pool-worker-answers")
        return worker

    def _add(self, worker: _Worker) -> None:
        self._workers.add(worker)
        self._running.set(len(self._workers))
        assert self._room is not None
        self._room.set()

    def _lose(self, worker: _Worker, reason: str) -> None:
        """Take `worker` out of service (`reason`: died, hung, or stopped by `shutdown`):
        `WorkerLost` for the task it was on, its other tasks to other workers."""
        if worker.lost:
            return
        worker.lost = True
        if self._stopping:
            reason = "stopped"  # it exits because `shutdown` asked it to
        if worker.deadline is not None:
            worker.deadline.cancel()
        self._workers.discard(worker)
        self._running.set(len(self._workers))
        worker.process.kill()  # no-op once it has exited; `shutdown` asked it to stop first
        worker.writer.close()
        jobs = list(worker.jobs)
        worker.jobs.clear()
        self._count_busy()
        error = f"{self._label} {reason}" + (
            f" (no answer within {jobs[0].timeout_s:g}s)" if reason == "hung" and jobs else ""
        )
        # Only the first task can have been started: the worker reads the next one after
        # it has sent the answer to this one.
        for i, job in enumerate(jobs):
            if i == 0 or self._stopping:
                job.settle(_Lost(error, self._stopping))
            else:
                job.settle(None)  # sent again
        assert self._room is not None
        self._room.set()
        if reason not in REASONS:
            return
        self._restarts.labels(reason).inc()
        lost = jobs[0].items if jobs else 0
        task = asyncio.create_task(
            self._replace(worker, reason, lost, len(jobs[1:])), name="pool-respawn"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _replace(self, old: _Worker, reason: str, lost: int, resent: int) -> None:
        await _reap(old.process)
        log.warning(
            "%s %s %s (exit code %s): the batch it was on (%d items) went back to its "
            "submitter, %d batches it had not started went to other workers; starting a "
            "replacement",
            self._label,
            old.process.pid,
            reason,
            old.process.exitcode,
            lost,
            resent,
        )
        while not self._stopping:
            try:
                fresh = await self._spawn()
            except Exception as exc:
                log.error("could not start an %s: %s; retrying", self._label, exc)
                await asyncio.sleep(_RESPAWN_DELAY_S)
                continue
            if self._stopping:
                fresh.writer.close()
                await _reap(fresh.process)
                return
            self._add(fresh)
            return

    def _count_busy(self) -> None:
        self._busy.set(sum(1 for w in self._workers if w.jobs))


async def _reap(process: WorkerProcess) -> None:
    """Wait a moment for a worker that was asked to stop or killed, then kill it."""
    if await process.wait(_STOP_WAIT_S):
        return
    process.kill()
    if not await process.wait(_KILLED_WAIT_S):
        log.error("worker process %s did not exit after SIGKILL", process.pid)
