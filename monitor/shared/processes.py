"""Processes started to do work, and what they share: a multiprocessing context whose
processes never run the caller's main script and that starts no resource tracker, whether
a process runs, and `settle`, which keeps a process's pages shared with the children it
forks (`monitor/pool/README.md` says why each)."""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
import types
from collections.abc import Sequence
from multiprocessing import context as mp
from multiprocessing import resource_tracker
from multiprocessing.process import BaseProcess
from typing import Any, cast

# A `__main__` naming no script: multiprocessing then tells a child nothing of the caller's.
_NO_MAIN = types.ModuleType("__main__")
_STARTING = threading.Lock()  # one process starts at a time while `__main__` is hidden


class _WithoutMain(BaseProcess):
    def start(self) -> None:
        with _STARTING:
            main, sys.modules["__main__"] = sys.modules["__main__"], _NO_MAIN
            try:
                super().start()
            finally:
                sys.modules["__main__"] = main


class _SpawnContext(mp.SpawnContext):
    class Process(_WithoutMain, mp.SpawnProcess): ...


class _ForkServerContext(mp.ForkServerContext):
    class Process(_WithoutMain, mp.ForkServerProcess): ...


def worker_context(forkserver_preload: Sequence[str] | None) -> mp.BaseContext:
    """`spawn` without a preload, else `forkserver` importing it; no resource tracker:
    multiprocessing is told one runs, on a file that discards what it is sent."""
    tracker = cast(Any, resource_tracker._resource_tracker)
    if tracker._fd is None:
        tracker._fd = os.open(os.devnull, os.O_WRONLY)
    if forkserver_preload is None:
        return _SpawnContext()
    context = _ForkServerContext()
    # The fork server starts once per process: it never imports a later context's preload.
    context.set_forkserver_preload(list(forkserver_preload))
    return context


def running(pid: int) -> bool:
    """Whether process `pid` runs (an exited one its parent has not reaped does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def settle() -> None:
    """Freeze what this process holds out of the garbage collector's reach and give the C
    heap's free pages back, so that the children it forks keep sharing its pages."""
    gc.freeze()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)
