"""The worker process's side of the pool: run the initializers, then answer tasks, one
after another, over a socket pair, until told to stop or until the parent is gone.

A frame on the socket is the payload's length, then the payload (a pickle). The parent
sends `(function, payload)` frames (or None: stop); the worker answers each with
`(True, result)`, or `(False, "ExceptionType: message")` when the function raised.

A worker first reads the modules to import (`preload`) and its initializers, each a
frame (`run_worker`).
"""

from __future__ import annotations

import importlib
import pickle
import signal
import socket
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

HEADER = struct.Struct("!Q")
PICKLE = pickle.HIGHEST_PROTOCOL


@dataclass(frozen=True, slots=True)
class Initializer:
    """Run once in each worker before its first task, to build that worker's state
    (e.g. the CPU scorers, kept in a global of the function's module, where the tasks
    that use it read it). `function` must be a module-level function (it is pickled by
    name) and `args` picklable."""

    function: Callable[[Any], None]
    args: object = None


def frame(message: object) -> bytes:
    payload = pickle.dumps(message, PICKLE)
    return HEADER.pack(len(payload)) + payload


def _recv_frame(stream: BinaryIO) -> object:
    """The next message; EOFError when the parent closed its end."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        raise EOFError
    (size,) = HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError
    return pickle.loads(payload)


def _run(function: Callable[[Any], object], payload: object) -> tuple[bool, object]:
    try:
        return True, function(payload)
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"


def import_all(modules: Sequence[str]) -> None:
    for module in modules:
        importlib.import_module(module)


def run_worker(sock: socket.socket) -> None:
    """A worker in a process of its own: import the `preload` modules the first frame
    names, then `serve` with the initializers of the second."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stream = sock.makefile("rb")
    try:
        preload = cast(list[str], _recv_frame(stream))
        import_all(preload)
        initializers = cast(list[Initializer], _recv_frame(stream))
    except (EOFError, OSError):
        return
    except Exception as exc:
        sock.sendall(frame(("failed", f"{type(exc).__name__}: {exc}")))
        return
    serve(sock, initializers, stream)


def serve(
    sock: socket.socket, initializers: Sequence[Initializer], stream: BinaryIO | None = None
) -> None:
    """A worker process: run the initializers, say ("ready", "") or ("failed", why), then
    answer tasks in order until told to stop (None) or until the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    stream = stream or sock.makefile("rb")
    try:
        try:
            for initializer in initializers:
                initializer.function(initializer.args)
        except Exception as exc:
            sock.sendall(frame(("failed", f"{type(exc).__name__}: {exc}")))
            return
        sock.sendall(frame(("ready", "")))
        while True:
            message = _recv_frame(stream)
            if message is None:
                return
            function, payload = cast(tuple[Callable[[Any], object], object], message)
            sock.sendall(frame(_run(function, payload)))
    except (EOFError, OSError):
        return  # the parent closed the socket or exited
