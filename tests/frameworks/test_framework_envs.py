"""The framework environments: the product's test lock holds no framework (each stack's
apps run from its own lock), and tests/frameworks/envs/build.sh builds each environment once
per lock: a second run with the same locks installs nothing, a changed lock is built afresh
(its older build removed, the others kept), and a build that did not finish is built again;
a Maven app likewise, by the hash of its pom.xml and sources. uv, npm and mvn are
stand-ins here that record what they were asked to install; the real ones run in
`tests/run.sh`, whose framework tests use what they build."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from harness.framework_envs import ENVS, REPO, lock_hash, maven_hash

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


def test_a_maven_app_is_built_once_into_the_folder_its_tests_look_for(tmp_path: Path) -> None:
    """A Maven app (`tests/frameworks/<app>/pom.xml`) is packaged into a folder named by
    the hash `harness.framework_envs.maven_hash` computes, again only when a source
    changed; an artifact Maven cannot resolve fails the build, naming it."""
    repo = Checkout(tmp_path)
    app = repo.root / "tests" / "frameworks" / "demo_jvm"
    (app / "src" / "main" / "java" / "demo").mkdir(parents=True)
    (app / "src" / "main" / "resources").mkdir(parents=True)
    (app / "pom.xml").write_text("<project/>\n")
    (app / "src" / "main" / "java" / "demo" / "App.java").write_text("class App {}\n")
    (app / "src" / "main" / "resources" / "application.properties").write_text("a=1\n")
    first = repo.cache / f"demo_jvm-{maven_hash(app)}"
    assert f"mvn package {first}/target" in repo.build()
    assert (first / "target" / "quarkus-app" / "quarkus-run.jar").exists()
    assert not any(line.startswith("mvn") for line in repo.build())  # nothing changed

    (app / "src" / "main" / "resources" / "application.properties").write_text("a=2\n")
    second = repo.cache / f"demo_jvm-{maven_hash(app)}"
    assert second != first and f"mvn package {second}/target" in repo.build()
    assert not first.exists()

    (app / "pom.xml").write_text("<project><!-- changed --></project>\n")
    artifact = "io.quarkiverse.langchain4j:quarkus-langchain4j-openai:jar:9.9.9"
    done = repo.run(MVN_MISSING=artifact)
    assert done.returncode != 0 and artifact in done.stderr
