"""Shared fixtures: a fresh metrics registry per test, free loopback ports, the CLI."""

from __future__ import annotations

import gc
import importlib
import os
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from monitor.telemetry import Telemetry, create_telemetry

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

# litellm must never try to download its price map, in tests or in the subprocesses they start.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


# The files that take longest, longest first. `tests/run.sh` gives each pytest worker one
# file at a time in collection order (`--dist loadfile --no-loadscope-reorder`); starting
# these first keeps one of them from starting last and running on alone while the other
# workers idle. A file missing from the list only loses its place.
SLOW_FILES = (
    "tests/judge/test_judge_real_model.py",
    "tests/alerts/test_alerts_regression_e2e.py",
    "tests/service/test_cli.py",
    "tests/receivers/test_kafka.py",
    "tests/frameworks/test_frameworks_real.py",
    "tests/config/test_config.py",
    "tests/judge/test_judge_tlm_real.py",
    "tests/judge/test_judge_tlm.py",
    "tests/service/test_otlp_faults.py",
    "tests/frameworks/test_frameworks_agents.py",
    "tests/service/test_security.py",
    "tests/receivers/test_replay.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the tests of `SLOW_FILES` to the front, in that order; the rest keep theirs."""
    rank = {name: i for i, name in enumerate(SLOW_FILES)}

    def key(item: pytest.Item) -> int:
        path = item.path.relative_to(REPO).as_posix()
        return rank.get(path, len(SLOW_FILES))

    items.sort(key=key)  # stable: the order inside a file, and of the other files, stays


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what exists after collection out of the garbage collector: the collection
    after every test (`_collect_garbage`) would otherwise walk the large heaps of the
    libraries the tests import (litellm's above all, imported here once) every time.
    Objects the tests create are collected and checked as before."""
    importlib.import_module("litellm")
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    """Collect garbage after each test, so that a ResourceWarning (an unclosed file or
    socket, an error under filterwarnings) lands on the test that leaked it."""
    yield
    gc.collect()


@pytest.fixture
def telemetry() -> Telemetry:
    return create_telemetry()


@pytest.fixture
def free_port() -> Callable[[], int]:
    def pick() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    return pick


@pytest.fixture
def cli() -> list[str]:
    """The command that runs rag-monitor from this checkout."""
    return [sys.executable, "-m", "monitor"]
