"""The worker process's side of the pool: its set-up, then each task.

A task travels as bytes both ways: the pool pickles `(function, payload)` and the worker
pickles `(True, result)`, or `(False, "ExceptionType: message")` when the function
raised. The library that carries them (pebble) then only moves bytes: nothing a task
holds can fail to pickle or unpickle inside it, where one such failure would stop every
worker, and the worker reads a task off the shared channel in the time it takes to copy
its bytes.
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
    """Run once in each worker before its first task, to build that worker's state
    (e.g. the CPU scorers, kept in a global of the function's module, where the tasks
    that use it read it). `function` must be a module-level function (it is pickled by
    name) and `args` picklable."""

    function: Callable[[Any], None]
    args: object = None


# Why this worker cannot run tasks ("" when it can): its set-up failed.
_set_up_failed = ""


def set_up(preload: Sequence[str], initializers: Sequence[Initializer], ready: Connection) -> None:
    """A worker's set-up: import the `preload` modules, run the initializers, then tell
    the pool on `ready`: (pid, "") or (pid, why it failed). A worker whose set-up failed
    stays up and answers each task with that failure, rather than exiting to be started
    again, and failing again, at once.

    What the worker inherited from the fork server, and then what it built, is frozen
    out of the garbage collector's reach (`gc.freeze`): a collection would otherwise write
    to every page holding those objects and so give the worker its own copy of them. The
    C heap's free pages go back to the system (glibc's `malloc_trim`)."""
    global _set_up_failed
    gc.freeze()
    try:
        for module in preload:
            importlib.import_module(module)
        for initializer in initializers:
            initializer.function(initializer.args)
    except Exception as exc:
        _set_up_failed = f"{type(exc).__name__}: {exc}"
    gc.freeze()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)
    # One short message: a single write to the pipe, which every worker shares.
    ready.send((os.getpid(), _set_up_failed))
    ready.close()


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
    """A task's `(function, payload)`, pickled when pebble sends it (in pebble's thread,
    not on the event loop) into bytes the worker unpickles after it has taken the task
    off the shared channel."""

    __slots__ = ("task",)

    def __init__(self, task: object) -> None:
        self.task = task

    def __reduce__(self) -> tuple[Callable[[bytes], bytes], tuple[bytes]]:
        return bytes, (pickle.dumps(self.task, PICKLE),)
