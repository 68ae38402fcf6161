"""`harness/ports.py`: a bench's child that exits because a port picked for it was taken
since is started again on fresh ports, a bounded number of times; any other failure is
raised as it is. The race is made real: the first port picked is taken before the child
binds it."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.ports import TRIES, PortTaken, check_exited, free_port, retrying

# A child that binds its port as a server does and, when it cannot, exits naming why (as the
# monitor and rotel do).
_CHILD = """
import socket, sys
with socket.socket() as sock:
    try:
        sock.bind(("127.0.0.1", int(sys.argv[1])))
    except OSError as exc:
        sys.exit(f"cannot listen on 127.0.0.1:{sys.argv[1]} ({exc.strerror.lower()})")
"""


def _start_child(log: Path, port: int) -> int:
    with log.open("wb") as out:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(port)], stdout=out, stderr=subprocess.STDOUT
        )
    check_exited(done.returncode or None, log, "child")
    return port


def test_a_port_taken_between_picking_and_binding_is_picked_afresh(tmp_path: Path) -> None:
    taken: list[socket.socket] = []
    ports: list[int] = []

    def start() -> int:
        port = free_port()
        ports.append(port)
        if not taken:  # another process takes the port first picked
            holder = socket.socket()
            holder.bind(("127.0.0.1", port))
            holder.listen()
            taken.append(holder)
        return _start_child(tmp_path / f"child-{len(ports)}.log", port)

    try:
        assert retrying(start) == ports[-1]
    finally:
        for holder in taken:
            holder.close()
    assert len(ports) == 2
    assert ports[1] != ports[0]
    assert "address already in use" in (tmp_path / "child-1.log").read_text()


def test_the_tries_are_bounded_and_other_failures_are_not_retried(tmp_path: Path) -> None:
    calls: list[str] = []

    def always_taken() -> None:
        calls.append("taken")
        raise PortTaken("taken")

    with pytest.raises(PortTaken):
        retrying(always_taken)
    assert len(calls) == TRIES

    log = tmp_path / "other.log"
    log.write_text("config: unknown key\n")

    def fails_otherwise() -> None:
        calls.append("other")
        check_exited(1, log, "child")

    with pytest.raises(RuntimeError, match="exited \\(1\\) before ready") as raised:
        retrying(fails_otherwise)
    assert not isinstance(raised.value, PortTaken)
    assert calls.count("other") == 1
    check_exited(None, log, "child")  # still running: nothing to say
