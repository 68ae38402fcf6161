"""Real servers for the tests: `rag-monitor run` as a process, Alertmanager / Prometheus
processes, and a webhook receiver (a real HTTP server in a thread that records every JSON
body); plus polling with a deadline.

Servers choose their own ports: each is told to listen on port 0 and the port it bound is
read back from its log (`rag-monitor run` logs the port of each listener, Prometheus and
Alertmanager log `Listening on`). No port is picked and then released for someone else to
bind: a port that must refuse connections is held bound, unlistened, for as long as it is
used (`closed_port`); a program that cannot bind port 0 and report it (rotel, the Kafka
brokers) is started again on another port when another process took its port first
(`start_on_a_port`).

Binaries come from the Debian packages `prometheus` (prometheus, promtool) and
`prometheus-alertmanager` (prometheus-alertmanager, amtool); tests skip only when the
binary is missing locally — `.ci/run` installs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest

from harness.children import forget, spawn
from harness.wait import SERVER_START_S, wait_until

REPO = Path(__file__).resolve().parents[1]
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


class ClosedPort:
    """A loopback port that refuses connections until `release` (or the end of a `with`
    block): bound, never listened on, so nothing else can listen on it meanwhile."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])

    def release(self) -> None:
        """Let a server of the test's own bind the port: from here until it binds, another
        process could take the port (`start_on_a_port` where the test can use another)."""
        self._sock.close()

    def __enter__(self) -> ClosedPort:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class PortTaken(Exception):
    """A program exited before it listened on the port it was given."""


T = TypeVar("T")


def start_on_a_port(start: Callable[..., T], count: int = 1, attempts: int = 5) -> T:
    """`start(port, ...)` for a program that cannot bind port 0 and report the port: with
    `count` ports the kernel hands out as unused; when `start` raises `PortTaken` (another
    process bound one of them between the kernel's answer and the program's bind), again
    with others."""
    attempt = 1
    while True:
        with contextlib.ExitStack() as stack:
            probes = [stack.enter_context(socket.socket()) for _ in range(count)]
            for probe in probes:
                probe.bind(("127.0.0.1", 0))
            ports = [int(probe.getsockname()[1]) for probe in probes]
        try:
            return start(*ports)
        except PortTaken:
            if attempt == attempts:
                raise
            attempt += 1


@dataclass
class Rotel:
    """A running rotel-agent and its OTLP receivers' ports."""

    process: subprocess.Popen[bytes]
    grpc_port: int
    http_port: int

    def stop(self) -> None:
        stop_process(self.process, 10)


def start_rotel(exporter_args: list[str], log: Path, timeout_s: float = SERVER_START_S) -> Rotel:
    """rotel-agent with its OTLP receivers on loopback and `exporter_args`, once both
    listen. rotel cannot bind port 0 (it panics): a port another process took first makes
    it exit before it listens, and it is started again on others (`start_on_a_port`)."""
    import rotel

    binary = Path(rotel.__file__).parent / "rotel-agent"

    def started(grpc_port: int, http_port: int) -> Rotel:
        with log.open("ab") as out:  # the child keeps its own copy of the descriptor
            process = spawn(
                [
                    str(binary), "start",
                    "--otlp-grpc-endpoint", f"127.0.0.1:{grpc_port}",
                    "--otlp-http-endpoint", f"127.0.0.1:{http_port}",
                    *exporter_args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

        def listening() -> bool:
            if process.poll() is not None:
                return True
            for port in (grpc_port, http_port):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True

        wait_until(
            listening,
            timeout_s,
            "rotel to listen",
            errors=(OSError,),
            context=lambda: log.read_text(errors="replace"),
        )
        if process.poll() is not None:
            forget(process)
            raise PortTaken(f"rotel exited:\n{log.read_text(errors='replace')[-2000:]}")
        return Rotel(process, grpc_port, http_port)

    return start_on_a_port(started, count=2)


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
        # When each body arrived (time.monotonic()).
        self.received: list[float] = []
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
                        hook.received.append(time.monotonic())
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


def logged_port(log: str, pattern: re.Pattern[str]) -> int | None:
    """The port in the first line of `log` that `pattern` (one group: the port) matches."""
    found = pattern.search(log)
    return int(found.group(1)) if found else None


# The Prometheus exporter toolkit's line, in Prometheus and Alertmanager alike.
_TOOLKIT_LISTENING = re.compile(r'msg="Listening on" address=\S+:(\d+)')


class Process:
    """A Prometheus-toolkit server (Prometheus, Alertmanager) started on port 0; `base` is
    its URL once `wait_ready` has read the bound port from its log."""

    def __init__(self, name: str, args: list[str], log: Path) -> None:
        self.name = name
        self.log = log
        self.base = ""
        with log.open("wb") as out:  # the child keeps its own copy of the descriptor
            self.proc = spawn(args, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = SERVER_START_S) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            port = logged_port(self.log.read_text(errors="replace"), _TOOLKIT_LISTENING)
            if port is None:
                return False
            self.base = f"http://127.0.0.1:{port}"
            with urllib.request.urlopen(f"{self.base}/-/ready", timeout=2) as resp:
                return bool(resp.status == 200)

        try:
            wait_until(ready, timeout, f"{self.name} readiness", interval_s=0.2, errors=_NOT_YET)
        except AssertionError:
            print(self.log.read_text()[-3000:])
            raise

    def stop(self) -> None:
        stop_process(self.proc, 10)


def stop_process(proc: subprocess.Popen[Any], timeout: float) -> int:
    """SIGTERM, then SIGKILL if it has not exited within `timeout`; the exit code. A
    process `spawn` started is then forgotten by the watchdog."""
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
        return proc.wait()
    finally:
        forget(proc)


@contextlib.contextmanager
def _serving(name: str, argv: list[str], tmp: Path) -> Iterator[str]:
    """Run `argv` until it is ready; yield its base URL; stop it afterwards."""
    proc = Process(name, argv, tmp / f"{name}.log")
    try:
        proc.wait_ready()
        yield proc.base
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
    """Alertmanager sending every alert to `webhook_url`; yields its base URL."""
    config = tmp / "alertmanager.yml"
    config.write_text(alertmanager_config(webhook_url))
    with alertmanager_of(tmp, config) as base:
        yield base


@contextlib.contextmanager
def alertmanager_of(tmp: Path, config: Path) -> Iterator[str]:
    """Alertmanager with the config file `config`; yields its base URL."""
    binary = need("prometheus-alertmanager")
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.path={tmp / 'am-data'}",
        "--web.listen-address=127.0.0.1:0",
        "--cluster.listen-address=",
        "--log.level=info",  # for the "Listening on" line
    ]
    with _serving("alertmanager", argv, tmp) as base:
        yield base


@contextlib.contextmanager
def prometheus(tmp: Path, config_text: str, *extra_args: str) -> Iterator[str]:
    binary = need("prometheus")
    config = tmp / "prometheus.yml"
    config.write_text(config_text)
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp / 'prom-data'}",
        "--web.listen-address=127.0.0.1:0",
        "--rules.alert.resend-delay=1s",
        "--log.level=info",  # for the "Listening on" line
        *extra_args,
    ]
    with _serving("prometheus", argv, tmp) as base:
        yield base


# The lines `rag-monitor run` logs when each listener is up, with the port it bound.
_MONITOR_LISTENING = {
    "metrics": re.compile(r"metrics on https?://\S+?:(\d+)/metrics"),
    "grpc": re.compile(r"OTLP/gRPC receiver listening on \S+ \(port (\d+)"),
    "http": re.compile(r"OTLP/HTTP receiver listening on \S+?:(\d+)/"),
}


@dataclass(frozen=True)
class MonitorPorts:
    """The ports a `rag-monitor run` process bound (None: that receiver is off)."""

    metrics: int
    grpc: int | None
    http: int | None


def monitor_ports(log: str) -> dict[str, int]:
    """The listeners `rag-monitor run` has logged as up so far, by name, with their port."""
    ports = {}
    for name, pattern in _MONITOR_LISTENING.items():
        port = logged_port(log, pattern)
        if port is not None:
            ports[name] = port
    return ports


@contextlib.contextmanager
def rag_monitor(tmp: Path, config: Path, metrics_port: int | None = None) -> Iterator[MonitorPorts]:
    """`rag-monitor run --config CONFIG` as a process, until /readyz answers 200; yields the
    ports it listens on. Configure its listeners on port 0: the ports are read from its log
    (`metrics_port`, when the config fixes one, is only checked against what it logs)."""
    log = tmp / "monitor.log"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with log.open("w") as out:
        proc = spawn(
            [sys.executable, "-m", "monitor", "run", "--config", str(config)],
            cwd=REPO,
            env=env,
            stderr=out,
        )
        try:
            wait_until(
                lambda: _ready(proc, log),
                SERVER_START_S,
                "rag-monitor /readyz",
                interval_s=0.2,
                errors=_NOT_YET,
            )
            ports = monitor_ports(log.read_text(errors="replace"))
            assert metrics_port in (None, ports["metrics"]), (metrics_port, ports)
            yield MonitorPorts(ports["metrics"], ports.get("grpc"), ports.get("http"))
        finally:
            stop_process(proc, 60)
    assert proc.returncode == 0, log.read_text()[-3000:]


def _ready(proc: subprocess.Popen[bytes], log: Path) -> bool:
    if proc.poll() is not None:
        text = log.read_text(errors="replace")
        if "address already in use" in text.lower():  # a fixed port another process took
            raise PortTaken(text[-3000:])
        raise AssertionError(f"rag-monitor exited:\n{text[-3000:]}")
    port = monitor_ports(log.read_text(errors="replace")).get("metrics")
    if port is None:
        return False
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as resp:
        return bool(resp.status == 200)
