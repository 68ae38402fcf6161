"""The multiprocessing context pebble starts the workers with (`README.md`): `spawn` for one
worker, `forkserver` for several; neither runs the caller's main script in a worker."""

import sys
import threading
import types
from collections.abc import Sequence
from multiprocessing import context as mp
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


class _SpawnContext(mp.SpawnContext):
    class Process(_WithoutMain, mp.SpawnProcess): ...


class _ForkServerContext(mp.ForkServerContext):
    class Process(_WithoutMain, mp.ForkServerProcess): ...


def worker_context(processes: int, preload: Sequence[str]) -> mp.BaseContext:
    if processes == 1:
        return _SpawnContext()
    context = _ForkServerContext()
    # The fork server is started once per process: a later pool's workers import theirs.
    context.set_forkserver_preload([*preload, "monitor.pool._fork_server"])
    return context
