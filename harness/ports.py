"""Ports for a process a bench starts, and a retry for the race that picking them has.

A port is picked by binding port 0 and closing the socket; between that and the child
binding it another process may take it. The child then exits naming an address in use
(the monitor's `cannot listen on ... (address already in use)`, rotel's `Address already
in use`). `check_exited` tells that exit from others, and `retrying` runs a start again,
with ports picked afresh, a bounded number of times when that is why it failed (the
harness's `start_on_a_port`, for starts that pick several ports of their own); any other
failure is raised as it is."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from harness.servers import PortTaken, start_on_a_port

__all__ = ["ADDRESS_IN_USE", "TRIES", "PortTaken", "check_exited", "free_port", "retrying"]

T = TypeVar("T")

TRIES = 4
ADDRESS_IN_USE = "address already in use"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_exited(returncode: int | None, log: Path, what: str) -> None:
    """Raise when the child has exited (`returncode` not None): `PortTaken` when its log
    names an address in use, RuntimeError otherwise."""
    if returncode is None:
        return
    tail = log.read_text(errors="replace")[-3000:] if log.is_file() else ""
    if ADDRESS_IN_USE in tail.lower():
        raise PortTaken(f"{what} exited ({returncode}): a picked port was taken\n{tail}")
    raise RuntimeError(f"{what} exited ({returncode}) before ready\n{tail}")


def retrying(start: Callable[[], T], tries: int = TRIES) -> T:
    """`start()`, again while it raises `PortTaken`, at most `tries` times in all; `start`
    must pick its ports itself so that each try gets fresh ones."""
    return start_on_a_port(start, count=0, attempts=tries)
