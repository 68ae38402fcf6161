"""Shared fixtures: a fresh metrics registry per test, free loopback ports, the CLI."""

from __future__ import annotations

import gc
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
