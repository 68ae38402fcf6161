"""The suite's tiers (tests/conftest.py), on sample suites run by pytest: a file recorded
at a unit file's CPU bound or more in `tests/cpu.json` is end-to-end, as is a test marked
so; a named folder runs its unit tier, a named file runs whole, `--tier` asks for another;
a unit test over a unit test's CPU bound fails a unit-tier run; `--record-cpu` refreshes
the files that ran. tests/project/test_tier_recording.py checks the recording itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import UNIT_FILE_CPU_S

REPO = Path(__file__).resolve().parents[2]
# The sample needs none of these plugins: their imports are most of what a start costs.
PLUGINS_OFF = tuple(
    word
    for plugin in ("hypothesispytest", "cloudcoil", "anyio", "randomly")
    for word in ("-p", f"no:{plugin}")
)

SAMPLE = """import pytest


def test_cheap() -> None:
    pass


@pytest.mark.e2e
def test_wiring() -> None:
    assert sum(range(10**6)) > 0


@pytest.mark.scorecard
def test_statistics() -> None:
    pass
"""
BUSY = """import pytest


def test_busy() -> None:
    assert sum(range(10**6)) > 0


@pytest.mark.e2e
def test_busy_wiring() -> None:
    assert sum(range(10**7)) > 0
"""


def _suite(tmp_path: Path, unit_test_cpu_s: str = "8.0", recorded: float = 0.0) -> Path:
    """A copy of the project's conftest (a unit test's CPU bound at `unit_test_cpu_s`)
    beside a folder `sample/` of two files: one test of each mark, and busy ones, their
    file recorded at `recorded` CPU seconds."""
    tests = tmp_path / "tests"
    (tests / "sample").mkdir(parents=True)
    conftest = (REPO / "tests" / "conftest.py").read_text(encoding="utf-8")
    assert "\nUNIT_TEST_CPU_S = 8.0\n" in conftest
    conftest = conftest.replace(
        "\nUNIT_TEST_CPU_S = 8.0\n", f"\nUNIT_TEST_CPU_S = {unit_test_cpu_s}\n"
    )
    (tests / "conftest.py").write_text(conftest, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        (REPO / "pyproject.toml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tests / "sample" / "test_tiers_sample.py").write_text(SAMPLE, encoding="utf-8")
    (tests / "sample" / "test_busy.py").write_text(BUSY, encoding="utf-8")
    busy = {"tests/sample/test_busy.py": recorded} if recorded else {}
    (tests / "cpu.json").write_text(json.dumps(busy), encoding="utf-8")
    return tests


def _run(tests: Path, *args: str, workers: int = 0) -> subprocess.CompletedProcess[str]:
    """pytest from the sample's root with `args`, in one process or on `workers` xdist
    workers as `tests/run.sh` runs it."""
    env = {k: v for k, v in os.environ.items() if k != "MONITOR_TESTS_CPU"}
    xdist = ["-n", str(workers), "--dist", "loadfile"] if workers else ["-p", "no:xdist"]
    options = ["-p", "no:cacheprovider", *PLUGINS_OFF, *xdist, "-v"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *options, *args],
        cwd=tests.parent,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )


def _passed(run: subprocess.CompletedProcess[str]) -> set[str]:
    return {line.split("::")[1].split()[0] for line in run.stdout.splitlines() if " PASSED" in line}


def test_a_folder_runs_its_unit_tier_a_file_runs_whole_and_tier_asks_for_another(
    tmp_path: Path,
) -> None:
    """test_busy.py is recorded at the unit file's bound: its unmarked test is end-to-end."""
    tests = _suite(tmp_path, recorded=UNIT_FILE_CPU_S)
    runs = {
        "folder": _run(tests, "tests/sample"),
        "e2e": _run(tests, "tests/sample", "--tier", "e2e"),
        "all": _run(tests, "tests/sample", "--tier=all"),
        "file": _run(tests, "tests/sample/test_tiers_sample.py"),
        "marker": _run(tests, "tests/sample", "-m", "unit or scorecard"),
        "no path": _run(tests),
    }
    for run in runs.values():
        assert run.returncode == 0, run.stdout + run.stderr
    everything = {"test_cheap", "test_wiring", "test_statistics", "test_busy", "test_busy_wiring"}
    assert {name: _passed(run) for name, run in runs.items()} == {
        "folder": {"test_cheap"},
        "e2e": {"test_wiring", "test_busy", "test_busy_wiring"},
        "all": everything,
        "file": {"test_cheap", "test_wiring", "test_statistics"},
        "marker": {"test_cheap", "test_statistics"},
        "no path": everything,
    }
    assert "4 deselected" in runs["folder"].stdout


def test_a_unit_test_over_its_cpu_budget_fails_a_unit_tier_run(tmp_path: Path) -> None:
    """The busy tests cost more than the budget (a microsecond here): the unit one fails
    where the run selects the unit tier (a folder named, or `-m unit`), not elsewhere."""
    tests = _suite(tmp_path, unit_test_cpu_s="1e-6")
    unit = _run(tests, "tests/sample/test_busy.py", "-m", "unit")
    assert unit.returncode == 1, unit.stdout + unit.stderr
    assert "test_busy.py::test_busy cost" in unit.stdout
    assert "a unit test costs under 1e-06" in unit.stdout
    folder = _run(tests, "tests/sample", "-k", "busy")
    assert folder.returncode == 1 and "test_busy.py::test_busy cost" in folder.stdout
    whole = _run(tests, "tests/sample/test_busy.py")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert _passed(whole) == {"test_busy", "test_busy_wiring"}


@pytest.mark.parametrize("workers", [0, 1], ids=["one process", "xdist"])
def test_the_cpu_recording_replaces_the_files_that_ran_and_keeps_the_rest(
    tmp_path: Path, workers: int
) -> None:
    tests = _suite(tmp_path)
    (tests / "test_kept.py").write_text("def test_kept() -> None:\n    pass\n", "utf-8")
    (tests / "cpu.json").write_text(
        json.dumps(
            {
                "tests/gone/test_removed.py": 1.0,
                "tests/test_kept.py": 7.0,
                "tests/sample/test_busy.py": 50.0,
            }
        ),
        encoding="utf-8",
    )
    run = _run(tests, "tests/sample", "--record-cpu", workers=workers)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "5 passed" in run.stdout  # every tier: a recording takes whole files
    recorded = json.loads((tests / "cpu.json").read_text(encoding="utf-8"))
    assert set(recorded) == {
        "tests/test_kept.py",
        "tests/sample/test_busy.py",
        "tests/sample/test_tiers_sample.py",
    }
    assert recorded["tests/test_kept.py"] == 7.0
    # Two sums cost some CPU, and far less than the 50 s recorded before.
    assert 0 < recorded["tests/sample/test_busy.py"] < 50


def test_recording_cpu_takes_whole_files(tmp_path: Path) -> None:
    tests = _suite(tmp_path)
    run = _run(tests, "tests/sample", "--record-cpu", "-k", "busy")
    assert run.returncode == 4, run.stdout + run.stderr
    assert "--record-cpu records whole files" in run.stderr
    assert json.loads((tests / "cpu.json").read_text(encoding="utf-8")) == {}
