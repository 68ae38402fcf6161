"""The inner loop of `tests/run.sh`: given a test path, it reuses `.venv-test` (built from
the lock and pyproject.toml as they are), installs no Debian packages, builds no framework
environment the selection does not need, and runs neither ruff nor mypy unless asked; with
no test path it runs everything (checked by CI itself, `.ci/run`)."""

from __future__ import annotations

import os
import subprocess
from hashlib import sha256

import pytest

from tests.conftest import REPO

FAST = "tests/project/test_readme.py::test_it_opens_with_the_two_set_up_commands"


def test_one_fast_test_runs_alone_on_the_built_environment() -> None:
    venv = REPO / ".venv-test"
    sources = b"".join(
        (REPO / f).read_bytes() for f in ("tests/requirements.lock", "pyproject.toml")
    )
    built_from = venv / ".built-from"
    if (
        not built_from.exists()
        or built_from.read_text().strip() != sha256(sources).hexdigest()[:16]
    ):
        # It would rebuild the environment this test runs from.
        pytest.skip("the inner loop reuses .venv-test as tests/run.sh built it from this lock")
    env = {k: v for k, v in os.environ.items() if k != "MONITOR_TESTS_FRAMEWORK_ENVS"}
    before = (venv / ".built-from").stat().st_mtime_ns
    run = subprocess.run(
        ["bash", "tests/run.sh", FAST, "-q"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    said = run.stdout + run.stderr
    assert run.returncode == 0, said
    assert "1 passed" in said
    assert (venv / ".built-from").stat().st_mtime_ns == before  # not rebuilt
    # No ruff, no mypy, no apt, no framework environment.
    assert "All checks passed" not in said and "Success: no issues found" not in said
    assert "apt-get" not in said and "npm" not in said
