"""Shared fixtures: a fresh metrics registry per test, free loopback ports, the CLI."""

from __future__ import annotations

import atexit
import functools
import gc
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.children import start_watchdog
from harness.servers import ClosedPort

if TYPE_CHECKING:
    # Imported where the fixture runs: the package's import is most of a pytest start that
    # needs none of it (the sample suites tests/project runs in pytest of their own).
    from monitor.telemetry import Telemetry

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

# litellm must never try to download its price map, in tests or in the subprocesses they start.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _private_home() -> None:
    """Give the tests (and every process they start) a home and XDG folders of their own,
    removed at exit, and turn third-party telemetry off: frameworks the tests drive write
    caches and telemetry ids into the home folder otherwise. `tests/run.sh` already sets
    HOME to a scratch folder; this covers a plain `pytest` too (xdist workers inherit it)."""
    if os.environ.get(_HOME_MARK):
        return
    home = Path(tempfile.mkdtemp(prefix="rag-monitor-tests-home-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ[_HOME_MARK] = str(home)
    os.environ["HOME"] = str(home)
    for variable, folder in (
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
    ):
        os.environ[variable] = str(home / folder)
    os.environ["DSPY_CACHEDIR"] = str(home / ".dspy_cache")
    for variable, value in TELEMETRY_OFF.items():
        os.environ[variable] = value


_HOME_MARK = "MONITOR_TESTS_HOME"
# Opt-outs the libraries the tests import honour.
TELEMETRY_OFF = {
    "HAYSTACK_TELEMETRY_ENABLED": "False",
    "ANONYMIZED_TELEMETRY": "False",
    "DO_NOT_TRACK": "1",
    "CREWAI_DISABLE_TELEMETRY": "true",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_OFFLINE": "1",
}
_private_home()
# Every server a test starts dies with this process, however it ends (harness/children.py);
# the watchdog starts here, on the main thread, whose death the kernel reports.
start_watchdog()


# Each test file's wall seconds (`tests/durations.json`, written beside `tests/cpu.json` by
# `--record-cpu`): only the order files start in (`pytest_collection_modifyitems`).
DURATIONS = REPO / "tests" / "durations.json"


def _durations() -> dict[str, float]:
    try:
        loaded = json.loads(DURATIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


# The tiers, classed by CPU seconds (what a file's tests cost this process and the processes
# they started and waited for: setup, call and teardown), which a loaded machine moves far
# less than wall time. `tests/cpu.json` records each file's (`--record-cpu`). `unit`, the
# default where a folder is named: a file recorded under UNIT_FILE_CPU_S (no real servers
# fit there), each folder's under UNIT_FOLDER_CPU_S together (test_tier_recording.py);
# a unit-tier run fails a unit test of UNIT_TEST_CPU_S or more. `e2e`: a file recorded at
# UNIT_FILE_CPU_S or more, or a test marked so (real servers, brokers, apps: wiring).
# `scorecard`, marked: statistical behaviour on a simulated clock.
TIERS = ("unit", "scorecard", "e2e")
CPU_RECORDING = REPO / "tests" / "cpu.json"
UNIT_FILE_CPU_S = 4.0
# Above the file's bound: CPU seconds move some with the machine's load too.
UNIT_TEST_CPU_S = 8.0
UNIT_FOLDER_CPU_S = 30.0


@functools.cache
def recorded_cpu() -> dict[str, float]:
    try:
        loaded = json.loads(CPU_RECORDING.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


def tier_of(item: pytest.Item) -> str:
    marked = next((tier for tier in TIERS[1:] if item.get_closest_marker(tier)), None)
    if marked is not None:
        return marked
    file = item.nodeid.split("::")[0]
    return "e2e" if recorded_cpu().get(file, 0.0) >= UNIT_FILE_CPU_S else "unit"


def selected_tier(config: pytest.Config) -> str | None:
    """The tier a run keeps (None: every test it collected): `--tier`, else the unit tier
    where a folder is among the paths named and no `-m` or recording was asked for. A named
    file or test runs whole; no path at all (`testpaths`, as `tests/run.sh` runs CI) too."""
    chosen: str | None = config.getoption("--tier")
    if chosen is not None:
        return None if chosen == "all" else chosen
    if config.getoption("markexpr"):
        return None
    if config.getoption("--record-cpu") or config.args_source != pytest.Config.ArgsSource.ARGS:
        return None
    here = config.invocation_params.dir
    named_folder = any((here / arg.split("::")[0]).is_dir() for arg in config.args)
    return "unit" if named_folder else None


def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "unit: the unit tier (set by tests/conftest.py on the tests of no other tier)",
        "scorecard: the scorecard tier: statistical behaviour on a simulated clock",
        "e2e: the end-to-end tier: real servers, brokers and apps (wiring)",
    ):
        config.addinivalue_line("markers", line)
    if config.getoption("--record-cpu") and (
        config.getoption("keyword") or config.getoption("markexpr") or config.getoption("--tier")
    ):
        raise pytest.UsageError("--record-cpu records whole files: no -k, -m or --tier")
    if CPU_FOLDER is not None and not os.environ.get("PYTEST_XDIST_WORKER"):
        # Made here, once, before the workers start: a worker that finds no folder when it
        # writes its first file would end the whole run with an internal error.
        try:
            Path(CPU_FOLDER).mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise pytest.UsageError(
                f"MONITOR_TESTS_CPU={CPU_FOLDER}: cannot make that folder ({error})"
            ) from error


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=(*TIERS, "all"),
        help="the tier to run (default: unit where a folder is named, all otherwise)",
    )
    parser.addoption(
        "--record-cpu",
        action="store_true",
        help="write the CPU seconds each test file costs to tests/cpu.json (the tiers), "
        "and its wall seconds to tests/durations.json (the order files start in)",
    )


@pytest.hookimpl(tryfirst=True)  # before `-k` and `-m` deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the unit tier, and start the files that take longest first: `tests/run.sh`
    gives each pytest worker one file at a time in collection order (`--dist loadfile
    --no-loadscope-reorder`), and a long file started last would run on alone while the
    other workers idle."""
    durations = _durations()
    for item in items:
        if tier_of(item) == "unit":
            item.add_marker(pytest.mark.unit)
    items.sort(key=lambda item: -durations.get(item.nodeid.split("::")[0], 0.0))
    tier = selected_tier(config)
    if tier is not None:
        left_out = [item for item in items if tier_of(item) != tier]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if tier_of(item) == tier]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """At a test's teardown, charge what it cost to its file (`_charge_cpu`)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    file = item.nodeid.split("::")[0]
    _wall_by_file[file] = _wall_by_file.get(file, 0.0) + report.duration
    if report.when == "teardown":
        _charge_cpu(item, report)


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _cpu_at_start[nodeid] = sum(_cpu_seconds())


def _charge_cpu(item: pytest.Item, report: pytest.TestReport) -> None:
    """Add what `item` cost to its file's; in a unit-tier run, fail a unit test that cost
    UNIT_TEST_CPU_S or more."""
    spent = sum(_cpu_seconds()) - _cpu_at_start.pop(item.nodeid, sum(_cpu_seconds()))
    file = item.nodeid.split("::")[0]
    _cpu_by_file[file] = _cpu_by_file.get(file, 0.0) + spent
    if spent < UNIT_TEST_CPU_S or tier_of(item) != "unit":
        return
    if selected_tier(item.config) == "unit" or item.config.getoption("markexpr") == "unit":
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} cost {spent:.1f} CPU seconds: a unit test costs under "
            f"{UNIT_TEST_CPU_S:g} and its file under {UNIT_FILE_CPU_S:g}. Make it cheaper, "
            "or record its file (`bash tests/run.sh --record-cpu FILE`: over the bound, the "
            "e2e tier), or mark it @pytest.mark.e2e; see CONTRIBUTING.md."
        )


_cpu_at_start: dict[str, float] = {}
# File -> CPU seconds and wall seconds its tests cost in this process (`--record-cpu`).
_cpu_by_file: dict[str, float] = {}
_wall_by_file: dict[str, float] = {}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """Under xdist the workers run the tests: what their files cost comes back with them."""
    output = getattr(node, "workeroutput", {})
    for mine, theirs in ((_cpu_by_file, "cpu"), (_wall_by_file, "wall")):
        for file, seconds in output.get(theirs, {}).items():  # `--dist load` splits files
            mine[file] = mine.get(file, 0.0) + seconds


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if not config.getoption("--record-cpu"):
        return
    if hasattr(config, "workerinput"):
        config.workeroutput["cpu"] = _cpu_by_file  # type: ignore[attr-defined]
        config.workeroutput["wall"] = _wall_by_file  # type: ignore[attr-defined]
    else:
        record_cpu(_cpu_by_file, CPU_RECORDING)
        record_cpu(_wall_by_file, DURATIONS)


def record_cpu(ran: dict[str, float], recording: Path) -> None:
    """Each file that ran replaces its seconds in `recording`; a file that no longer exists
    is dropped."""
    try:
        kept = json.loads(recording.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        kept = {}
    kept = {file: seconds for file, seconds in kept.items() if (REPO / file).exists()}
    kept.update({file: round(seconds, 1) for file, seconds in ran.items()})
    recording.write_text(json.dumps(kept, indent=0, sort_keys=True) + "\n", encoding="utf-8")


# With MONITOR_TESTS_CPU set to a folder, each test process writes there, after each test
# file, a JSON object of file -> [CPU seconds of the process, CPU seconds of the processes
# it started and waited for, wall seconds, tests]: where a run's CPU goes (a file stays on
# one worker, so its servers are reaped within it).
CPU_FOLDER = os.environ.get("MONITOR_TESTS_CPU")
_cpu: dict[str, list[float]] = {}


def _cpu_seconds() -> tuple[float, float]:
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if CPU_FOLDER is None:
        yield
        return
    (own, children), started = _cpu_seconds(), time.monotonic()
    yield
    (own_after, children_after), file = _cpu_seconds(), item.nodeid.split("::")[0]
    row = _cpu.setdefault(file, [0.0, 0.0, 0.0, 0])
    row[0] += own_after - own
    row[1] += children_after - children
    row[2] += time.monotonic() - started
    row[3] += 1
    if nextitem is None or nextitem.nodeid.split("::")[0] != file:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(CPU_FOLDER, f"{worker}.json").write_text(json.dumps(_cpu, indent=0), "utf-8")


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    """Collect with the garbage collector paused: importing the test modules and the
    libraries they import creates millions of objects, and the full collections their
    number triggers walk them all again and again (about half of what collecting the
    whole suite costs, in each xdist worker). `pytest_collection_finish` collects once
    and freezes what is left."""
    was_on = gc.isenabled()
    gc.disable()
    yield  # an old-style hook wrapper: what collection raised comes in the outcome, not here
    if was_on:
        gc.enable()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what exists after collection out of the garbage collector: the collection
    after every test (`_collect_garbage`) would otherwise walk the large heaps of the
    libraries the test modules imported every time. Objects the tests create are
    collected and checked as before."""
    _freeze()


def _freeze() -> None:
    gc.collect()
    gc.freeze()
    _frozen_with[0] = len(sys.modules)


# How many modules were loaded at the last `_freeze`.
_frozen_with = [0]


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    """Collect garbage after each test, so that a ResourceWarning (an unclosed file or
    socket, an error under filterwarnings) lands on the test that leaked it. After a test
    that loaded modules (a library the code imports when first used: litellm, a
    detector's), what survives that collection is frozen too, as after collection:
    otherwise every later collection in this process walks those libraries' heaps."""
    yield
    if len(sys.modules) > _frozen_with[0]:
        _freeze()
    else:
        gc.collect()


@pytest.fixture
def telemetry() -> Telemetry:
    from monitor.telemetry import create_telemetry

    return create_telemetry()


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port that refuses connections for the test's length (`ClosedPort`)."""
    with ClosedPort() as closed:
        yield closed.port


@pytest.fixture
def cli() -> list[str]:
    """The command that runs rag-monitor from this checkout."""
    return [sys.executable, "-m", "monitor"]
