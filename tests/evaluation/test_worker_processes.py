"""How the pool starts its worker processes: from a fresh interpreter, never running the
calling process's main script or importing what it imported; one worker as the caller's
own child, several forked from one fork server that imported the preload once (and is
started again if it dies); no other helper process but multiprocessing's resource
tracker."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.wait import wait_until_async
from monitor.pool import ProcessPool
from monitor.telemetry import create_telemetry

HERE = Path(__file__).resolve().parent


def worker_facts(_: object) -> tuple[int, int, list[str]]:
    """The task: the worker's pid, its parent's, and the modules it has loaded."""
    return os.getpid(), os.getppid(), sorted(sys.modules)


def main_script(_: object) -> str | None:
    """The task: the file the worker's main module was run from, if any."""
    return getattr(sys.modules["__main__"], "__file__", None)


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def _pool(processes: int) -> ProcessPool:
    return ProcessPool(processes, 60.0, create_telemetry(), preload=("harness.pool_scorers",))


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
        assert "harness.pool_scorers" in modules  # its preload
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
        # The fork server (started by this pool, or by an earlier one in this process and
        # kept by multiprocessing) is this process's child, and the only process the pool
        # added: no resource tracker.
        assert server in _children(os.getpid())
        assert _children(os.getpid()) - before <= {server}
        assert all("harness.pool_scorers" in modules for _, _, modules in facts)
    finally:
        await pool.shutdown(5.0)
    # The workers are gone; the fork server is multiprocessing's, kept for the next pool.
    assert _children(os.getpid()) - before <= {server}


async def test_a_dead_fork_server_is_started_again_for_the_next_replacement() -> None:
    pool = ProcessPool(2, 60.0, create_telemetry())
    await pool.start()
    try:
        facts = await _facts(pool)
        (server,) = {parent for _, parent, _ in facts}
        first = set(pool.pids)
        # Its workers' exits can no longer be learnt (it reported them): they are replaced.
        os.kill(server, signal.SIGKILL)
        await wait_until_async(
            lambda: len(pool.pids) == 2 and not first & set(pool.pids), 60, "new workers"
        )
        facts = await _facts(pool)
        (parent,) = {parent for _, parent, _ in facts}
        assert parent != server and parent in _children(os.getpid())
    finally:
        await pool.shutdown(5.0)


_SCRIPT = """
import asyncio, sys
sys.path[:0] = [{here!r}, {repo!r}]
import aiohttp  # the caller's own import, which no worker needs
from monitor.pool import ProcessPool
from monitor.telemetry import create_telemetry
from test_worker_processes import main_script, worker_facts

async def main() -> None:
    for processes in (1, 2):
        pool = ProcessPool(processes, 60.0, create_telemetry())
        await pool.start()
        _, _, modules = await pool.submit(worker_facts, None)
        ran_main = await pool.submit(main_script, None) == __file__
        await pool.shutdown(5.0)
        print(processes, ran_main, "aiohttp" in modules, flush=True)

if __name__ == "__main__":
    asyncio.run(main())
"""


def test_workers_import_nothing_of_the_callers_main_script(tmp_path: Path) -> None:
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent(_SCRIPT.format(here=str(HERE), repo=str(HERE.parents[1]))))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["1 False False", "2 False False"], done.stderr
