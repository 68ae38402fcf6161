"""How the pool's worker processes start: the multiprocessing context handed to pebble.

- one worker: `spawn`, a fresh interpreter that is the calling process's own child. With
  no second worker to share pages with, a fork server would only add its own.
- several: `forkserver`. Multiprocessing's fork server, itself a fresh interpreter,
  imports the `preload` modules once, then forks each worker, so that what those modules
  load (code, read-only tables) is in every worker's pages once. It is started again by
  the next worker to start if it has died.

Both start methods would run the caller's main script again in each worker (as
`__mp_main__`, so that functions defined there can be unpickled); for `rag-monitor` that
script imports the whole service. A worker needs only its tasks' modules, so the main
module is hidden while a worker process starts: a task's function and an initializer's
must therefore live in an importable module, not in `__main__`.
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

# A `__main__` that names no script or module: multiprocessing then tells a starting
# worker nothing about the caller's.
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
    """The multiprocessing context pebble starts the workers with (see the module doc)."""
    if processes == 1:
        return _SpawnContext()
    context = _ForkServerContext()
    # Imported by the fork server before it forks; the fork server is started once per
    # process, so a later pool's preload is imported by its workers.
    context.set_forkserver_preload(list(preload))
    return context
