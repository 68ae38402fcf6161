"""Servers that die with the test run: every server a test starts (brokers, Prometheus,
Alertmanager, `rag-monitor run`, llama servers, rotel) is started by `spawn`, in a process
group of its own, and killed with its whole group when the process that started it ends —
however it ends, `kill -9` and a killed process group included.

The killer is a watchdog process, one per test process, in a session of its own (so a
signal to the test run's group does not reach it): it reads the groups to kill from a pipe
whose only writer is the test process, and kills every group still registered when that
pipe closes, which the kernel does when the test process exits for any reason. It also
asks the kernel for SIGTERM when its parent dies (`PR_SET_PDEATHSIG`), for the case where
a process forked from the test process still holds the pipe open. No polling and no
timing: both are events the kernel delivers.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import subprocess
import sys
import threading
from typing import IO, Any

# The watchdog: SIGTERM (parent death) or the pipe's end kills every registered group.
_WATCHDOG = r"""
import ctypes, os, signal, sys
parent = int(sys.argv[1])
groups = {}
def started(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None
def kill_all(*_):
    for group, start in groups.items():
        # A leader that lives on with another start time is another process that took
        # the id: ours are gone. While a member of our group lives, the id is not reused.
        if started(group) not in (None, start):
            continue
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    os._exit(0)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
signal.signal(signal.SIGTERM, kill_all)
ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
if os.getppid() != parent:  # the parent died before prctl took effect
    kill_all()
for line in sys.stdin.buffer:
    words = line.split()
    if words and words[0].startswith(b"-"):
        groups.pop(int(words[0][1:]), None)
    elif len(words) == 2:
        groups[int(words[0])] = words[1].decode()
kill_all()
"""

_lock = threading.Lock()
_watchdog: subprocess.Popen[bytes] | None = None
_owner = 0  # the pid whose watchdog `_watchdog` is (a forked child needs its own)


def _channel() -> IO[bytes]:
    """The pipe to this process's watchdog, started on first use."""
    global _watchdog, _owner
    if _watchdog is None or _owner != os.getpid() or _watchdog.poll() is not None:
        _watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid())],
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        _owner = os.getpid()
        atexit.register(_close, _watchdog, _owner)
    assert _watchdog.stdin is not None
    return _watchdog.stdin


def _close(watchdog: subprocess.Popen[bytes], owner: int) -> None:
    """At a normal exit: the watchdog kills what is left and ends, and is waited for."""
    if os.getpid() != owner or watchdog.stdin is None:
        return
    with contextlib.suppress(OSError):
        watchdog.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        watchdog.wait(timeout=60)


def start_watchdog() -> None:
    """Start this process's watchdog now (from the main thread: the kernel's parent-death
    signal follows the thread that started it)."""
    with _lock:
        _channel()


def _tell(line: str) -> None:
    with _lock:
        channel = _channel()
        channel.write(line.encode() + b"\n")
        channel.flush()


def spawn(argv: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(argv, **popen)` in a new session (its own process group, which its
    children join), killed with that group when this process ends."""
    proc: subprocess.Popen[Any] = subprocess.Popen(argv, start_new_session=True, **popen)
    _watch(proc.pid)
    return proc


async def spawn_async(*argv: str, **popen: Any) -> asyncio.subprocess.Process:
    """`spawn` for asyncio: `asyncio.create_subprocess_exec(*argv, **popen)`."""
    proc = await asyncio.create_subprocess_exec(*argv, start_new_session=True, **popen)
    _watch(proc.pid)
    return proc


def _watch(pid: int) -> None:
    """The watchdog kills the group `pid` leads when this process ends."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            start = stat.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return  # no such process: nothing to kill
    _tell(f"{pid} {start}")


def forget(proc: subprocess.Popen[Any] | asyncio.subprocess.Process) -> None:
    """`proc` has been stopped and waited for: the watchdog no longer kills its group (its
    id may be reused)."""
    with contextlib.suppress(OSError, ValueError):
        _tell(f"-{proc.pid}")
