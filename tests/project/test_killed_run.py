"""A test run that is killed leaves no server behind: a pytest process that started
Prometheus, Alertmanager and a launcher with a child of its own (as noida-db's is) is
killed midway — SIGKILL to it alone, or to its whole process group as `timeout` and CI
runners do — and every process it started is gone (harness/children.py)."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.children import forget, spawn
from harness.servers import REPO, need
from harness.wait import CONDITION_S, SERVER_START_S, wait_until

# The plugins the inner test does not use, left out: loading them is most of a start's CPU.
UNUSED = ("-p", "no:cloudcoil", "-p", "no:anyio", "-p", "no:hypothesispytest")
INNER = """
import sys, threading
from pathlib import Path

from harness.children import spawn
from harness.servers import alertmanager, prometheus, rag_monitor

MARKER = {marker!r}
# A launcher whose server is its own child.
LAUNCHER = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)', sys.argv[1]]); "
    "time.sleep(3600)"
)


def test_holds_servers(tmp_path: Path) -> None:
    spawn([sys.executable, "-c", LAUNCHER, MARKER])
    # The sidecar with its evaluation worker processes (their command lines do not name
    # MARKER: the outer test finds them by the sidecar's session).
    config = Path(MARKER) / "monitor" / "monitor.yaml"
    config.write_text(
        "receivers: {{otlp: {{grpc: {{enabled: false}}, http: {{endpoint: '127.0.0.1:0'}}}}}}\\n"
        "exporters: {{prometheus: {{endpoint: '127.0.0.1:0'}}}}\\n"
    )
    with rag_monitor(Path(MARKER) / "monitor", config):
        with alertmanager(Path(MARKER) / "am", "http://127.0.0.1:9/hook"):
            with prometheus(Path(MARKER) / "prom", "global: {{scrape_interval: 1m}}\\n"):
                (Path(MARKER) / "ready").write_text("ready")
                threading.Event().wait()  # until killed
"""


def _in_session(leader: int) -> list[int]:
    """Live processes of the session `leader` leads (`spawn` starts each in its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == leader:
            found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def _started_from(marker: str) -> list[int]:
    """Processes whose command line names `marker`, but for this one."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("whole_group", [False, True], ids=["pytest-alone", "its-group"])
def test_a_killed_run_leaves_no_server(tmp_path: Path, whole_group: bool) -> None:
    need("prometheus")
    need("prometheus-alertmanager")
    marker = str(tmp_path / "servers")
    for folder in ("am", "prom", "monitor"):
        (Path(marker) / folder).mkdir(parents=True)
    (tmp_path / "test_inner.py").write_text(INNER.format(marker=marker))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # In a process group of its own (the one a whole-group kill reaches), and killed with
    # this test run should this one be killed meanwhile.
    run = spawn(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *UNUSED, "test_inner.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: (Path(marker) / "ready").exists() or run.poll() is not None,
            2 * SERVER_START_S,  # it starts two servers
            "the inner run to start its servers",
        )
        assert run.poll() is None, "the inner run ended before it was killed"
        started = _started_from(marker)
        # The launcher and its child, the sidecar, Alertmanager and Prometheus.
        assert len(started) >= 5, started
        (sidecar,) = [pid for pid in started if b"monitor\0run\0" in _cmdline(pid)]
        # The sidecar and the processes it started: at least its worker processes' server.
        assert len(_in_session(sidecar)) >= 2, _in_session(sidecar)
    finally:
        if whole_group:
            os.killpg(run.pid, signal.SIGKILL)
        else:
            run.kill()
        run.wait()
        forget(run)
    wait_until(
        lambda: not _started_from(marker) and not _in_session(sidecar),
        CONDITION_S,
        "every process the killed run started to be gone",
        context=lambda: str((_started_from(marker), _in_session(sidecar))),
    )


# The one place a process is started with `Popen`: every other goes through it.
SPAWNER = REPO / "harness/children.py"
# Calls that start a process the caller goes on beside (a command run to its end is
# `subprocess.run` with a timeout: it kills its child when that runs out).
ALONGSIDE = {"Popen", "create_subprocess_exec", "create_subprocess_shell"}


def _started_alongside(path: Path) -> list[int]:
    """The lines of `path` that start a process by `ALONGSIDE`, by name or attribute."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        called = node.func
        name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
        if name in ALONGSIDE:
            lines.append(node.lineno)
    return lines


def test_every_process_a_test_starts_alongside_it_is_spawned() -> None:
    """A server, a busy loop or a command a test goes on beside is started by
    `harness.children.spawn`, so a killed run takes it along."""
    found = {
        str(path.relative_to(REPO)): lines
        for folder in ("tests", "harness")
        for path in sorted((REPO / folder).rglob("*.py"))
        if path != SPAWNER and (lines := _started_alongside(path))
    }
    assert found == {}, f"start these with harness.children.spawn: {found}"
    assert _started_alongside(SPAWNER), "the check finds spawn's own Popen"
