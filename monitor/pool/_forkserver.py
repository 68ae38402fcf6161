"""The fork server's side: a process that imports the `preload` modules once, then forks a
worker for each socket the pool sends it, so that what the preload loaded (code, read-only
tables) is in every worker's pages once.

Two sockets to the pool: `requests` brings the preload list (first frame), then one frame
per worker to fork with that worker's socket attached (SCM_RIGHTS); `notices` carries
("ready", "") or ("failed", why) once the preload is imported, ("forked", pid) for each
request, and ("exited", pid, exit code) for each worker reaped. The server exits when the
pool closes `requests` (its workers stop on their own, when the pool closes theirs).
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import socket
from collections.abc import Callable
from typing import cast

from monitor.pool._worker import HEADER, frame, import_all, run_worker


def serve_forks(requests: socket.socket, notices: socket.socket) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the pool decides when this process stops
    try:
        (size,) = HEADER.unpack(_recv_exactly(requests, HEADER.size))
        preload = cast(list[str], pickle.loads(_recv_exactly(requests, size)))
        import_all(preload)
    except EOFError:
        return
    except Exception as exc:
        notices.sendall(frame(("failed", f"{type(exc).__name__}: {exc}")))
        return
    # Workers that exit are reaped here (they are this process's children), woken by
    # SIGCHLD through a pipe the loop below watches.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    notices.sendall(frame(("ready", "")))
    selector = selectors.DefaultSelector()
    selector.register(requests, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)

    def close_inherited() -> None:
        """In a forked worker: what it must not keep open (the pool's EOF on `notices`
        tells it this server is gone)."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        selector.close()
        requests.close()
        notices.close()
        os.close(wake_r)
        os.close(wake_w)

    try:
        while True:
            for key, _ in selector.select():
                if key.fileobj == wake_r:
                    os.read(wake_r, 4096)
                    _reap(notices)
                elif not _fork(requests, notices, close_inherited):
                    return
    except OSError:
        return  # the pool is gone


def _fork(
    requests: socket.socket, notices: socket.socket, close_inherited: Callable[[], None]
) -> bool:
    """Fork a worker for the next request; False once the pool closed `requests`."""
    message, fds, _, _ = socket.recv_fds(requests, 64, 1)
    if not message or not fds:
        return False
    child = socket.socket(fileno=fds[0])
    pid = os.fork()
    if pid == 0:  # the worker
        code = 0
        try:
            close_inherited()
            run_worker(child)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    child.close()
    notices.sendall(frame(("forked", pid)))
    return True


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    """`size` bytes, read without buffering: the fork requests that follow carry file
    descriptors, which only `recv_fds` on the socket itself receives."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _reap(notices: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        notices.sendall(frame(("exited", pid, os.waitstatus_to_exitcode(status))))
