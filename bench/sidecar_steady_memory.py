"""Memory of a sidecar under steady traffic: `rag-monitor run` on the defaults (two worker
processes), fed RAG traces over OTLP/HTTP at a steady rate for a while, its tree's memory
read at a fixed interval. Every trace is a new request: its own question (a ticket number
in it), its own session id, one of a few versions and routes, so that whatever the sidecar
keeps per request, per conversation or per prompt grows as it would in production. The
guard: after the first quarter hour (the warm-up: bounded memories filling, the season's
first buckets) the tree's memory stays within 10 % of what it was then.

    python -m bench.sidecar_steady_memory [--minutes 60] [--rate 5] [--every-s 60]

Reads PSS (what the tree costs the machine) and its anonymous part (heaps, Python objects:
what a leak grows) from /proc (`bench/_pss.py`). The traffic runs in this process, on a
thread, at `--rate` traces per second; what it could not send in time is reported.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._pss import ProcessMemory, tree_memory  # noqa: E402
from bench.sidecar_memory import _entry_point, _ready, _running  # noqa: E402
from harness import bench_docs, bench_smoke  # noqa: E402
from harness.otlp_load import ANSWERS, DOCS, QUESTIONS  # noqa: E402
from harness.ports import check_exited, free_port, retrying  # noqa: E402

# The guard (docs/performance.md, "Targets"): memory after the warm-up within this share
# of what it was at the warm-up's end.
FLAT_WITHIN = 0.10
WARM_UP_S = 15 * 60.0
VERSIONS = ("v1", "v2", "v3")
ROUTES = ("/ask", "/chat", "/search")


def _kv(key: str, value: str | int) -> KeyValue:
    any_value = (
        AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
    )
    return KeyValue(key=key, value=any_value)


def trace_request(n: int, rng: random.Random) -> bytes:
    """One export request of one RAG trace (OpenInference: a CHAIN root, a RETRIEVER with two
    documents, an LLM), request `n`: a question no other request asks."""
    k = n % len(QUESTIONS)
    question = f"{QUESTIONS[k]} (ticket {n})"
    docs = [DOCS[k], DOCS[(k + 1) % len(DOCS)]]
    answer = ANSWERS[k]
    trace_id, root = rng.randbytes(16), rng.randbytes(8)
    t0 = time.time_ns()

    def span(name: str, parent: bytes, end_ms: int, attrs: list[KeyValue]) -> Span:
        return Span(
            trace_id=trace_id,
            span_id=rng.randbytes(8) if parent else root,
            parent_span_id=parent,
            name=name,
            start_time_unix_nano=t0,
            end_time_unix_nano=t0 + end_ms * 1_000_000,
            attributes=attrs,
        )

    retriever = [_kv("openinference.span.kind", "RETRIEVER"), _kv("input.value", question)]
    for i, doc in enumerate(docs):
        retriever += [
            _kv(f"retrieval.documents.{i}.document.id", f"kb/{(k + i) % len(DOCS)}.md"),
            _kv(f"retrieval.documents.{i}.document.content", doc),
        ]
    llm = [
        _kv("openinference.span.kind", "LLM"),
        _kv("llm.model_name", "gpt-4o-mini"),
        _kv("llm.input_messages.0.message.role", "system"),
        _kv(
            "llm.input_messages.0.message.content",
            "Answer from the context.\n\n" + "\n\n".join(docs),
        ),
        _kv("llm.input_messages.1.message.role", "user"),
        _kv("llm.input_messages.1.message.content", question),
        _kv("llm.output_messages.0.message.role", "assistant"),
        _kv("llm.output_messages.0.message.content", answer),
    ]
    root_attrs = [
        _kv("openinference.span.kind", "CHAIN"),
        _kv("input.value", question),
        _kv("output.value", answer),
        _kv("session.id", f"session-{n}"),
        _kv("http.route", ROUTES[n % len(ROUTES)]),
    ]
    spans = [
        span("retrieve", root, 5, retriever),
        span("ChatOpenAI", root, 40, llm),
        span("RetrievalQA", b"", 50, root_attrs),
    ]
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(
                    attributes=[
                        _kv("service.name", "steady-rag"),
                        _kv("service.version", VERSIONS[n % len(VERSIONS)]),
                    ]
                ),
                scope_spans=[ScopeSpans(spans=spans)],
            )
        ]
    )
    return request.SerializeToString()


class Traffic:
    """Sends `rate` traces a second to an OTLP/HTTP endpoint until stopped."""

    def __init__(self, url: str, rate: float) -> None:
        self._url, self._rate = url, rate
        self._stop = threading.Event()
        self.sent = self.failed = self.behind = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        rng = random.Random(7)
        start, n = time.monotonic(), 0
        while not self._stop.is_set():
            due = start + n / self._rate
            wait = due - time.monotonic()
            if wait > 0:
                self._stop.wait(wait)
            elif wait < -1.0:
                self.behind += 1  # more than a second late: sending does not keep up
            body = trace_request(n, rng)
            request = urllib.request.Request(
                self._url, body, {"Content-Type": "application/x-protobuf"}
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    response.read()
                self.sent += 1
            except OSError:
                self.failed += 1
            n += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


def evaluations(port: int) -> int:
    """The verdicts the sidecar made so far (`rag_monitor_evaluations_total`, every series)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return -1
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("rag_monitor_evaluations_total{")
        )
    )


def _start(tmp: Path) -> tuple[contextlib.ExitStack, subprocess.Popen[bytes], int, int]:
    """The monitor started on fresh ports and ready: the stack that stops it, the process,
    its metrics and OTLP/HTTP ports."""
    metrics, http = free_port(), free_port()
    config = tmp / "monitor.yaml"
    config.write_text(
        "receivers:\n"
        "  otlp:\n"
        "    protocols:\n"
        f"      grpc: {{endpoint: '127.0.0.1:{free_port()}'}}\n"
        f"      http: {{endpoint: '127.0.0.1:{http}'}}\n"
        "exporters:\n"
        f"  prometheus: {{endpoint: '127.0.0.1:{metrics}'}}\n"
    )
    argv = [*_entry_point(), "run", "--config", str(config)]
    log = tmp / "monitor.log"
    with contextlib.ExitStack() as stack:
        process = stack.enter_context(_running(argv, log))
        deadline = time.monotonic() + 600  # a loaded machine starts it slowly
        while not _ready(metrics, "/readyz"):
            check_exited(process.poll(), log, "rag-monitor")
            if time.monotonic() > deadline:
                raise TimeoutError("rag-monitor /readyz not ready within 600 s")
            time.sleep(0.5)
        return stack.pop_all(), process, metrics, http


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=5.0, help="traces per second")
    parser.add_argument("--every-s", type=float, default=60.0, help="between readings")
    parser.add_argument("--warm-up-s", type=float, default=WARM_UP_S)
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, minutes=0.1, every_s=2.0, warm_up_s=2.0)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    readings: list[tuple[float, float, float, int]] = []  # (s, PSS MB, anon MB, sent)
    with tempfile.TemporaryDirectory() as tmp:
        started, process, metrics, http = retrying(lambda: _start(Path(tmp)))
        with started:
            traffic = Traffic(f"http://127.0.0.1:{http}/v1/traces", args.rate)
            start = time.monotonic()
            try:
                while (elapsed := time.monotonic() - start) < args.minutes * 60:
                    tree = tree_memory(process.pid)
                    pss = sum(p.pss_mb for p in tree)
                    anon = sum(p.anon_mb for p in tree)
                    readings.append((elapsed, pss, anon, traffic.sent))
                    print(
                        f"{elapsed / 60:6.1f} min  PSS {pss:6.1f} MB  anonymous {anon:6.1f} MB"
                        f" ({_by_role(tree)})  traces sent {traffic.sent}"
                        f"  verdicts {evaluations(metrics)}",
                        flush=True,
                    )
                    time.sleep(args.every_s)
            finally:
                traffic.stop()
    print(f"sent {traffic.sent}, failed {traffic.failed}, late by over 1 s {traffic.behind}")
    table = bench_docs.table(*_summary(readings, args.warm_up_s, args.rate))
    print(table)
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "sidecar-steady-memory", table)


def _by_role(tree: list[ProcessMemory]) -> str:
    """Anonymous MB of each process, by role ("main 61.2, worker 35.0 35.4, ..."): where a
    growth is."""
    roles: dict[str, list[float]] = {}
    for process in sorted(tree, key=lambda p: p.pid):  # the same worker in the same place
        roles.setdefault(process.role, []).append(process.anon_mb)
    return ", ".join(
        f"{role} " + " ".join(f"{mb:.1f}" for mb in mbs) for role, mbs in roles.items()
    )


def _summary(
    readings: list[tuple[float, float, float, int]], warm_up_s: float, rate: float
) -> tuple[list[str], list[list[str]]]:
    """The table: memory at the warm-up's end, at the end, the largest after the warm-up,
    and the growth against the guard."""
    after = [r for r in readings if r[0] >= warm_up_s] or readings[-1:]
    first, last = after[0], after[-1]
    rows = []
    for name, column in (("PSS", 1), ("anonymous", 2)):
        peak = max(r[column] for r in after)
        growth = (peak - first[column]) / first[column] if first[column] else 0.0
        rows.append(
            [
                name,
                f"{first[column]:.0f}",
                f"{last[column]:.0f}",
                f"{peak:.0f}",
                f"{growth:+.1%}",
                f"≤ {FLAT_WITHIN:.0%}: {'met' if growth <= FLAT_WITHIN else 'not met'}",
            ]
        )
    header = [
        f"{rate:g} traces/s, {last[0] / 60:.0f} min, {last[3]} traces",
        f"MB at {first[0] / 60:.0f} min",
        f"MB at {last[0] / 60:.0f} min",
        "largest after, MB",
        "growth",
        "guard",
    ]
    return header, rows


if __name__ == "__main__":
    main()
