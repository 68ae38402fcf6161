"""What one request costs when its record is built to cost far more than its bytes: a
running `rag-monitor run` fed over OTLP/HTTP, measured against a reference run fed the
same number of bytes in ordinary records.

    python bench/hostile_records_rss.py [--scenario labels documents] [--requests 60]

- `labels`: one 12 MB request whose `service.name`, `service.version` and `http.route` are
  4 MB each, against one 12 MB request whose 12 MB is documents (no label is long).
  Reported: the size of one `/metrics` scrape, the peak RSS of the main process and the
  largest of its others (the workers, the fork server), and the label values cut (`label_values_cut_total`). Limits: the
  scrape under 1 MB, each process's RSS under 300 MB, the long values counted.
- `documents`: sixty 1 MB requests, each one trace of 100,000 one-word documents, once
  without `/debug/records` and once with `debug_records: 100`, against sixty requests of
  one trace of 10 documents. Reported: the peak RSS of the main process and the largest
  of its others, the size of `/debug/records`, and whether every trace is accounted for
  (evaluated, or counted with a reason). Limits: each process's RSS under 600 MB (issue
  51 asks it of the main one), the page under 10 MB, every trace accounted for.

Peak RSS is the kernel's high-water mark (`VmHWM`) of each process, read just before it
stops; the monitor runs with its default worker processes (one per CPU). Requests are
generated (no data files). The script exits with status 1, naming each limit exceeded,
after printing (and with `--write-docs` writing) its tables.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._pss import tree_pids  # noqa: E402
from harness import bench_docs, bench_smoke  # noqa: E402
from harness.ports import check_exited, free_port, retrying  # noqa: E402

MB = 1024 * 1024
LIMITS_MB = {"labels_metrics": 1, "labels_rss": 300, "documents_rss": 600, "page": 10}
_DEADLINE_S = 600.0
# What the wait for the load to be accounted for reads (a filtered scrape: a full one is
# what the `labels` scenario measures).
_POLLED = "&".join(
    f"name[]=rag_monitor_{name}"
    for name in (
        "traces_assembled_total",
        "records_total",
        "records_rejected_total",
        "dropped_total",
        "evaluation_duration_seconds_count",
    )
)
_WORDS = ("refund", "policy", "thirty", "days", "receipt", "store", "credit", "exchange")


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def request(
    trace_id: bytes,
    *,
    service: str = "shop",
    version: str = "1.0",
    route: str = "/ask",
    documents: list[str],
    answer: str = "Refunds are accepted within thirty days with a receipt.",
) -> bytes:
    """One export request: one trace of one root span carrying `rag.*` attributes."""
    span = Span(
        trace_id=trace_id,
        span_id=os.urandom(8),
        name="rag",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        attributes=[
            _kv("rag.query", "How long do I have to return an item?"),
            _kv("rag.context", json.dumps(documents)),
            _kv("rag.response", answer),
            _kv("http.route", route),
        ],
    )
    resource = Resource(attributes=[_kv("service.name", service), _kv("service.version", version)])
    body = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=resource, scope_spans=[ScopeSpans(spans=[span])])]
    )
    return body.SerializeToString()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:
        body: bytes = response.read()
        return body


def _post(url: str, body: bytes) -> None:
    """POST until accepted: a 503 (the monitor pushing back) is tried again."""
    while True:
        req = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/x-protobuf"}
        )
        try:
            with urllib.request.urlopen(req, timeout=120):
                return
        except urllib.error.HTTPError as exc:
            if exc.code not in (429, 503):
                raise
            time.sleep(float(exc.headers.get("Retry-After") or 1))


def _status(pid: int) -> dict[str, int]:
    """VmHWM and VmRSS of a process, in kB."""
    out = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(value.split()[0])
    return out


def _samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def _total(text: str, name: str, **match: str) -> float:
    return sum(
        value
        for labels, value in _samples(text, name)
        if all(labels.get(k) == v for k, v in match.items())
    )


@dataclass
class Run:
    main_mb: float
    workers_mb: float
    metrics_bytes: int
    page_bytes: int | None
    metrics: str
    seconds: float


def run_monitor(
    workdir: Path,
    name: str,
    bodies: list[bytes],
    done: Callable[[str], bool],
    *,
    debug_records: int = 0,
) -> Run:
    """Start `rag-monitor run`, post `bodies`, wait until `done(metrics text)`, read the
    scrape, the page and every process's peak RSS, stop it; started again on fresh ports
    when a port picked for it was taken before it bound it."""
    return retrying(lambda: _run_monitor(workdir, name, bodies, done, debug_records=debug_records))


def _run_monitor(
    workdir: Path,
    name: str,
    bodies: list[bytes],
    done: Callable[[str], bool],
    *,
    debug_records: int,
) -> Run:
    http, metrics = free_port(), free_port()
    config = workdir / f"{name}.yaml"
    config.write_text(
        "receivers:\n"
        "  otlp:\n"
        "    grpc: {enabled: false}\n"
        f"    http: {{endpoint: '127.0.0.1:{http}'}}\n"
        "trace_assembly: {idle_timeout_s: 1}\n"
        "exporters:\n"
        f"  prometheus: {{endpoint: '127.0.0.1:{metrics}', debug_records: {debug_records}}}\n"
    )
    log = workdir / f"{name}.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "monitor", "run", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
        )
    base = f"http://127.0.0.1:{metrics}"
    started = time.monotonic()
    try:
        _wait(lambda: _ready(f"{base}/readyz"), "the monitor's /readyz", process, log)
        for body in bodies:
            _post(f"http://127.0.0.1:{http}/v1/traces", body)
        text = ""

        def finished() -> bool:
            nonlocal text
            text = _get(f"{base}/metrics?{_POLLED}").decode()
            return done(text)

        _wait(finished, "every trace accounted for", process, log)
        took = time.monotonic() - started
        scraped = _get(f"{base}/metrics")
        page = _get(f"{base}/debug/records") if debug_records else None
        tree = tree_pids(process.pid)
        main_kb = _status(process.pid)["VmHWM"]
        workers_kb = max((_status(pid)["VmHWM"] for pid in tree[1:]), default=0)
    except BaseException:
        sys.stderr.write(log.read_text(errors="replace")[-3000:])
        raise
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return Run(
        main_kb / 1024,
        workers_kb / 1024,
        len(scraped),
        None if page is None else len(page),
        scraped.decode(),
        took,
    )


def _ready(url: str) -> bool:
    try:
        return bool(_get(url))
    except OSError:
        return False


def _wait(
    condition: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + _DEADLINE_S
    while time.monotonic() < deadline:
        if condition():
            return
        check_exited(process.poll(), log, "rag-monitor")
        time.sleep(0.5)
    raise TimeoutError(f"{what}: not within {_DEADLINE_S:g} s; log {log}")


def outcomes(text: str) -> float:
    """Traces that gave a record (`records_total`), a rejection or a drop (each counted
    with its reason)."""
    return (
        _total(text, "rag_monitor_records_total")
        + _total(text, "rag_monitor_records_rejected_total")
        + _total(text, "rag_monitor_dropped_total", stage="assemble")
    )


def accounted(text: str, traces: int) -> bool:
    """Every trace released by assembly, each one evaluated or counted with a reason, and
    an evaluation done."""
    released = _total(text, "rag_monitor_traces_assembled_total")
    evaluated = _total(text, "rag_monitor_evaluation_duration_seconds_count")
    return released >= traces and outcomes(text) >= traces and evaluated > 0


def _over(what: str, mib: float, limit_mb: float) -> list[str]:
    """`what` named when `mib` (MiB, as the tables show) is not under `limit_mb` (MB,
    10**6 bytes, as the limits are stated)."""
    megabytes = mib * MB / 1e6
    return [f"{what}: {megabytes:.1f} MB, limit {limit_mb:g} MB"] if megabytes >= limit_mb else []


def labels(workdir: Path) -> tuple[list[list[str]], list[str]]:
    """The table's rows and the limits exceeded."""
    big = 4 * MB
    long = ["s" * big, "v" * big, "/" + "r" * (big - 1)]
    hostile = request(
        os.urandom(16), service=long[0], version=long[1], route=long[2], documents=["a"]
    )
    reference = request(os.urandom(16), documents=["refund policy " * (big // 56)] * 12)
    rows, exceeded = [], []
    for name, body in (
        ("reference: 12 MB of documents", reference),
        ("4 MB label values", hostile),
    ):
        run = run_monitor(workdir, name.split(":")[0].replace(" ", "-"), [body], _one_trace)
        cut = _total(run.metrics, "rag_monitor_label_values_cut_total")
        rows.append(
            [
                f"one {len(body) / MB:.0f} MB request, {name}",
                f"{run.metrics_bytes / 1024:.0f} kB",
                f"{run.main_mb:.0f} MB",
                f"{run.workers_mb:.0f} MB",
                f"{cut:.0f}",
            ]
        )
        if body is hostile:
            exceeded += _over(
                "labels: one /metrics scrape", run.metrics_bytes / MB, LIMITS_MB["labels_metrics"]
            )
            exceeded += _over("labels: main peak RSS", run.main_mb, LIMITS_MB["labels_rss"])
            exceeded += _over(
                "labels: another process's peak RSS", run.workers_mb, LIMITS_MB["labels_rss"]
            )
            if cut < len(long):
                exceeded.append(f"labels: {cut:.0f} label values counted as cut, not 3")
    return rows, exceeded


def _one_trace(text: str) -> bool:
    return accounted(text, 1)


def documents(workdir: Path, count: int) -> tuple[list[list[str]], list[str]]:
    """The table's rows and the limits exceeded."""
    rng = random.Random(7)
    many = [[rng.choice(_WORDS) for _ in range(100_000)] for _ in range(3)]
    few = [[" ".join(rng.choice(_WORDS) for _ in range(8)) for _ in range(10)]]
    rows, exceeded = [], []
    cases: list[tuple[str, list[list[str]], int]] = [
        ("10 documents each (the reference)", few, 0),
        ("100,000 one-word documents each", many, 0),
        ("100,000 one-word documents each, debug_records: 100", many, 100),
    ]
    limit = LIMITS_MB["documents_rss"]
    for name, docs, debug in cases:
        bodies = [request(os.urandom(16), documents=docs[i % len(docs)]) for i in range(count)]
        size = sum(map(len, bodies)) / count / MB
        run = run_monitor(
            workdir,
            f"documents-{debug}-{len(docs[0])}",
            bodies,
            lambda text: accounted(text, count),
            debug_records=debug,
        )
        truncated = _total(run.metrics, "rag_monitor_records_truncated_total", part="documents")
        records = _total(run.metrics, "rag_monitor_records_total")
        counted = outcomes(run.metrics)
        rows.append(
            [
                f"{count} requests of {size:.2f} MB, {name}",
                f"{run.main_mb:.0f} MB",
                f"{run.workers_mb:.0f} MB",
                "—" if run.page_bytes is None else f"{run.page_bytes / MB:.2f} MB",
                f"{records:.0f} evaluated, {counted - records:.0f} counted with a reason, "
                f"{truncated:.0f} with documents cut",
                f"{run.seconds:.0f} s",
            ]
        )
        exceeded += _over(f"documents, {name}: main peak RSS", run.main_mb, limit)
        exceeded += _over(f"documents, {name}: another process's peak RSS", run.workers_mb, limit)
        if run.page_bytes is not None:
            exceeded += _over(
                f"documents, {name}: /debug/records", run.page_bytes / MB, LIMITS_MB["page"]
            )
        if counted != count:
            exceeded.append(f"documents, {name}: {counted:.0f} of {count} traces accounted for")
    return rows, exceeded


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scenario", nargs="+", choices=["labels", "documents"], default=["labels", "documents"]
    )
    parser.add_argument("--requests", type=int, default=60)
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, requests=1)
    tables, exceeded = [], []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if "labels" in args.scenario:
            header = [
                "request",
                "one /metrics scrape",
                "main peak RSS",
                "largest other peak RSS",
                "label values cut",
            ]
            rows, over = labels(workdir)
            tables.append(bench_docs.table(header, rows))
            tables.append(
                f"Limits: a scrape under {LIMITS_MB['labels_metrics']} MB, each process's "
                f"RSS under {LIMITS_MB['labels_rss']} MB, the three values counted: "
                + _verdict(over)
            )
            exceeded += over
        if "documents" in args.scenario:
            header = [
                "load",
                "main peak RSS",
                "largest other peak RSS",
                "/debug/records",
                "traces",
                "took",
            ]
            rows, over = documents(workdir, args.requests)
            tables.append(bench_docs.table(header, rows))
            tables.append(
                f"Limits: each process's RSS under {LIMITS_MB['documents_rss']} MB, the page "
                f"under {LIMITS_MB['page']} MB, every trace accounted for: " + _verdict(over)
            )
            exceeded += over
    body = "\n\n".join(tables)
    print(body)
    if args.write_docs:
        bench_docs.write_block("docs/reliability.md", "hostile-records-rss", body)
    if exceeded:
        sys.exit("limits exceeded:\n" + "\n".join(exceeded))


def _verdict(exceeded: list[str]) -> str:
    return "met." if not exceeded else f"**not met** ({'; '.join(exceeded)})."


if __name__ == "__main__":
    main()
