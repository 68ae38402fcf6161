"""The multiprocessing context pebble starts the workers with: `spawn` for one worker (the
caller's own child), `forkserver` for several (the fork server imports `preload` once, then
forks each worker, which shares those pages). Either would run the caller's main script in
each worker; it is hidden while a worker starts (`README.md`).
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Sequence
from multiprocessing.context import (
    BaseContext,
    ForkServerContext,
    ForkServerProcess,
    SpawnContext,
    SpawnProcess,
)
from multiprocessing.process import BaseProcess

# A `__main__` naming no script: multiprocessing then tells a worker nothing of the caller's.
_NO_MAIN = types.ModuleType("__main__")
_STARTING = threading.Lock()  # one process starts at a time while `__main__` is hidden


class _WithoutMain(BaseProcess):
    def start(self) -> None:
        with _STARTING:
            main = sys.modules["__main__"]
            sys.modules["__main__"] = _NO_MAIN
            try:
                super().start()
            finally:
                sys.modules["__main__"] = main


class _SpawnWorker(_WithoutMain, SpawnProcess):
    pass


class _ForkServerWorker(_WithoutMain, ForkServerProcess):
    pass


class _SpawnContext(SpawnContext):
    Process = _SpawnWorker


class _ForkServerContext(ForkServerContext):
    Process = _ForkServerWorker


def worker_context(processes: int, preload: Sequence[str]) -> BaseContext:
    if processes == 1:
        return _SpawnContext()
    context = _ForkServerContext()
    # The fork server is started once per process: a later pool's workers import theirs.
    context.set_forkserver_preload([*preload, "monitor.pool._fork_server"])
    return context
