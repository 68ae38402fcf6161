"""The pool's side of starting worker processes.

Worker processes never run the calling process's `__main__` or import what it imported
beyond what their tasks need. By the pool's size:

- one worker (`Direct`): its own interpreter (`monitor.pool._boot.command`), a child of
  the calling process. With no second worker to share pages with, a fork server between
  them would only add its own.
- several (`ForkServer`): forked from a fork server, itself a fresh interpreter, that
  imported the `preload` modules first, so that what they load (code, read-only tables)
  is in their pages once.
- either way, the first one can instead be forked from the calling process itself
  (`fork_here`, called by the CLI while it runs one thread, before it serves): the lone
  worker, or the fork server of several. They then also share the caller's own pages
  (the interpreter, the config and record models, the span decoder: what both sides
  import). What replaces them, should they die, starts from a fresh interpreter.

Either way the pool kills a worker by its pid and learns its exit code when it is gone.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import pickle
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

from monitor.pool._boot import command
from monitor.pool._forkserver import serve_forks
from monitor.pool._worker import HEADER, frame, run_worker

log = logging.getLogger(__name__)

_SERVER_STARTUP_TIMEOUT_S = 120.0
_ORPHAN_POLL_S = 0.1


class WorkerProcess(Protocol):
    @property
    def pid(self) -> int: ...

    @property
    def exitcode(self) -> int | None:
        """None while it runs (or when it is unknown: its fork server is gone)."""

    def kill(self) -> None:
        """SIGKILL; a no-op once it has exited."""

    async def wait(self, timeout_s: float) -> bool:
        """Whether it has exited within `timeout_s`."""


class Launcher(Protocol):
    async def launch(self) -> tuple[WorkerProcess, socket.socket]:
        """A worker process (its `run_worker`) and the pool's end of its socket."""

    async def close(self) -> None: ...


class _ChildProcess(Protocol):
    """What `subprocess.Popen` and `_OwnChild` both are."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


class _Child:
    """A worker process that is the calling process's child: started by `subprocess`, or
    forked from this process (`fork_here`)."""

    def __init__(self, popen: _ChildProcess) -> None:
        self._popen = popen

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def exitcode(self) -> int | None:
        return self._popen.poll()

    def kill(self) -> None:
        if self._popen.poll() is None:
            self._popen.kill()

    async def wait(self, timeout_s: float) -> bool:
        try:
            await asyncio.to_thread(self._popen.wait, timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True


def _start(role: str, fds: Sequence[int]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command(role, fds), pass_fds=fds, stdin=subprocess.DEVNULL)


class Direct:
    """Each worker in an interpreter of its own; `forked`, a worker forked from the
    calling process, is the first."""

    def __init__(self, forked: Forked | None = None) -> None:
        self._forked = forked

    async def launch(self) -> tuple[WorkerProcess, socket.socket]:
        if self._forked is not None:
            forked, self._forked = self._forked, None
            return _Child(forked.process), forked.sockets[0]
        ours, theirs = socket.socketpair()
        try:
            popen = await asyncio.to_thread(_start, "worker", [theirs.fileno()])
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return _Child(popen), ours

    async def close(self) -> None:
        if self._forked is not None:  # never used
            self._forked.close()


class _Forked:
    """A worker process forked by the fork server (its child, not the pool's)."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._exitcode: int | None = None
        self._exited = asyncio.Event()
        self._orphaned = False  # its fork server is gone: nobody reports its exit

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def exitcode(self) -> int | None:
        return self._exitcode

    def exited(self, code: int | None) -> None:
        self._exitcode = code
        self._exited.set()

    def orphaned(self) -> None:
        self._orphaned = True

    def kill(self) -> None:
        if not self._exited.is_set():
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def wait(self, timeout_s: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self._exited.is_set():
            if self._orphaned and not _alive(self._pid):
                self.exited(None)
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            poll = min(remaining, _ORPHAN_POLL_S) if self._orphaned else remaining
            try:
                await asyncio.wait_for(self._exited.wait(), poll)
            except TimeoutError:
                continue
        return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class _OwnChild:
    """A process forked from this one (not by `subprocess`), waited for by its pid."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._status: int | None = None
        self._lock = threading.Lock()  # one waitpid at a time: the second would find none

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (status := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"process {self.pid}", timeout or 0.0)
            time.sleep(_ORPHAN_POLL_S)
        return status

    def poll(self) -> int | None:
        """Its exit code once it has exited (reaped here, from any thread)."""
        with self._lock:
            if self._status is None:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self._status = os.waitstatus_to_exitcode(status)
            return self._status

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@dataclass
class Forked:
    """A process forked from the calling process (`fork_here`) for a pool of `workers`:
    the lone worker, or the fork server of several (`ProcessPool(forked=...)`)."""

    workers: int
    process: _OwnChild
    sockets: tuple[socket.socket, ...]  # the worker's; the fork server's requests, notices

    def close(self) -> None:
        """Let it exit (it reads EOF), when no pool will use it; reaped in the background."""
        for sock in self.sockets:
            sock.close()
        threading.Thread(target=self.process.wait, name="reap-forked", daemon=True).start()


def _one_thread() -> bool:
    tasks = Path("/proc/self/task")
    return threading.active_count() == 1 and (not tasks.is_dir() or len(list(tasks.iterdir())) == 1)


def fork_here(workers: int) -> Forked | None:
    """For a pool of `workers`: its lone worker, or the fork server of several, forked
    from this process now, sharing its pages. None (the pool starts its own from a fresh
    interpreter) where forking is not safe: more than one thread runs. Call it before
    anything starts a thread."""
    if workers < 1 or not hasattr(os, "fork") or not _one_thread():
        return None
    pairs = [socket.socketpair() for _ in range(1 if workers == 1 else 2)]
    # What this process has built so far stays in the pages it shares with the child:
    # out of its collector's reach, which would otherwise write to them.
    gc.freeze()
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            for ours, _ in pairs:
                ours.close()
            child = [theirs for _, theirs in pairs]
            if workers == 1:
                run_worker(child[0])
            else:
                serve_forks(*child)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    for _, child_end in pairs:
        child_end.close()
    return Forked(workers, _OwnChild(pid), tuple(ours for ours, _ in pairs))


class ForkServer:
    """Workers forked from one fork server, started with the first worker (and again if
    it dies; `forked`, one forked from the calling process, is used first). It imports
    `preload` before it forks any."""

    def __init__(
        self,
        preload: Sequence[str],
        forked: Forked | None = None,
        on_exit: Callable[[], None] = lambda: None,
    ) -> None:
        """`on_exit` is called each time the fork server exits on its own (not closed)."""
        self._preload = list(preload)
        self._forked_server = forked
        self._on_exit = on_exit
        self._server: _ChildProcess | None = None
        self._requests: socket.socket | None = None
        self._notices: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None
        # One per request sent, answered in order (a caller that gave up leaves its own:
        # the worker forked for it exits when it finds its socket closed).
        self._requested: deque[asyncio.Future[_Forked]] = deque()
        self._children: dict[int, _Forked] = {}
        self._lock = asyncio.Lock()  # one fork server started at a time

    async def launch(self) -> tuple[WorkerProcess, socket.socket]:
        async with self._lock:
            requests = await self._running()
        forked: asyncio.Future[_Forked] = asyncio.get_running_loop().create_future()
        self._requested.append(forked)
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(requests, [b"f"], [theirs.fileno()])
        except OSError:  # the server is gone; the next launch starts another
            self._requested.remove(forked)
            ours.close()
            raise
        finally:
            theirs.close()
        try:
            return await forked, ours
        except BaseException:
            ours.close()
            raise

    async def close(self) -> None:
        server, requests = self._server, self._requests
        self._server = self._requests = None
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)
        if requests is not None:
            requests.close()  # the server exits when it reads EOF
        if self._notices is not None:
            self._notices.close()
        if server is not None:
            await _stop(server)

    async def _running(self) -> socket.socket:
        """The requests socket of a running fork server, started if there is none."""
        if self._requests is not None and self._reading is not None and not self._reading.done():
            return self._requests
        await self.close()
        server: _ChildProcess
        if self._forked_server is not None:
            forked, self._forked_server = self._forked_server, None
            server = forked.process
            requests, notices = forked.sockets
        else:
            requests, server_requests = socket.socketpair()
            notices, server_notices = socket.socketpair()
            fds = [server_requests.fileno(), server_notices.fileno()]
            try:
                server = await asyncio.to_thread(_start, "forkserver", fds)
            except BaseException:
                requests.close()
                notices.close()
                raise
            finally:
                server_requests.close()
                server_notices.close()
        reader, writer = await asyncio.open_connection(sock=notices)
        requests.sendall(frame(self._preload))
        try:
            async with asyncio.timeout(_SERVER_STARTUP_TIMEOUT_S):
                status, detail = cast(tuple[str, str], await _read_frame(reader))
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            status, detail = "failed", f"did not start ({type(exc).__name__})"
        except BaseException:
            requests.close()
            writer.close()
            await _stop(server)
            raise
        if status != "ready":
            requests.close()
            writer.close()
            await _stop(server)
            raise RuntimeError(f"the worker processes' fork server {detail}")
        self._server, self._requests, self._notices = server, requests, writer
        self._reading = asyncio.create_task(self._read(reader), name="pool-fork-server")
        return requests

    async def _read(self, reader: asyncio.StreamReader) -> None:
        """The server's notices: a worker forked, a worker reaped."""
        try:
            while True:
                notice = cast(tuple[object, ...], await _read_frame(reader))
                if notice[0] == "forked":
                    child = _Forked(cast(int, notice[1]))
                    self._children[child.pid] = child
                    forked = self._requested.popleft()
                    if not forked.done():
                        forked.set_result(child)
                elif notice[0] == "exited":
                    gone = self._children.pop(cast(int, notice[1]), None)
                    if gone is not None:
                        gone.exited(cast(int, notice[2]))
        except (asyncio.IncompleteReadError, ConnectionError):
            log.warning(
                "the worker processes' fork server exited; %d workers it forked go on, "
                "the next worker starts a new one",
                len(self._children),
            )
            self._on_exit()
        finally:
            while self._requested:
                forked = self._requested.popleft()
                if not forked.done():
                    forked.set_exception(RuntimeError("the fork server exited"))
            for child in self._children.values():
                child.orphaned()
            self._children.clear()


async def _read_frame(reader: asyncio.StreamReader) -> object:
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    return pickle.loads(await reader.readexactly(size))


async def _stop(server: _ChildProcess) -> None:
    """Wait a moment for the fork server to exit, then kill it."""
    try:
        await asyncio.to_thread(server.wait, 5.0)
    except subprocess.TimeoutExpired:
        server.kill()
        await asyncio.to_thread(server.wait)
