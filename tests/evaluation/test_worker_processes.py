"""How the pool starts its worker processes: from a fresh interpreter, never from the
calling process's `__main__` or what it imported; one worker as the caller's own child,
several forked from one fork server that imported the preload once (and is started again
if it dies); no other helper process. Forked from the caller itself instead (as the CLI
does, while it runs one thread): the lone worker, or the fork server of several."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from monitor.pool import ProcessPool, fork_here
from monitor.telemetry import Telemetry, create_telemetry
from tests._wait import wait_until_async

HERE = Path(__file__).resolve().parent


def worker_facts(_: object) -> tuple[int, int, list[str]]:
    """The task: the worker's pid, its parent's, and the modules it has loaded."""
    return os.getpid(), os.getppid(), sorted(sys.modules)


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def _pool(processes: int) -> ProcessPool:
    return ProcessPool(processes, 60.0, create_telemetry(), preload=("tests._pool_scorers",))


async def _facts(pool: ProcessPool) -> list[tuple[int, int, list[str]]]:
    # Two tasks per worker at once: the pool hands them to every worker.
    return await asyncio.gather(*(pool.submit(worker_facts, None) for _ in range(2 * pool.size)))


async def test_a_lone_worker_is_the_calling_process_own_child() -> None:
    pool = _pool(1)
    await pool.start()
    try:
        ((pid, parent, modules), *_) = await _facts(pool)
        assert parent == os.getpid()
        assert _children(os.getpid()) >= {pid}
        assert "tests._pool_scorers" in modules  # its preload
    finally:
        await pool.shutdown(5.0)
    assert pid not in _children(os.getpid())


async def test_several_workers_are_forked_from_one_fork_server_that_preloaded() -> None:
    before = _children(os.getpid())
    pool = _pool(2)
    await pool.start()
    try:
        facts = await _facts(pool)
        assert {pid for pid, _, _ in facts} == set(pool.pids)
        (server,) = {parent for _, parent, _ in facts}
        # The fork server is the only process the pool added beside the calling one.
        assert _children(os.getpid()) - before == {server}
        assert all("tests._pool_scorers" in modules for _, _, modules in facts)
    finally:
        await pool.shutdown(5.0)
    assert _children(os.getpid()) - before == set()


async def test_a_dead_fork_server_is_started_again_for_the_next_replacement() -> None:
    telemetry = create_telemetry()
    pool = ProcessPool(2, 60.0, telemetry)
    await pool.start()
    try:
        facts = await _facts(pool)
        (server,) = {parent for _, parent, _ in facts}
        os.kill(server, signal.SIGKILL)
        lost = pool.pids[0]
        os.kill(lost, signal.SIGKILL)
        await wait_until_async(
            lambda: len(pool.pids) == 2 and lost not in pool.pids, 60, "a replacement worker"
        )
        facts = await _facts(pool)
        parents = {parent for _, parent, _ in facts}
        assert server not in parents and len(parents) == 2  # the survivor and the new server
        assert _fork_server_exits(telemetry) == 1.0
    finally:
        await pool.shutdown(5.0)
    assert _fork_server_exits(telemetry) == 1.0  # closing the new one is no exit of its own


def _fork_server_exits(telemetry: Telemetry) -> float:
    value = telemetry.registry.get_sample_value("rag_monitor_worker_fork_server_exits_total")
    assert value is not None
    return value


_SCRIPT = """
import asyncio, sys
sys.path[:0] = [{here!r}, {repo!r}]
import aiohttp  # the caller's own import, which no worker needs
from monitor.pool import ProcessPool
from monitor.telemetry import create_telemetry
from test_worker_processes import worker_facts

async def main() -> None:
    for processes in (1, 2):
        pool = ProcessPool(processes, 60.0, create_telemetry())
        await pool.start()
        _, _, modules = await pool.submit(worker_facts, None)
        await pool.shutdown(5.0)
        print(processes, "__mp_main__" in modules, "aiohttp" in modules, flush=True)

if __name__ == "__main__":
    asyncio.run(main())
"""


def test_workers_import_nothing_of_the_callers_main_script(tmp_path: Path) -> None:
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent(_SCRIPT.format(here=str(HERE), repo=str(HERE.parents[1]))))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["1 False False", "2 False False"], done.stderr


_FORKED_FROM_CALLER = """
import asyncio, os, sys
sys.path[:0] = [{here!r}, {repo!r}]
from monitor.pool import ProcessPool, fork_here
from monitor.telemetry import create_telemetry
from test_worker_processes import worker_facts

async def main(processes: int) -> None:
    forked = fork_here(processes)
    assert forked is not None, "one thread runs: forking is safe"
    pool = ProcessPool(processes, 60.0, create_telemetry(), forked=forked)
    await pool.start()
    facts = await asyncio.gather(*(pool.submit(worker_facts, None) for _ in range(2 * processes)))
    await pool.shutdown(5.0)
    pids = {{pid for pid, _, _ in facts}}
    parents = {{parent for _, parent, _ in facts}}
    # One worker: the forked process itself; several: the forked fork server's children.
    forked_pid = pids if processes == 1 else parents
    print(len(pids), forked_pid == {{forked.process.pid}}, flush=True)

if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
"""


def test_the_lone_worker_or_the_fork_server_is_forked_from_the_caller(tmp_path: Path) -> None:
    script = tmp_path / "caller.py"
    script.write_text(
        textwrap.dedent(_FORKED_FROM_CALLER.format(here=str(HERE), repo=str(HERE.parents[1])))
    )
    for processes in (1, 2):
        done = subprocess.run(
            [sys.executable, str(script), str(processes)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.split() == [str(processes), "True"], done.stderr


async def test_nothing_is_forked_while_other_threads_run() -> None:
    for processes in (1, 2):
        assert await asyncio.to_thread(fork_here, processes) is None
