"""The default install, for real: a new virtual environment with `rag-monitor` installed
without extras, at the lock's versions (uv, from the cache tests/run.sh installed the lock
from; no network). There `rag-monitor run` serves the embedded defaults and scores the
sample traces, and a config that needs an extra is refused by `check-config` and by
`run`, naming the extra and the command that installs it."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from harness.children import spawn
from harness.servers import monitor_ports, stop_process
from harness.wait import CONDITION_S, SERVER_START_S, wait_until
from monitor.config import EXTRA_MODULES
from tests.config.test_extras import ALL_FEATURES, MISSING

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def _uv() -> str:
    """uv of the test environment (tests/run.sh installs it there), else the one on PATH."""
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    assert found is not None, "needs uv (tests/run.sh installs it into the test environment)"
    return found


def _uv_cache() -> str:
    """The cache the lock was installed from: tests/run.sh exports it; under a plain pytest
    it is uv's default in the user's own home (the tests run with a home of their own)."""
    home = pwd.getpwuid(os.getuid()).pw_dir
    return os.environ.get("UV_CACHE_DIR") or str(Path(home, ".cache", "uv"))


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("RAG_MONITOR_", "VIRTUAL"))}


@pytest.fixture(scope="module")
def default_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a new virtual environment holding the default install: built, as
    `pip install .` does, from a copy of what the distribution is made of."""
    root = tmp_path_factory.mktemp("default-install")
    source = root / "source"
    shutil.copytree(
        REPO / "monitor", source / "monitor", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    install = [
        _uv(),
        "pip",
        "install",
        "--offline",
        "--quiet",
        "--python",
        str(venv / "bin" / "python"),
    ]
    constraints = ["-c", str(REPO / "tests" / "requirements.lock"), str(source)]
    done = subprocess.run(
        [*install, *constraints],
        env={**_env(), "UV_CACHE_DIR": _uv_cache()},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return venv / "bin"


def test_the_default_install_holds_no_extra(default_env: Path) -> None:
    found = subprocess.run(
        [
            str(default_env / "python"),
            "-c",
            "import importlib.util, sys; "
            "print(sorted(m for m in sys.argv[1:] if importlib.util.find_spec(m)))",
            *EXTRA_MODULES.values(),
            "monitor",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=default_env,
    )
    assert found.stdout.strip() == "['monitor']"


def _rag_monitor(bin_folder: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_folder / "rag-monitor"), *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        timeout=120,
    )


def test_check_config_names_each_missing_extra(default_env: Path, tmp_path: Path) -> None:
    path = tmp_path / "all-features.yaml"
    path.write_text(ALL_FEATURES)
    done = _rag_monitor(default_env, tmp_path, "check-config", str(path))
    assert done.returncode == 1
    assert set(done.stderr.splitlines()) == MISSING


def test_run_refuses_a_judge_at_start(default_env: Path, tmp_path: Path) -> None:
    path = tmp_path / "judge.yaml"
    path.write_text("judge: {model: openai/gpt-4o-mini}\nevaluators: [{name: groundedness}]\n")
    done = _rag_monitor(default_env, tmp_path, "run", "--config", str(path))
    assert done.returncode == 1
    assert (
        "config error: evaluators.0.name: groundedness, an LLM judge, needs the judges extra "
        "(not installed): pip install 'rag-monitor[judges]'"
    ) in done.stderr


def test_run_on_the_embedded_defaults_scores_the_sample(default_env: Path, tmp_path: Path) -> None:
    """No config file: only the listeners move to ports the system picks."""
    loopback = "127.0.0.1:0"
    env = {
        **_env(),
        "RAG_MONITOR_RECEIVERS__OTLP__GRPC__ENDPOINT": loopback,
        "RAG_MONITOR_RECEIVERS__OTLP__HTTP__ENDPOINT": loopback,
        "RAG_MONITOR_EXPORTERS__PROMETHEUS__ENDPOINT": loopback,
    }
    log = tmp_path / "monitor.log"
    with log.open("w") as out:  # the child keeps its own copy of the descriptor
        proc = spawn([str(default_env / "rag-monitor"), "run"], stderr=out, env=env, cwd=tmp_path)
    try:

        def listening() -> dict[str, int] | None:
            assert proc.poll() is None, f"monitor exited:\n{log.read_text()}"
            ports = monitor_ports(log.read_text(errors="replace"))
            return ports if {"metrics", "http", "grpc"} <= ports.keys() else None

        ports = wait_until(listening, SERVER_START_S, "the monitor's listeners")
        assert ports is not None
        endpoint = f"http://127.0.0.1:{ports['http']}"
        sent = _rag_monitor(default_env, tmp_path, "send-sample", "--endpoint", endpoint)
        assert sent.returncode == 0, sent.stderr

        def verdicts() -> set[str]:
            url = f"http://127.0.0.1:{ports['metrics']}/metrics"
            with urllib.request.urlopen(url, timeout=5) as response:
                body = response.read().decode()
            return {
                outcome
                for line in body.splitlines()
                if line.startswith("rag_monitor_evaluations_total{")
                and 'evaluator="local_groundedness"' in line
                and 'service="rag-monitor-sample"' in line
                and not line.endswith(" 0.0")
                for outcome in ("pass", "fail")
                if f'outcome="{outcome}"' in line
            }

        assert wait_until(verdicts, CONDITION_S, "both sample verdicts") == {"pass", "fail"}
    finally:
        stop_process(proc, 60)
    assert proc.returncode == 0, log.read_text()[-3000:]
