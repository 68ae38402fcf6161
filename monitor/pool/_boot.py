"""How the pool's processes start: `python -c BOOT ROLE FD... -- SYS.PATH...`, a fresh
interpreter given the calling process's `sys.path` (so that it imports the same modules
the caller would) and nothing of the caller's `__main__` or of what it imported. ROLE is
"worker" (`run_worker` on the socket FD) or "forkserver" (`serve_forks` on its two
sockets)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence

from monitor.pool._forkserver import serve_forks
from monitor.pool._worker import run_worker

BOOT = (
    "import sys; end = sys.argv.index('--'); sys.path[:] = sys.argv[end + 1:]; "
    "from monitor.pool._boot import boot; boot(sys.argv[1:end])"
)


def command(role: str, fds: Sequence[int]) -> list[str]:
    """The command line of a process that runs `role` on the inherited file descriptors
    `fds`."""
    return [sys.executable, "-c", BOOT, role, *map(str, fds), "--", *sys.path]


def boot(args: Sequence[str]) -> None:
    """The entry of a process started with `command`."""
    role, *fds = args
    sockets = [socket.socket(fileno=int(fd)) for fd in fds]
    if role == "worker":
        run_worker(*sockets)
    else:
        serve_forks(*sockets)
