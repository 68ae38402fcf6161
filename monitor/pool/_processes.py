"""How the pool's worker processes start, and how the pool learns which run.

The library (pebble) starts and stops the workers through a multiprocessing context:

- one worker: `spawn`, a fresh interpreter that is the calling process's own child. With
  no second worker to share pages with, a fork server would only add its own.
- several: `forkserver`. Multiprocessing's fork server, itself a fresh interpreter,
  imports the `preload` modules once, then forks each worker, so that what those modules
  load (code, read-only tables) is in every worker's pages once. It is started again by
  the next worker to start if it has died.

Both start methods would run the caller's main script again in each worker (as
`__mp_main__`, so that functions defined there can be unpickled); for `rag-monitor` that
script imports the whole service. A worker needs only its tasks' modules, so the main
module is hidden while a worker starts: a task's function and an initializer's must
therefore live in an importable module, not in `__main__`.

Each worker reports its start and its exit (seen when pebble polls it) to a `Watch`, which
keeps the running workers' pids and tells the pool of a worker that exited without being
told to: one that died.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import types
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext, ForkServerProcess, SpawnProcess
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import RLock
from typing import Any

# A `__main__` that names no script or module: multiprocessing then tells a starting
# worker nothing about the caller's.
_NO_MAIN = types.ModuleType("__main__")
_STARTING = threading.Lock()  # one worker starts at a time while `__main__` is hidden


class Watch:
    """The pids of the workers running; `died(pid, exit code)` for one that exited
    without being told to. Called from the library's threads."""

    def __init__(
        self, changed: Callable[[int], None], died: Callable[[int, int | None], None]
    ) -> None:
        self._changed = changed
        self._died = died
        self._lock = threading.Lock()
        self._pids: set[int] = set()

    @property
    def pids(self) -> list[int]:
        with self._lock:
            return sorted(self._pids)

    def started(self, pid: int) -> None:
        with self._lock:
            self._pids.add(pid)
            running = len(self._pids)
        self._changed(running)

    def exited(self, pid: int, exitcode: int | None, *, told: bool) -> None:
        with self._lock:
            if pid not in self._pids:
                return
            self._pids.discard(pid)
            running = len(self._pids)
        self._changed(running)
        if not told:
            self._died(pid, exitcode)


class _Watched(BaseProcess):
    """A worker process that reports to its pool's `Watch`."""

    watch: Watch | None = None
    _told = False  # stopped by the library (hung, or the pool shuts down)

    def start(self) -> None:
        with _STARTING:
            main = sys.modules["__main__"]
            sys.modules["__main__"] = _NO_MAIN
            try:
                super().start()
            finally:
                sys.modules["__main__"] = main
        if self.watch is not None and self.pid is not None:
            self.watch.started(self.pid)

    def terminate(self) -> None:
        self._told = True
        super().terminate()

    def is_alive(self) -> bool:
        alive = super().is_alive()
        if not alive and self.watch is not None and self.pid is not None:
            self.watch.exited(self.pid, self.exitcode, told=self._told)
        return alive

    def __getstate__(self) -> dict[str, Any]:
        # Sent to the worker as it starts: without the watch, which lives here.
        state = dict(vars(self))
        state.pop("watch", None)
        return state


class _SpawnWorker(_Watched, SpawnProcess):
    pass


class _ForkServerWorker(_Watched, ForkServerProcess):
    pass


class WorkerContext:
    """What the library uses of a multiprocessing context (its method names), for one pool of `processes`
    workers whose processes report to `watch`."""

    def __init__(self, processes: int, preload: Sequence[str], watch: Watch) -> None:
        method = "spawn" if processes == 1 else "forkserver"
        self._base: BaseContext = multiprocessing.get_context(method)
        self._worker: type[_Watched] = _SpawnWorker if processes == 1 else _ForkServerWorker
        if processes > 1:
            # Imported by the fork server before it forks; the fork server is started
            # once per process, so a later pool's preload is imported by its workers.
            multiprocessing.set_forkserver_preload(list(preload))
        self._watch = watch

    def Process(self, **kwargs: Any) -> BaseProcess:
        process = self._worker(**kwargs)
        process.watch = self._watch
        return process

    def Pipe(self, duplex: bool = True) -> tuple[Connection, Connection]:
        return self._base.Pipe(duplex)

    def RLock(self) -> RLock:
        return self._base.RLock()

    def get_start_method(self) -> str:
        return self._base.get_start_method()
