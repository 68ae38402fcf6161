"""The framework environments: the product's test lock holds no framework (each stack's
apps run from its own lock), and tests/frameworks/envs/build.sh builds each environment once
per lock: a second run with the same locks installs nothing, a changed lock is built afresh
(its older build removed, the others kept), and a build that did not finish is built again.
The JVM apps (Maven projects) are built offline first, once per change of their sources,
and a dependency Maven cannot fetch fails the build naming it. uv, npm and mvn are stand-ins
here that record what they were asked to do; the real ones run in `tests/run.sh`, whose
framework tests use what they build."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from harness.framework_envs import ENVS, JVM_FLAGS, REPO, lock_hash

# What the framework apps share with the monitor's own tests: the OpenTelemetry SDK and its
# OTLP exporter they send with, the OpenAI client they call the scripted model with, and
# PyYAML (the monitor's config reader; MLflow's tracing SDK imports it undeclared).
# Packages both the product and a stack's environment name: the SDK and exporter, the
# OpenAI client, YAML, httpx, and litellm (the judges' client, and a traced stack).
SHARED = {
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-proto-http",
    "openai",
    "pyyaml",
    "httpx",
    "litellm",
}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

# Stand-ins for uv (`venv ... DIR`, `pip sync ... LOCK`) and npm (`ci --prefix DIR ...`):
# each makes the folder it was asked for and records the call in $INSTALLS.
_UV = """#!/usr/bin/env bash
case "$1" in
venv) mkdir -p "${@: -1}/bin" ;;
pip) echo "uv sync ${@: -1}" >> "$INSTALLS" ;;
esac
"""
_NPM = """#!/usr/bin/env bash
while [ "$1" != --prefix ]; do shift; done
mkdir -p "$2/node_modules"
echo "npm ci $2" >> "$INSTALLS"
"""


# A stand-in for Maven (`-B -q -f POM package -Dapp.build.dir=DIR`): it packages into DIR,
# or, with $MVN_MISSING set, fails as Maven does on an artifact Maven Central lacks.
_MVN = """#!/usr/bin/env bash
if [ -n "${MVN_MISSING:-}" ]; then
    echo "[ERROR] Could not find artifact $MVN_MISSING in central" >&2
    exit 1
fi
for arg in "$@"; do
    case "$arg" in -Dapp.build.dir=*) dir="${arg#-Dapp.build.dir=}" ;; esac
done
mkdir -p "$dir/quarkus-app" && touch "$dir/quarkus-app/quarkus-run.jar"
echo "mvn package $dir" >> "$INSTALLS"
"""


def _names(lines: list[str]) -> set[str]:
    """The distribution names of requirement lines (comments and options skipped)."""
    names = set()
    for line in lines:
        match = _NAME.match(line.strip())
        if match and not line.startswith(("#", " ", "-")):
            names.add(re.sub(r"[-_.]+", "-", match[0]).lower())
    return names


def test_the_products_test_lock_holds_no_framework() -> None:
    stacks = sorted(ENVS.glob("*/requirements.in"))
    assert len(stacks) >= 5, stacks
    wanted = set().union(*(_names(s.read_text().splitlines()) for s in stacks))
    assert {"crewai", "semantic-kernel", "agent-framework-core", "google-adk"} <= wanted
    locked = _names((REPO / "tests" / "requirements.lock").read_text().splitlines())
    assert "pytest" in locked
    assert wanted & locked == SHARED, sorted(wanted & locked)


def _tool(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


class Checkout:
    """A checkout with the real build.sh, two Python stacks' locks and the JavaScript lock."""

    def __init__(self, root: Path) -> None:
        self.root = root / "repo"
        self.cache = root / "cache"
        self.installs = root / "installs.log"
        envs = self.root / "tests" / "frameworks" / "envs"
        envs.mkdir(parents=True)
        shutil.copy(REPO / "tests" / "frameworks" / "envs" / "build.sh", envs / "build.sh")
        for stack in ("rag", "agents"):
            (envs / stack).mkdir()
            (envs / stack / "requirements.lock").write_text(f"{stack}-package==1.0\n")
        js = self.root / "tests" / "js"
        js.mkdir()
        (js / "package.json").write_text("{}\n")
        (js / "package-lock.json").write_text('{"lockfileVersion": 3}\n')
        tools = root / "bin"
        tools.mkdir()
        self.uv = _tool(tools / "uv", _UV)
        _tool(tools / "npm", _NPM)
        _tool(tools / "mvn", _MVN)
        self.path = f"{tools}:{os.environ['PATH']}"

    def lock(self, stack: str) -> Path:
        return self.root / "tests" / "frameworks" / "envs" / stack / "requirements.lock"

    def run(self, **env: str) -> subprocess.CompletedProcess[str]:
        """Run build.sh, with `env` beside the machine's."""
        self.installs.write_text("")
        return subprocess.run(
            ["bash", "tests/frameworks/envs/build.sh", str(self.uv)],
            cwd=self.root,
            env={
                **os.environ,
                "PATH": self.path,
                "INSTALLS": str(self.installs),
                "MONITOR_TESTS_FRAMEWORK_ENVS": str(self.cache),
                **env,
            },
            capture_output=True,
            text=True,
            check=False,
        )

    def build(self) -> list[str]:
        """Run build.sh; the installs it made."""
        done = self.run()
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"{self.cache}\n"
        return sorted(self.installs.read_text().splitlines())

    def built(self) -> list[str]:
        return sorted(p.name for p in self.cache.iterdir())


def test_each_lock_is_built_once_and_again_only_when_it_changes(tmp_path: Path) -> None:
    repo = Checkout(tmp_path)
    rag, agents = repo.lock("rag"), repo.lock("agents")
    js_lock = repo.root / "tests" / "js" / "package-lock.json"
    rag_dir, agents_dir = f"rag-{lock_hash(rag)}", f"agents-{lock_hash(agents)}"
    js_dir = f"js-{lock_hash(js_lock)}"

    assert repo.build() == sorted(
        [
            "uv sync tests/frameworks/envs/agents/requirements.lock",
            "uv sync tests/frameworks/envs/rag/requirements.lock",
            f"npm ci {repo.cache / js_dir}",
        ]
    )
    # The folders the tests look for (harness/framework_envs.py: the same hash of each lock).
    assert repo.built() == sorted([rag_dir, agents_dir, js_dir])
    modules = repo.root / "tests" / "js" / "node_modules"
    assert modules.resolve() == (repo.cache / js_dir / "node_modules").resolve()

    assert repo.build() == []  # nothing changed: nothing installed
    assert repo.built() == sorted([rag_dir, agents_dir, js_dir])

    rag.write_text("rag-package==2.0\n")
    assert repo.build() == ["uv sync tests/frameworks/envs/rag/requirements.lock"]
    assert repo.built() == sorted([f"rag-{lock_hash(rag)}", agents_dir, js_dir])

    (repo.cache / agents_dir / ".complete").unlink()  # a build that was cut off
    assert repo.build() == ["uv sync tests/frameworks/envs/agents/requirements.lock"]
    assert (repo.cache / agents_dir / ".complete").exists()


# A stand-in for Maven (`mvn -B -q [-o] package -DskipTests`): records each call, fails
# offline while $OFFLINE_MISSES is set, fails naming an artifact while $UNRESOLVABLE is set,
# and otherwise writes target/app.jar.
_MVN = """#!/usr/bin/env bash
offline=0
for arg in "$@"; do [ "$arg" = -o ] && offline=1; done
echo "mvn offline=$offline" >> "$INSTALLS"
if [ "$offline" = 1 ] && [ -n "$OFFLINE_MISSES" ]; then
    echo "Cannot access central in offline mode" >&2; exit 1
fi
if [ -n "$UNRESOLVABLE" ]; then
    echo "Could not resolve dependencies: $UNRESOLVABLE was not found" >&2; exit 1
fi
mkdir -p target && echo jar > target/app.jar
"""


def test_a_jvm_app_is_built_offline_first_once_and_a_missing_artifact_fails_naming_it(
    tmp_path: Path,
) -> None:
    repo = Checkout(tmp_path)
    app = repo.root / "tests" / "frameworks" / "spring_app"
    (app / "src" / "main").mkdir(parents=True)
    (app / "pom.xml").write_text("<project/>\n")
    (app / "src" / "main" / "App.java").write_text("class App {}\n")
    _tool(tmp_path / "bin" / "mvn", _MVN)

    def build(**env: str) -> subprocess.CompletedProcess[str]:
        repo.installs.write_text("")
        return subprocess.run(
            ["bash", "tests/frameworks/envs/build.sh", str(repo.uv)],
            cwd=repo.root,
            env={
                **os.environ,
                "PATH": repo.path,
                "INSTALLS": str(repo.installs),
                "MONITOR_TESTS_FRAMEWORK_ENVS": str(repo.cache),
                **env,
            },
            capture_output=True,
            text=True,
            check=False,
        )

    def mvn_calls() -> list[str]:
        return [line for line in repo.installs.read_text().splitlines() if line.startswith("mvn")]

    failed = build(OFFLINE_MISSES="1", UNRESOLVABLE="org.springframework.ai:spring-ai-nope:1.1.2")
    assert failed.returncode != 0
    assert "org.springframework.ai:spring-ai-nope:1.1.2" in failed.stderr
    assert mvn_calls() == ["mvn offline=1", "mvn offline=0"]
    assert not [p for p in repo.cache.glob("spring_app-*") if (p / ".complete").exists()]
    assert not (app / "target").exists()  # built in a copy, never in the checkout

    done = build(OFFLINE_MISSES="1")  # the first fetch: offline lacks the artifacts
    assert done.returncode == 0, done.stderr
    assert mvn_calls() == ["mvn offline=1", "mvn offline=0"]
    (built,) = repo.cache.glob("spring_app-*")
    assert (built / "app.jar").exists() and (built / ".complete").exists()
    # Not a Spring Boot jar: no class-data archive, said, and the app runs from its jar.
    assert "spring_app runs without a class-data archive" in done.stderr
    assert not (built / ".cds").exists() and not (built / "app").exists()
    # The archive is recorded under the flags the tests run the apps with.
    script = (REPO / "tests" / "frameworks" / "envs" / "build.sh").read_text()
    assert f"java {' '.join(JVM_FLAGS)} -XX:ArchiveClassesAtExit=" in re.sub(
        r"\s*\\\n\s*", " ", script
    )

    assert build().returncode == 0
    assert mvn_calls() == []  # unchanged: not rebuilt
    (app / "src" / "main" / "App.java").write_text("class App { int x; }\n")
    assert build().returncode == 0
    assert mvn_calls() == ["mvn offline=1"]  # changed, its artifacts cached: offline
    (rebuilt,) = repo.cache.glob("spring_app-*")
    assert rebuilt != built
