"""The worker's side: its set-up, then each task, which crosses pebble's channel as bytes
pickled at each end, as does its answer (`README.md` says why)."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import os
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, NamedTuple, cast

PICKLE = pickle.HIGHEST_PROTOCOL
_set_up_failed = ""  # why this worker cannot run tasks
_notices: Connection | None = None  # the pipe to the pool, shared by every worker


class Ready(NamedTuple):  # a worker's set-up is done: "" or why it failed
    pid: int
    failed: str


class Taken(NamedTuple):  # a worker took the task `token`, before it runs any of it
    pid: int
    token: int


@dataclass(frozen=True, slots=True)
class Initializer:
    """`function(args)`, run once in each worker before its first task to build its state;
    a module-level function (pickled by name)."""

    function: Callable[[Any], None]
    args: object = None


def set_up(
    preload: Sequence[str], initializers: Sequence[Initializer], notices: Connection
) -> None:
    """Import `preload`, run the initializers, tell the pool (`Ready`); a worker whose
    set-up failed answers each task with that."""
    global _set_up_failed, _notices
    _notices = notices
    gc.freeze()  # what it inherited, before its own imports can trigger a collection
    try:
        for module in preload:
            importlib.import_module(module)
        for initializer in initializers:
            initializer.function(initializer.args)
    except Exception as exc:
        _set_up_failed = f"{type(exc).__name__}: {exc}"
    settle()
    _notify(Ready(os.getpid(), _set_up_failed))


def _notify(notice: Ready | Taken) -> None:
    # One short message: a single write to the pipe every worker shares.
    if _notices is not None:
        with contextlib.suppress(OSError):  # a pool that stopped listening
            _notices.send(notice)


def settle() -> None:
    """Freeze what this process holds out of the garbage collector's reach (a collection
    would copy shared pages) and give the C heap's free pages back (`README.md`)."""
    gc.freeze()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)


def run_task(token: int, task: bytes) -> bytes:
    """`function(payload)`, its outcome pickled: (True, value) or (False, why); the pool
    told first that this worker took it (`README.md`: lost workers)."""
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
