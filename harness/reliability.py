"""Helpers for the reliability and security tests: a `rag-monitor run` subprocess on
loopback ports it chooses itself, raw OTLP export requests built with the protobuf classes, and plain
HTTP/gRPC senders. Nothing here fakes a monitor component."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from prometheus_client.parser import text_string_to_metric_families

from harness.children import forget, spawn
from harness.servers import monitor_ports
from harness.wait import CONDITION_S, SERVER_START_S, wait_until

REPO = Path(__file__).resolve().parents[1]
GRPC_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PROTO = {"Content-Type": "application/x-protobuf"}


@dataclass(frozen=True)
class Trace:
    """One RAG request as two spans in the plain `rag.*` convention."""

    trace_id: bytes
    query: str = "What is the boiling point of water at sea level?"
    context: tuple[str, ...] = (
        "At sea level, water boils at 100 degrees Celsius (212 degrees Fahrenheit).",
    )
    response: str = "Water boils at 100 degrees Celsius at sea level."
    service: str = "rag-api"
    route: str = "/ask"


def trace_ids(prefix: int, n: int) -> list[bytes]:
    """`n` distinct 16-byte trace ids; `prefix` separates the batches of one test."""
    return [(prefix + 1).to_bytes(8, "big") + (i + 1).to_bytes(8, "big") for i in range(n)]


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def export_request(traces: list[Trace], parts: str = "both") -> bytes:
    """An `ExportTraceServiceRequest` body holding every trace, one resource per service;
    `parts` is "both", "child" (the retrieval span only) or "root" (the root only)."""
    request = ExportTraceServiceRequest()
    by_service: dict[str, list[Trace]] = {}
    for t in traces:
        by_service.setdefault(t.service, []).append(t)
    now = time.time_ns()
    for service, group in by_service.items():
        scope = ScopeSpans()
        for t in group:
            root_id = t.trace_id[12:16] + b"\x00\x00\x00\x01"
            child_id = t.trace_id[12:16] + b"\x00\x00\x00\x02"
            docs = json.dumps(
                [{"content": c, "doc_uri": f"kb/{i}"} for i, c in enumerate(t.context)]
            )
            spans = []
            spans.append(
                Span(
                    trace_id=t.trace_id,
                    span_id=child_id,
                    parent_span_id=root_id,
                    name="search",
                    start_time_unix_nano=now,
                    end_time_unix_nano=now + 1000,
                    attributes=[_kv("rag.context", docs)],
                )
            )
            spans.append(
                Span(
                    trace_id=t.trace_id,
                    span_id=root_id,
                    name="handle_question",
                    kind=Span.SPAN_KIND_SERVER,
                    start_time_unix_nano=now,
                    end_time_unix_nano=now + 5000,
                    attributes=[
                        _kv("rag.query", t.query),
                        _kv("rag.response", t.response),
                        _kv("http.route", t.route),
                    ],
                )
            )
            keep = {"both": spans, "child": spans[:1], "root": spans[1:]}[parts]
            scope.spans.extend(keep)
        request.resource_spans.append(
            ResourceSpans(
                resource=Resource(attributes=[_kv("service.name", service)]),
                scope_spans=[scope],
            )
        )
    data: bytes = request.SerializeToString()
    return data


@dataclass
class HttpReply:
    status: int
    headers: dict[str, str]
    body: bytes


def post(port: int, body: bytes, headers: dict[str, str] | None = None) -> HttpReply:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces",
        data=body,
        headers=headers if headers is not None else PROTO,
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return HttpReply(r.status, dict(r.headers), r.read())
    except urllib.error.HTTPError as e:
        with e:  # an HTTP error holds the response (and its socket) open
            return HttpReply(e.code, dict(e.headers), e.read())


def grpc_export(
    port: int, body: bytes, metadata: tuple[tuple[str, str], ...] = ()
) -> tuple[grpc.StatusCode, str]:
    """One raw `TraceService/Export` call; returns (status code, details)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(GRPC_METHOD)
        try:
            call(body, timeout=30, metadata=metadata)
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


def proc_memory_kb(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM (peak) of a live process, from /proc."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def reset_peak_rss(pid: int) -> None:
    """Set a live process's VmHWM back to its current VmRSS (Linux ≥ 4.0), so that a later
    VmHWM is the peak since this call: the kernel keeps it, no polling can miss it."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def results_lines(path: Path, *, writing: bool) -> list[dict[str, Any]]:
    """The lines of a results file. While a monitor is `writing` it, the text after the
    last newline is a line being written and is left out; once the monitor has stopped, a
    line without its newline is a torn write and fails to parse."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    if writing:
        text = text[: text.rfind("\n") + 1]
    return [json.loads(raw) for raw in text.splitlines() if raw.strip()]


@dataclass
class MonitorProcess:
    """`python -m monitor run` on loopback, stderr captured to a file. A port left at 0 is
    chosen by the monitor and read from its log by `start`; give the ports of an earlier
    process to restart on the same ones."""

    tmp: Path
    config: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    grpc_port: int = 0
    http_port: int = 0
    metrics_port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def results(self) -> Path:
        return self.tmp / "results.jsonl"

    @property
    def log_path(self) -> Path:
        return self.tmp / "monitor.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _full_config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = json.loads(json.dumps(self.config))
        otlp = cfg.setdefault("receivers", {}).setdefault("otlp", {})
        otlp.setdefault("grpc", {})["endpoint"] = f"127.0.0.1:{self.grpc_port}"
        otlp.setdefault("http", {})["endpoint"] = f"127.0.0.1:{self.http_port}"
        exporters = cfg.setdefault("exporters", {})
        exporters.setdefault("prometheus", {})["endpoint"] = f"127.0.0.1:{self.metrics_port}"
        exporters.setdefault("results_file", str(self.results))
        return cfg

    def start(self, timeout: float = SERVER_START_S, wait_path: str = "/readyz") -> MonitorProcess:
        path = self.tmp / "config.yaml"
        path.write_text(yaml.safe_dump(self._full_config()))
        args = ["run", "--config", str(path)]
        command = [sys.executable, "-m", "monitor", *args]
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **self.env}
        with self.log_path.open("ab") as log:
            offset = log.tell()  # a restarted monitor appends: read only its own lines
            self.proc = spawn(command, cwd=REPO, env=env, stderr=log)
        proc = self.proc

        def answers() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"monitor did not start:\n{self.log()}")
            # /healthz answers before the receivers are up: wait for their lines too.
            logged = monitor_ports(self.log_path.read_bytes()[offset:].decode(errors="replace"))
            if not {"metrics", "grpc", "http"} <= logged.keys():
                return False
            url = f"http://127.0.0.1:{logged['metrics']}{wait_path}"
            with urllib.request.urlopen(url, timeout=1):
                pass
            self.metrics_port, self.grpc_port, self.http_port = (
                logged["metrics"],
                logged["grpc"],
                logged["http"],
            )
            return True

        try:
            wait_until(
                answers, timeout, f"{wait_path} to answer", interval_s=0.1, errors=(OSError,)
            )
        except BaseException:
            self.kill()
            raise
        return self

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def metrics_text(self, accept: str | None = None) -> str:
        return self.get("/metrics", {"Accept": accept} if accept else {})

    def get(self, path: str, headers: dict[str, str] | None = None) -> str:
        """GET on the metrics endpoint; the body whatever the status."""
        url = f"http://127.0.0.1:{self.metrics_port}{path}"
        request = urllib.request.Request(url, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return str(r.read().decode())
        except urllib.error.HTTPError as e:
            with e:
                return str(e.read().decode())

    def samples(self) -> Samples:
        out: Samples = {}
        for family in text_string_to_metric_families(self.metrics_text()):
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return out

    def value(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        return sum(
            v
            for (n, lbls), v in self.samples().items()
            if n == name and all(dict(lbls).get(k) == want for k, want in labels.items())
        )

    def results_lines(self) -> list[dict[str, Any]]:
        running = self.proc is not None and self.proc.poll() is None
        return results_lines(self.results, writing=running)

    def wait_for(self, done: Any, timeout: float = CONDITION_S, what: str = "condition") -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"monitor exited while waiting for {what}\n{self.log()}")
            return bool(done())

        wait_until(ready, timeout, what, interval_s=0.1, context=lambda: self.log()[-4000:])

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        forget(self.proc)
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
            forget(self.proc)
