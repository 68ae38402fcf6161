"""`ProcessPool`: pebble's process pool on the event loop, and the worker's side: its set-up,
then each task, pickled into bytes at each end of pebble's channel (`README.md`)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import itertools
import logging
import os
import pickle
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

import pebble

from monitor.shared.processes import running, settle, worker_context

if TYPE_CHECKING:  # a worker imports this package, and no metrics library
    from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)
P = TypeVar("P")
R = TypeVar("R")
DEPTH = 2  # tasks in flight per worker: it never idles waiting for the next
_STARTUP_TIMEOUT_S = 120.0  # imports and initializers (models load)
_WATCH_S = 0.2  # how often the pool looks for a pebble pool that a death broke
_Answer = asyncio.Future[object]
_Error = BaseException | None
PICKLE = pickle.HIGHEST_PROTOCOL


# -- in the worker process ------------------------------------------------------------------

_set_up_failed = ""  # why this worker cannot run tasks
_notices: Connection | None = None  # the pipe to the pool, shared by every worker


class Ready(NamedTuple):  # a worker's set-up is done: "" or why it failed
    pid: int
    failed: str


class Taken(NamedTuple):  # a worker took the task `token`, before it runs any of it
    pid: int
    token: int


def set_up(
    preload: Sequence[str], initializer: Callable[[], object] | None, notices: Connection
) -> None:
    """Import `preload`, run `initializer`, tell the pool (`Ready`)."""
    global _set_up_failed, _notices
    _notices = notices
    gc.freeze()  # what it inherited, before its own imports can trigger a collection
    try:
        for module in preload:
            importlib.import_module(module)
        if initializer is not None:
            initializer()
    except Exception as exc:
        _set_up_failed = f"{type(exc).__name__}: {exc}"
    settle()
    _notify(Ready(os.getpid(), _set_up_failed))


def _notify(notice: Ready | Taken) -> None:
    # One short message: a single write to the pipe every worker shares.
    if _notices is not None:
        with contextlib.suppress(OSError):  # a pool that stopped listening
            _notices.send(notice)


def run_task(token: int, task: bytes) -> bytes:
    """`function(payload)`'s outcome pickled: (True, value) or (False, why) (`README.md`)."""
    _notify(Taken(os.getpid(), token))
    outcome: tuple[bool, object] = (False, f"failed to initialize: {_set_up_failed}")
    if not _set_up_failed:
        function, payload = cast(tuple[Callable[[Any], object], object], pickle.loads(task))
        try:
            outcome = (True, function(payload))
        except Exception as exc:
            outcome = (False, f"{type(exc).__name__}: {exc}")
    try:
        return pickle.dumps(outcome, PICKLE)
    except Exception as exc:
        return pickle.dumps((False, f"unpicklable answer: {type(exc).__name__}: {exc}"), PICKLE)


class Pickled:
    """A task pickled into bytes as pebble sends it (in pebble's thread, not on the loop)."""

    def __init__(self, task: object) -> None:
        self.task = task

    def __reduce__(self) -> tuple[Callable[[bytes], bytes], tuple[bytes]]:
        return bytes, (pickle.dumps(self.task, PICKLE),)


# -- in the pool's process ------------------------------------------------------------------


class WorkerLost(Exception):
    """The task's worker died, hung, or was stopped (`stopping`) before it answered."""

    def __init__(self, error: str, *, stopping: bool) -> None:
        super().__init__(error)
        self.error, self.stopping = error, stopping


class TaskFailed(Exception):
    """The task function raised in the worker: "ExceptionType: message"."""


class ProcessPool:
    """`processes` workers set up by `preload` and `initializer` (`README.md`)."""

    def __init__(
        self,
        processes: int,
        timeout_s: float,
        telemetry: Telemetry,
        *,
        initializer: Callable[[], object] | None = None,
        preload: Sequence[str] = (),
        role: str = "worker process",
    ) -> None:
        self.size, self.slots = processes, processes * DEPTH
        self._role = role  # what logs and errors call a worker: the user's word for it
        self._timeout = timeout_s
        # One worker is spawned; several fork from a fork server that imports `preload`.
        forked = None if processes == 1 else [*preload, "monitor.pool._fork_server"]
        self._context = worker_context(forked)
        self._notices = self._context.Pipe(duplex=False)  # the workers' `Ready`, `Taken`
        self._initargs = (list(preload), initializer, self._notices[1])
        self._pebble: pebble.ProcessPool | None = None
        self._pids: set[int] = set()  # workers that reported their set-up
        self._failed = ""  # why a worker's set-up failed
        self._expected = 0  # worker starts that replace no uncounted death (`README.md`)
        self._reported = asyncio.Event()  # a worker reported
        self._tokens = itertools.count(1)
        self._in_flight: dict[int, _InFlight] = {}  # by token
        self._answered: set[int] = set()  # tokens answered for a dead worker before pebble
        self._slots = asyncio.Semaphore(self.slots)
        self._renewing = asyncio.Lock()
        self._watching: asyncio.Task[None] | None = None
        self._started = self._stopping = False
        telemetry.gauge("worker_processes").set_function(lambda: len(self.pids))
        telemetry.gauge("worker_processes_busy").set_function(
            lambda: 0 if self._stopping else min(self.in_flight, self.size)
        )
        self._restarts = telemetry.counter("worker_restarts")
        for reason in ("died", "hung"):
            self._restarts.labels(reason)

    @property
    def in_flight(self) -> int:  # tasks submitted and not answered yet
        return len(self._in_flight)

    @property
    def pids(self) -> list[int]:
        return sorted(pid for pid in self._pids if running(pid))

    async def start(self) -> None:
        """Start the workers and wait for their set-up; raises if one fails. Idempotent."""
        if self._started:
            return
        self._started = True
        loop = asyncio.get_running_loop()
        loop.add_reader(self._notices[0].fileno(), self._read_notices)
        self._expected = self.size
        await self._renew(None)
        try:
            async with asyncio.timeout(_STARTUP_TIMEOUT_S):
                while self._expected and not self._failed:
                    self._reported.clear()
                    await self._reported.wait()
        except TimeoutError:
            self._failed = f"not set up within {_STARTUP_TIMEOUT_S:g}s"
        if self._failed:
            await self.shutdown(0.0)
            raise RuntimeError(f"{self._role} failed to initialize: {self._failed}")
        self._watching = loop.create_task(self._watch(), name="pool-watch")
        log.info("%d %ses, %d tasks in flight each", self.size, self._role, DEPTH)

    async def submit(self, function: Callable[[P], R], payload: P, *, timeout_s: float = 0.0) -> R:
        """`function(payload)` in a worker, once a slot is free. Raises `WorkerLost` or
        `TaskFailed`; cancelled, the worker still runs the task."""
        async with self._slots:
            ok, value = await self._answer(Pickled((function, payload)), timeout_s or self._timeout)
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
        if self._in_flight and deadline_s > 0:
            await asyncio.wait([t.answer for t in self._in_flight.values()], timeout=deadline_s)
        async with self._renewing:  # a renewal under way opens its pool first
            if self._pebble is not None:
                await asyncio.to_thread(_close, self._pebble)
        for task in self._in_flight.values():
            if not task.answer.done():
                task.answer.set_exception(WorkerLost(f"{self._role} stopped", stopping=True))
        if self._started:
            asyncio.get_running_loop().remove_reader(self._notices[0].fileno())
        for end in self._notices:
            end.close()
        self._pids.clear()

    async def _answer(self, task: Pickled, deadline_s: float) -> tuple[bool, object]:
        for _ in (1, 2):  # a task no worker took when a death broke the pool goes again, once
            pool, loop = self._pebble, asyncio.get_running_loop()
            if self._stopping or pool is None:
                raise WorkerLost(f"the {self._role} pool is shut down", stopping=True)
            answer: _Answer = loop.create_future()
            token = next(self._tokens)
            self._in_flight[token] = _InFlight(answer)
            try:
                future = pool.schedule(run_task, (token, task), timeout=deadline_s)
                settle = partial(self._settle, answer, token, deadline_s)
                future.add_done_callback(partial(_settle_soon, loop, settle))
                return cast(tuple[bool, object], await answer)
            except (RuntimeError, BrokenProcessPool):  # broken, by now or since the watch looked
                await self._renew(pool)
            finally:
                del self._in_flight[token]
        raise WorkerLost(f"{self._role} died", stopping=self._stopping)

    def _settle(
        self, answer: _Answer, token: int, deadline_s: float, outcome: object, error: _Error
    ) -> None:
        """On the loop, in the order pebble answers (`README.md`: lost workers)."""
        if isinstance(error, BrokenProcessPool):
            self._read_notices()  # which task the worker took, told before it died
        if token in self._answered:  # by a replacement's report, the death counted there
            self._answered.discard(token)
            return
        if isinstance(error, pebble.ProcessExpired):
            error = self._lost("died", f"exit code {error.exitcode}", error.pid)
        elif isinstance(error, BrokenProcessPool):
            # A worker that died on a task pebble had not seen it take: lost with it, not
            # sent again (`_answer` sends the tasks no worker took).
            pid = task.worker if (task := self._in_flight.get(token)) else 0  # none: given up
            if pid and not running(pid):
                error = self._lost("died", "its pebble pool broke", pid)
        elif isinstance(error, TimeoutError):
            error = self._lost("hung", f"no answer within {deadline_s:g}s")
        if not answer.done():
            answer.set_result(outcome) if error is None else answer.set_exception(error)

    def _lost(self, reason: str, detail: str, pid: int = 0) -> WorkerLost:
        if self._stopping:
            return WorkerLost(f"{self._role} stopped", stopping=True)
        self._restarts.labels(reason).inc()
        self._expected += 1  # its replacement
        error = f"{self._role} {reason}"
        log.warning("%s (%s%s); replaced", error, f"pid {pid}, " if pid else "", detail)
        return WorkerLost(error if pid else f"{error} ({detail})", stopping=False)

    def _read_notices(self) -> None:
        with contextlib.suppress(EOFError, OSError):
            while self._notices[0].poll():
                notice = cast(Ready | Taken, self._notices[0].recv())
                if isinstance(notice, Ready):
                    self._ready(*notice)
                elif task := self._in_flight.get(notice.token):  # an answered one's is late
                    task.worker = notice.pid

    def _ready(self, pid: int, failed: str) -> None:
        if failed:
            log.error("%s %s failed to initialize: %s", self._role, pid, failed)
            self._failed = failed
        self._pids = {known for known in self._pids if running(known)} | {pid}
        self._reported.set()
        if self._expected:
            self._expected -= 1
            return
        # It replaces a worker whose death no task's answer told: the task that worker had
        # taken, which pebble holds running until its deadline, is lost (`README.md`).
        self._restarts.labels("died").inc()
        for token, task in self._in_flight.items():
            if task.worker and not task.answer.done() and not running(task.worker):
                log.warning("%s died (pid %d); %d replaces it", self._role, task.worker, pid)
                task.answer.set_exception(WorkerLost(f"{self._role} died", stopping=False))
                self._answered.add(token)
                return
        log.warning("%s died while idle; %s replaces it", self._role, pid)

    async def _renew(self, broken: pebble.ProcessPool | None) -> None:
        """A new pebble pool in place of `broken` (none at start), once however many noticed."""
        async with self._renewing:
            if self._pebble is not broken or self._stopping or (broken and broken.active):
                return
            if broken is not None:
                log.warning("a death broke the %s pool: starting it again", self._role)
                self._expected += len(self.pids)  # any other replaces an uncounted death
                self._pids.clear()
                await asyncio.to_thread(_close, broken)
            pool = pebble.ProcessPool(
                self.size, initializer=set_up, initargs=self._initargs, context=self._context
            )
            await asyncio.to_thread(lambda: pool.active)  # reading `active` starts it
            self._pebble = pool

    async def _watch(self) -> None:
        """A death while no task ran breaks pebble's pool, which then replaces nobody."""
        while True:
            await asyncio.sleep(_WATCH_S)
            if self._pebble is not None and not self._pebble.active:
                await self._renew(self._pebble)


@dataclass(slots=True)
class _InFlight:
    answer: _Answer
    worker: int = 0  # the pid of the worker that took it, once it told (`Taken`)


def _settle_soon(
    loop: asyncio.AbstractEventLoop, settle: Callable[[object, _Error], None], done: Future[bytes]
) -> None:
    error = done.exception()  # in pebble's thread: the answer unpickled here
    try:
        outcome: object = pickle.loads(done.result()) if error is None else None
    except Exception as exc:  # the answer, not the pool: the submitter's `TaskFailed`
        outcome = (False, f"unreadable answer: {type(exc).__name__}: {exc}")
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for it any more
        loop.call_soon_threadsafe(settle, outcome, error)


def _close(pool: pebble.ProcessPool) -> None:
    pool.stop()  # type: ignore[no-untyped-call]
    pool.join()
