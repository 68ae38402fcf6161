"""Real servers for the tests: `rag-monitor run` as a process, Alertmanager / Prometheus
processes, and a webhook receiver (a real HTTP server in a thread that records every JSON
body); plus free loopback ports and polling with a deadline.

Binaries come from the Debian packages `prometheus` (prometheus, promtool) and
`prometheus-alertmanager` (prometheus-alertmanager, amtool); tests skip only when the
binary is missing locally — `.ci/run` installs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests._wait import wait_until

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"


def need(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        pytest.skip(
            f"{binary} is not installed (Debian packages prometheus, prometheus-alertmanager)"
        )
    return path


# What a server that is still starting answers with (wait_until keeps waiting).
_NOT_YET = (OSError, urllib.error.URLError, ValueError, KeyError)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_json(url: str, data: Any = None, headers: dict[str, str] | None = None) -> Any:
    body = None if data is None else json.dumps(data).encode()
    req = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json", **(headers or {})}
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read() or b"null")


class Webhook:
    """Records each POSTed JSON body; answers with the next status in `statuses` (then 200)."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        self.statuses: list[int] = []
        self.lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with hook.lock:
                    status = hook.statuses.pop(0) if hook.statuses else 200
                    if status == 200:
                        hook.bodies.append(json.loads(raw))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def alerts(self) -> list[dict[str, Any]]:
        with self.lock:
            return [a for body in self.bodies for a in body.get("alerts", [])]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    try:
        yield hook
    finally:
        hook.close()


class Process:
    def __init__(self, name: str, args: list[str], log: Path, ready_url: str) -> None:
        self.name = name
        self.log = log
        self.ready_url = ready_url
        with log.open("wb") as out:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 60) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            with urllib.request.urlopen(self.ready_url, timeout=2) as resp:
                return bool(resp.status == 200)

        try:
            wait_until(ready, timeout, f"{self.name} readiness", interval_s=0.2, errors=_NOT_YET)
        except AssertionError:
            print(self.log.read_text()[-3000:])
            raise

    def stop(self) -> None:
        stop_process(self.proc, 10)


def stop_process(proc: subprocess.Popen[Any], timeout: float) -> int:
    """SIGTERM, then SIGKILL if it has not exited within `timeout`; the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


@contextlib.contextmanager
def _serving(name: str, argv: list[str], tmp: Path, base: str) -> Iterator[str]:
    """Run `argv` until `base`/-/ready answers; yield `base`; stop it afterwards."""
    proc = Process(name, argv, tmp / f"{name}.log", f"{base}/-/ready")
    try:
        proc.wait_ready()
        yield base
    finally:
        proc.stop()


def alertmanager_config(webhook_url: str) -> str:
    return f"""
route:
  receiver: hook
  group_by: [alertname, service]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: {webhook_url}
        send_resolved: true
"""


@contextlib.contextmanager
def alertmanager(tmp: Path, webhook_url: str) -> Iterator[str]:
    binary = need("prometheus-alertmanager")
    port = free_port()
    config = tmp / "alertmanager.yml"
    config.write_text(alertmanager_config(webhook_url))
    base = f"http://127.0.0.1:{port}"
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.path={tmp / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
        "--log.level=warn",
    ]
    with _serving("alertmanager", argv, tmp, base):
        yield base


@contextlib.contextmanager
def prometheus(tmp: Path, config_text: str, *extra_args: str) -> Iterator[str]:
    binary = need("prometheus")
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(config_text)
    base = f"http://127.0.0.1:{port}"
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp / 'prom-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--rules.alert.resend-delay=1s",
        "--log.level=warn",
        *extra_args,
    ]
    with _serving("prometheus", argv, tmp, base):
        yield base


@contextlib.contextmanager
def rag_monitor(tmp: Path, config: Path, metrics_port: int) -> Iterator[None]:
    """`rag-monitor run --config CONFIG` as a process, until /readyz answers 200."""
    log = tmp / "monitor.log"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor", "run", "--config", str(config)],
            cwd=REPO,
            env=env,
            stderr=out,
        )
        try:
            wait_until(
                lambda: _ready(proc, metrics_port, log),
                60,
                "rag-monitor /readyz",
                interval_s=0.2,
                errors=_NOT_YET,
            )
            yield
        finally:
            stop_process(proc, 60)
    assert proc.returncode == 0, log.read_text()[-3000:]


def _ready(proc: subprocess.Popen[bytes], port: int, log: Path) -> bool:
    if proc.poll() is not None:
        raise AssertionError(f"rag-monitor exited:\n{log.read_text()[-3000:]}")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as resp:
        return bool(resp.status == 200)
