"""Memory under traces that never end: RSS of `rag-monitor run` on its default config while
senders export, for a minute, RAG spans of ~1 KB whose root span never arrives.

    python bench/open_traces_memory.py [--seconds 60] [--concurrency 4] [--span-bytes 1024]

Every trace stays open until trace assembly lets it go (idle timeout, or eviction once
the open traces hold `trace_assembly.max_open_bytes`), so memory is bounded only by the
byte bounds of the intake, the open traces and the evaluation queue. Reported: RSS after
start-up (the reference, same run), peak RSS (VmHWM) and RSS at the end, their ratio, the
bytes held by open traces at the end, evictions, spans accepted and pushbacks (HTTP 503).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue  # noqa: E402
from opentelemetry.proto.resource.v1.resource_pb2 import Resource  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span  # noqa: E402

from bench.ingest import _metrics, _port, _proc_stats, _sum, start_monitor  # noqa: E402
from harness import bench_docs, bench_smoke  # noqa: E402
from harness.ports import retrying  # noqa: E402
from harness.servers import stop_process  # noqa: E402

SPANS_PER_TRACE = 8
TRACES_PER_REQUEST = 32


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def request(rng: random.Random, span_bytes: int) -> bytes:
    """Traces whose spans all name a parent (the root) that is never sent."""
    spans = []
    for _ in range(TRACES_PER_REQUEST):
        trace_id = rng.randbytes(16)
        root = rng.randbytes(8)
        for k in range(SPANS_PER_TRACE):
            text = "".join(rng.choices("abcdefghij klmnop", k=span_bytes))
            spans.append(
                Span(
                    trace_id=trace_id,
                    span_id=rng.randbytes(8),
                    parent_span_id=root,
                    name="llm" if k == SPANS_PER_TRACE - 1 else "retrieve",
                    start_time_unix_nano=1_700_000_000_000_000_000 + k,
                    end_time_unix_nano=1_700_000_000_000_000_100 + k,
                    attributes=[
                        _kv("openinference.span.kind", "LLM" if k else "RETRIEVER"),
                        _kv("output.value", text),
                    ],
                )
            )
    resource = Resource(attributes=[_kv("service.name", "never-ending")])
    body = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=resource, scope_spans=[ScopeSpans(spans=spans)])]
    )
    return body.SerializeToString()


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def _drive(port: int, seconds: float, concurrency: int, span_bytes: int) -> tuple[int, int]:
    import aiohttp

    sent = pushback = 0
    url = f"http://127.0.0.1:{port}/v1/traces"
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession(headers={"Content-Type": "application/x-protobuf"}) as session:

        async def worker(seed: int) -> None:
            nonlocal sent, pushback
            rng = random.Random(seed)
            while time.monotonic() < deadline:
                body = await asyncio.to_thread(request, rng, span_bytes)
                async with session.post(url, data=body) as response:
                    await response.read()
                    if response.status == 200:
                        sent += 1
                    else:
                        pushback += 1
                        await asyncio.sleep(0.05)

        await asyncio.gather(*(worker(seed) for seed in range(concurrency)))
    return sent, pushback


def _start(tmp: Path) -> tuple[subprocess.Popen[bytes], int, int]:
    """The monitor on fresh ports, ready: the process, its OTLP/HTTP and metrics ports."""
    http_port, metrics_port = _port(), _port()
    config = tmp / "config.yaml"
    # The defaults, but for the ports: the point is what the default bounds allow.
    config.write_text(
        "receivers:\n  otlp:\n    grpc: {enabled: false}\n"
        f"    http: {{endpoint: '127.0.0.1:{http_port}'}}\n"
        f"exporters:\n  prometheus: {{endpoint: '127.0.0.1:{metrics_port}'}}\n"
    )
    proc = start_monitor(config, metrics_port, pin=False, log=tmp / "monitor.log")
    return proc, http_port, metrics_port


def run(seconds: float, concurrency: int, span_bytes: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="rag-monitor-bench-"))
    try:
        proc, http_port, metrics_port = retrying(lambda: _start(tmp))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    samples: list[int] = []
    halt = threading.Event()
    try:
        baseline = _rss(proc.pid)

        def sample() -> None:
            while not halt.wait(0.5):
                samples.append(_rss(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        sent, pushback = asyncio.run(_drive(http_port, seconds, concurrency, span_bytes))
        halt.set()
        sampler.join()
        metrics = _metrics(metrics_port)
        _, hwm = _proc_stats(proc.pid)
        tail = samples[-max(1, len(samples) // 6) :]  # the last ~10 s of a minute
        return {
            "seconds": seconds,
            "span_bytes": span_bytes,
            "requests_accepted": sent,
            "pushbacks": pushback,
            "spans_accepted": _sum(metrics, "rag_monitor_spans_received_total"),
            "traces_evicted": metrics.get(
                'rag_monitor_traces_assembled_total{trigger="evicted"}', 0.0
            ),
            "open_trace_mb_at_end": metrics.get("rag_monitor_open_trace_bytes", 0.0) / 2**20,
            "rss_after_start_mb": baseline / 2**20,
            "rss_peak_mb": hwm / 2**20,
            "rss_last_10s_mb": max(tail) / 2**20 if tail else 0.0,
            "peak_over_start": hwm / baseline,
        }
    finally:
        halt.set()
        stop_process(proc, 60)
        sys.stderr.write((tmp / "monitor.log").read_text(errors="replace"))
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--span-bytes", type=int, default=1024)
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, seconds=1.0, concurrency=2)
    result = run(args.seconds, args.concurrency, args.span_bytes)
    print(json.dumps(result, indent=2))
    rows = [
        ["spans accepted", f"{result['spans_accepted']:,.0f}"],
        ["requests pushed back (HTTP 503)", f"{result['pushbacks']:,.0f}"],
        ["traces evicted (`max_open_bytes`)", f"{result['traces_evicted']:,.0f}"],
        ["bytes held by open traces at the end", f"{result['open_trace_mb_at_end']:.0f} MiB"],
        ["RSS after start (the reference)", f"{result['rss_after_start_mb']:.0f} MB"],
        [
            "peak RSS (VmHWM)",
            f"**{result['rss_peak_mb']:.0f} MB** ({result['peak_over_start']:.2f}× the reference)",
        ],
        ["largest RSS over the last sixth of the run", f"{result['rss_last_10s_mb']:.0f} MB"],
    ]
    table = bench_docs.table(
        [f"{args.seconds:g} s, {args.concurrency} senders, spans of {args.span_bytes} B", ""],
        rows,
    )
    print(table)
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "open-traces-memory", table)


if __name__ == "__main__":
    main()
