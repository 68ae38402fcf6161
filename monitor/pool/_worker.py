"""The worker's side: its set-up, then each task. A task and its answer cross pebble's
channel as bytes pickled at each end, so nothing fails to pickle inside pebble (which would
stop every worker) and a worker takes a task off the shared channel as fast as it copies it.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import os
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, cast

PICKLE = pickle.HIGHEST_PROTOCOL


@dataclass(frozen=True, slots=True)
class Initializer:
    """`function(args)`, run once in each worker before its first task to build its state;
    a module-level function (pickled by name)."""

    function: Callable[[Any], None]
    args: object = None


_set_up_failed = ""  # why this worker cannot run tasks


def set_up(preload: Sequence[str], initializers: Sequence[Initializer], ready: Connection) -> None:
    """Import `preload`, run the initializers, tell the pool on `ready`: (pid, "" or why it
    failed); a worker that failed answers each task with that. What it inherited and built
    is frozen out of the garbage collector's reach (a collection would write to, and so
    copy, every page the fork server shares), and the C heap's free pages are returned."""
    global _set_up_failed
    gc.freeze()
    try:
        for module in preload:
            importlib.import_module(module)
        for initializer in initializers:
            initializer.function(initializer.args)
    except Exception as exc:
        _set_up_failed = f"{type(exc).__name__}: {exc}"
    settle()
    # One short message: a single write to the pipe every worker shares.
    ready.send((os.getpid(), _set_up_failed))
    ready.close()


def settle() -> None:
    """What this process loaded is frozen out of the garbage collector's reach, and the C
    heap's free pages are returned to the system."""
    gc.freeze()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)


def run_task(task: bytes) -> bytes:
    """One task: `function(payload)`, its outcome pickled."""
    if _set_up_failed:
        return pickle.dumps((False, f"failed to initialize: {_set_up_failed}"), PICKLE)
    function, payload = cast(tuple[Callable[[Any], object], object], pickle.loads(task))
    try:
        outcome: tuple[bool, object] = (True, function(payload))
    except Exception as exc:
        outcome = (False, f"{type(exc).__name__}: {exc}")
    try:
        return pickle.dumps(outcome, PICKLE)
    except Exception as exc:
        return pickle.dumps((False, f"unpicklable answer: {type(exc).__name__}: {exc}"), PICKLE)


class Pickled:
    """A task, pickled into bytes as pebble sends it (in its thread, not on the event
    loop); the worker unpickles them once it has taken the task off the channel."""

    __slots__ = ("task",)

    def __init__(self, task: object) -> None:
        self.task = task

    def __reduce__(self) -> tuple[Callable[[bytes], bytes], tuple[bytes]]:
        return bytes, (pickle.dumps(self.task, PICKLE),)
