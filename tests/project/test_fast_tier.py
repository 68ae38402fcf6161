"""The fast tier stays fast: a test missing from `tests/durations.json` that takes the slow
tier's time fails a `-m "not slow"` run (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DURATIONS, defined_tests, gone

REPO = Path(__file__).resolve().parents[2]


def _suite(tmp_path: Path, recorded: dict[str, float]) -> Path:
    """A copy of the project's conftest with the slow threshold at a microsecond (every test
    takes longer), beside two tests and a recording of `recorded`."""
    tests = tmp_path / "tests"
    tests.mkdir(parents=True)
    conftest = (REPO / "tests" / "conftest.py").read_text(encoding="utf-8")
    assert "\nSLOW_S = 3.0\n" in conftest
    (tests / "conftest.py").write_text(
        conftest.replace("\nSLOW_S = 3.0\n", "\nSLOW_S = 1e-6\n"), encoding="utf-8"
    )
    (tests / "test_sample.py").write_text(
        "def test_listed() -> None:\n    pass\n\n\ndef test_unlisted() -> None:\n    pass\n",
        encoding="utf-8",
    )
    (tests / "durations.json").write_text(json.dumps(recorded), encoding="utf-8")
    return tests


def _run(
    tests: Path,
    *args: str,
    workers: int = 0,
    target: str = "test_sample.py",
    environment: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """pytest over `target` in the sample, in one process or (`workers`) on that many xdist
    workers as `tests/run.sh` runs it, with `environment` added to its own."""
    outer = {k: v for k, v in os.environ.items() if k != "MONITOR_TESTS_CPU"}
    env = {**outer, "PYTHONPATH": str(REPO), **(environment or {})}
    xdist = ["-n", str(workers), "--dist", "loadfile"] if workers else ["-p", "no:xdist"]
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            # The sample needs none of these; loading them is most of what a start costs.
            "-p",
            "no:hypothesispytest",
            "-p",
            "no:cloudcoil",
            "-p",
            "no:anyio",
            *xdist,
            "-p",
            "no:randomly",
            str(tests / target),
            *args,
        ],
        cwd=tests.parent,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_an_unlisted_test_past_the_threshold_fails_the_fast_tier(tmp_path: Path) -> None:
    # Both run in the fast tier (the listed one was recorded at 0 s, the unlisted one is
    # unknown); each takes longer than the threshold, and only the unlisted one fails.
    tests = _suite(tmp_path, {"tests/test_sample.py::test_listed": 0.0})
    run = _run(tests, "-m", "not slow")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "test_unlisted took" in run.stdout
    assert "is not in tests/durations.json" in run.stdout
    assert "test_listed took" not in run.stdout
    assert "2 passed, 1 error" in run.stdout


def test_the_whole_run_and_a_recorded_test_are_not_held_to_it(tmp_path: Path) -> None:
    tests = _suite(
        tmp_path,
        {"tests/test_sample.py::test_listed": 0.0, "tests/test_sample.py::test_unlisted": 0.0},
    )
    fast = _run(tests, "-m", "not slow")
    assert fast.returncode == 0, fast.stdout + fast.stderr
    tests = _suite(tmp_path / "unrecorded", {})
    whole = _run(tests)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "2 passed" in whole.stdout


def test_where_a_runs_cpu_goes_is_written_per_file_when_asked(tmp_path: Path) -> None:
    """`MONITOR_TESTS_CPU`: each test process writes the CPU seconds of each file it ran,
    beside its wall seconds and tests; without it, nothing is written."""
    tests = _suite(tmp_path, {})
    (tests / "test_busy.py").write_text(
        "def test_busy() -> None:\n    assert sum(range(3 * 10**7)) > 0\n", encoding="utf-8"
    )
    folder = tmp_path / "cpu"
    folder.mkdir()
    quiet = _run(tests, target=".")
    assert quiet.returncode == 0 and list(folder.iterdir()) == [], quiet.stdout + quiet.stderr
    run = _run(tests, target=".", workers=1, environment={"MONITOR_TESTS_CPU": str(folder)})
    assert run.returncode == 0, run.stdout + run.stderr
    (written,) = folder.iterdir()
    assert written.name == "gw0.json"
    rows = json.loads(written.read_text(encoding="utf-8"))
    assert set(rows) == {"tests/test_busy.py", "tests/test_sample.py"}
    own, started, wall, count = rows["tests/test_busy.py"]
    assert count == 1 and own > rows["tests/test_sample.py"][0] and started >= 0 and wall > 0
    assert rows["tests/test_sample.py"][3] == 2


@pytest.mark.parametrize("workers", [0, 1], ids=["one process", "xdist"])
def test_recording_refreshes_what_ran_and_keeps_the_rest(tmp_path: Path, workers: int) -> None:
    tests = _suite(
        tmp_path,
        {
            "tests/test_gone.py::test_removed": 1.0,
            "tests/test_sample.py::test_moved_away": 200.0,
            "tests/test_sample.py::test_moved_away[param]": 200.0,
            "tests/test_sample.py::test_listed[a renamed parameter]": 5.0,
            "tests/test_sample.py::test_unlisted": 7.0,
        },
    )
    run = _run(tests, "--record-durations", "-k", "test_listed", workers=workers)
    assert run.returncode == 0, run.stdout + run.stderr
    recorded = json.loads((tests / "durations.json").read_text(encoding="utf-8"))
    # The test that ran is recorded, the one deselected keeps its figure, and those whose
    # file is gone or no longer defines them (moved to another file, renamed, a parameter
    # renamed) are dropped, though `-k` selected only some of that file's tests.
    assert set(recorded) == {
        "tests/test_sample.py::test_listed",
        "tests/test_sample.py::test_unlisted",
    }
    assert recorded["tests/test_sample.py::test_unlisted"] == 7.0


def test_every_test_of_the_run_is_recorded_and_every_recorded_test_still_exists(
    request: pytest.FixtureRequest,
) -> None:
    """`tests/durations.json` classes the tests this run runs (the whole suite in a whole run),
    and names no test that the files the run collected no longer define: an unrecorded test
    would be ordered and tiered as if it took no time, a stale one would weigh on its file."""
    if request.config.getoption("--record-durations"):
        pytest.skip("this run writes the recording")
    recorded = json.loads(DURATIONS.read_text(encoding="utf-8"))
    items = request.session.items
    unrecorded = sorted(item.nodeid for item in items if item.nodeid not in recorded)
    defined = defined_tests(items)
    stale = sorted(test for test in recorded if gone(test, defined))
    assert (unrecorded, stale) == ([], []), (
        "tests/durations.json is out of date: refresh it with `bash tests/run.sh "
        f"--record-durations` over the files named (unrecorded: {unrecorded}; gone: {stale})"
    )


def test_recording_over_one_test_keeps_the_others_of_its_file(tmp_path: Path) -> None:
    """A run that names one test of a file (`FILE::TEST`) says nothing of the rest."""
    tests = _suite(
        tmp_path,
        {
            "tests/test_sample.py::test_listed[another case]": 5.0,
            "tests/test_sample.py::test_unlisted": 7.0,
        },
    )
    run = _run(tests, "--record-durations", target="test_sample.py::test_listed")
    assert run.returncode == 0, run.stdout + run.stderr
    recorded = json.loads((tests / "durations.json").read_text(encoding="utf-8"))
    assert set(recorded) == {
        "tests/test_sample.py::test_listed",
        "tests/test_sample.py::test_listed[another case]",
        "tests/test_sample.py::test_unlisted",
    }
