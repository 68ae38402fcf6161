"""A listener that cannot bind stops `rag-monitor run` with one line naming the config key
to change: the OTLP/gRPC receiver (gRPC raises `RuntimeError` and its C core writes its own
lines), the OTLP/HTTP receiver and the metrics port. The port is bound here first."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

KEYS = (
    "receivers.otlp.grpc.endpoint",
    "receivers.otlp.http.endpoint",
    "exporters.prometheus.endpoint",
)


@pytest.fixture
def taken() -> Iterator[int]:
    """A port something else listens on (as the Collector would on 4317)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def _config(tmp_path: Path, busy_key: str, port: int) -> Path:
    endpoints = {key: "127.0.0.1:0" for key in KEYS}
    endpoints[busy_key] = f"127.0.0.1:{port}"
    config = {
        "receivers": {
            "otlp": {
                "grpc": {"endpoint": endpoints["receivers.otlp.grpc.endpoint"]},
                "http": {"endpoint": endpoints["receivers.otlp.http.endpoint"]},
            }
        },
        "exporters": {"prometheus": {"endpoint": endpoints["exporters.prometheus.endpoint"]}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("key", KEYS)
def test_a_busy_port_is_one_line_naming_the_key(
    key: str, taken: int, tmp_path: Path, cli: list[str]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_MONITOR_", "GRPC_"))}
    result = subprocess.run(
        [*cli, "--log-format", "json", "run", "--config", str(_config(tmp_path, key, taken))],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 1 and result.stdout == ""
    logged = [json.loads(line) for line in result.stderr.splitlines()]  # no traceback, no C lines
    problems = [entry for entry in logged if entry["level"] != "INFO"]
    assert [entry["message"] for entry in problems] == [
        f"cannot start: {key}: cannot listen on 127.0.0.1:{taken} (address already in use); "
        f"set {key} to a free address"
    ]
    assert problems[0]["level"] == "ERROR" and "exception" not in problems[0]
