"""OTLP ingest throughput: sustained spans/s into a running `rag-monitor run`, and peak RSS.

    python bench/ingest.py [--seconds 20] [--concurrency 4] [--protocol http|grpc|both]

`--sampling 0` measures ingest alone: decoding, trace assembly and the sampling decision,
with nothing evaluated.

Load: OTLP export requests of 512 spans (128 RAG traces of 4 spans: CHAIN root, RETRIEVER
with 3 documents, LLM with system/user/assistant messages, output-parser CHAIN; the
OpenInference convention, ~600 bytes per span). Every request gets fresh trace ids (patched
into the pre-serialized body, so the client does little work). The monitor runs with
sampling 1% and the four local evaluators; its ingest process is pinned to one CPU when
`taskset` exists, and its evaluation worker process and this load generator run on the
other CPUs (`cpu_layout`), so the server CPU measured is the ingest process's own.

`--sampling-cost ROUNDS` measures instead what the sampled records cost the ingest
process: a monitor at `--sampling` and one with nothing sampled, pinned to the same CPU
and loaded side by side, so both see the same machine over the same seconds; it prints
spans per server CPU-second of each and their ratio, per round and the median.

`--extraction-cost ROUNDS --against DIR` measures what extraction costs per trace a
convention reads (the payload's OpenInference traces), in this tree and in another checkout
`DIR` (the code before a change), in turns, one process per turn: CPU per trace of
decode + assembly + extraction of every trace, each over the raw protobuf parse of the same
payload in the same process (so a turn on a busier machine stays comparable); it prints
both trees' ratios per round and their ratio (this tree over `DIR`), and the median.

Reported per protocol: spans accepted/s, spans whose traces were assembled and released
per second (the sustained rate: the assembler kept up; the ~1% sampled traces become
records, the rest are counted in `traces_unsampled_total` without extraction), server
CPU seconds per 100k spans, 503 / UNAVAILABLE pushbacks, and peak RSS (VmHWM). Reference
ceilings on the same payload, in-process, one thread: raw protobuf parse, our span decode,
decode + assembly + record extraction of every trace, the same with the sampling
decision taken before extraction, and the same with the spans of traces that cannot be
sampled left unbuilt at decoding (as the server does; it extracts the sampled traces in
its evaluation worker processes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

from harness import bench_docs, bench_smoke  # noqa: E402
from harness.otlp_load import BATCH, SPANS_PER_TRACE, Payloads, build_payload  # noqa: E402
from harness.ports import TRIES, check_exited, free_port, retrying  # noqa: E402
from harness.servers import stop_process  # noqa: E402

# The project's target for spans per server CPU-second at 1% sampling against nothing
# sampled (docs/performance.md, "Targets").
TARGET_SAMPLING_COST = 0.85


def reference(payload: bytes, light: int) -> dict[str, float]:
    """In-process ceilings on one thread (CPU time)."""
    from monitor.config import Config
    from monitor.extraction import extract_records
    from monitor.processors.sampler import Sampler
    from monitor.processors.trace._assembler import TraceAssembler
    from monitor.processors.trace._filter import SpanFilter
    from monitor.processors.trace._sampling_view import sampling_view
    from monitor.spans import Span, decode_protobuf, read_protobuf

    size = BATCH // (SPANS_PER_TRACE + light) * (SPANS_PER_TRACE + light)

    def rate(fn: Callable[[], object], repeat: int = 40) -> float:
        start = time.process_time()
        for _ in range(repeat):
            fn()
        return size * repeat / (time.process_time() - start)

    def decode(body: bytes) -> list[Span]:
        return decode_protobuf(body, lazy=True).spans

    asm = TraceAssembler(idle_timeout_s=10, max_open_traces=10_000)
    payloads = Payloads(count=1, seed=2, light=light)
    config = Config.model_validate({"sampling": {"rate": 0.01}})
    sampler = Sampler(config.sampling, {e.name: e.sample_rate for e in config.evaluators})

    def every_trace() -> None:
        for trace in asm.add(decode(payloads.next()), "bench"):
            extract_records(trace.spans)

    span_filter = SpanFilter(sampler, max_remembered=10_000, keep_all=False)

    def filtered(body: bytes) -> list[Span]:
        return span_filter.request(read_protobuf(body)).spans

    def sampled_first() -> None:
        for trace in asm.add(decode(payloads.next()), "bench"):
            # As the trace stage does: no override names a route, so the view skips it.
            view = sampling_view(trace.spans, route_attribute=None)
            if sampler.sampled(view):
                extract_records(trace.spans)

    def filtered_first() -> None:
        for trace in asm.add(filtered(payloads.next()), "bench"):
            if sampler.sampled(sampling_view(trace.spans, route_attribute=None)):
                extract_records(trace.spans)

    return {
        "raw protobuf parse": rate(lambda: ExportTraceServiceRequest.FromString(payload)),
        "span decode, every span": rate(lambda: decode(payload)),
        "decode + assembly + extraction": rate(every_trace),
        "... sampling 1% before extraction": rate(sampled_first),
        "... only the traces that may be sampled built (the trace stage)": rate(filtered_first),
    }


# One turn of `--extraction-cost`, run in a fresh process with the tree measured first on
# its path: CPU seconds per trace of decode + assembly + extraction, and of the raw parse.
_EXTRACTION_TURN = """
import random, sys, time
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from harness.otlp_load import Payloads, build_payload
from monitor.extraction import extract_records
from monitor.processors.trace._assembler import TraceAssembler
from monitor.spans import decode_protobuf
payload, ids = build_payload(random.Random(0))
payloads = Payloads(count=1, seed=2)
asm = TraceAssembler(idle_timeout_s=10, max_open_traces=10_000)
repeat = int(sys.argv[1])
def every_trace():
    for trace in asm.add(decode_protobuf(payloads.next(), lazy=True).spans, "bench"):
        assert extract_records(trace.spans)[0].retrieved_context
every_trace()
start = time.process_time()
for _ in range(repeat):
    every_trace()
extraction = (time.process_time() - start) / (repeat * len(ids))
start = time.process_time()
for _ in range(repeat * 10):
    ExportTraceServiceRequest.FromString(payload)
parse = (time.process_time() - start) / (repeat * 10 * len(ids))
print(extraction, parse)
"""


def _extraction_turn(tree: Path, repeat: int) -> tuple[float, float]:
    """(CPU s per trace of decode + assembly + extraction, of the raw parse) in `tree`."""
    out = subprocess.run(
        [sys.executable, "-c", _EXTRACTION_TURN, str(repeat)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return float(out[0]), float(out[1])


def extraction_cost(against: Path, rounds: int, repeat: int) -> list[float]:
    """Per round, this tree's extraction CPU per trace over the raw parse's, divided by
    the same ratio in `against`; the trees take turns (which goes first alternates)."""
    ratios = []
    for n in range(rounds):
        turns = [(REPO, "this tree"), (against, str(against))]
        measured = {}
        for tree, name in turns if n % 2 == 0 else turns[::-1]:
            extraction, parse = _extraction_turn(tree, repeat)
            measured[name] = extraction / parse
            print(
                f"round {n + 1} {name}: {extraction * 1e6:.1f} us per trace extracted, "
                f"raw parse {parse * 1e6:.2f} us: ratio {extraction / parse:.2f}"
            )
        ratios.append(measured["this tree"] / measured[str(against)])
        print(f"round {n + 1}: this tree / {against} = {ratios[-1]:.3f}")
    return ratios


def _port() -> int:
    return free_port()


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the monitor does not listen on {port}") from None
            time.sleep(0.1)


def _metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        name, _, value = line.rpartition(" ")
        out[name] = float(value)
    return out


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as r:
            return int(r.status) == 200
    except OSError:  # not listening yet, or 503 (an HTTPError)
        return False


def _sum(metrics: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in metrics.items() if k.startswith(prefix))


def _proc_stats(pid: int) -> tuple[float, int]:
    """(CPU seconds, peak RSS bytes) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    hwm = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) * 1024
    return cpu, hwm


def cpu_layout() -> tuple[int, set[int]]:
    """The CPU the monitor's ingest process is pinned to, and the CPUs for everything else
    (its evaluation workers, the load generator): the sidecar's other cores. With one CPU,
    everything shares it."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[0], set(cpus[1:]) or {cpus[0]}


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (a monitor's forkserver and evaluation workers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


@contextlib.contextmanager
def on_cpus(cpus: set[int]) -> Iterator[None]:
    """Run this process (the load generator) on `cpus` for a while."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def start_monitor(
    config: Path, metrics_port: int, *, pin: bool, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """`rag-monitor run --config CONFIG` (this checkout's, as `-m monitor` from it), once
    /readyz answers 200 (every component started: the metrics port answers before the
    receivers listen). `pin` keeps its ingest process on one CPU (`cpu_layout`) and moves
    its evaluation workers to the others, so the server CPU measured is the ingest
    process's own, undisturbed by the scoring (the workers inherit the CPU count, so a
    pinned monitor runs one). With `log` its output goes there, and an exit naming an
    address in use raises `PortTaken`."""
    cmd = [
        sys.executable,
        "-m",
        "monitor",
        "--log-level",
        "WARNING",
        "run",
        "--config",
        str(config),
    ]
    server_cpu, others = cpu_layout()
    if pin and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(server_cpu), *cmd]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with contextlib.ExitStack() as files:
        out = None if log is None else files.enter_context(log.open("wb"))
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=out)
    deadline = time.monotonic() + 60
    while not _ready(metrics_port):
        exited = proc.poll()
        if exited is not None or time.monotonic() > deadline:
            stop_process(proc, 10)
            if log is not None:
                check_exited(exited, log, "rag-monitor")
            raise RuntimeError("monitor did not start")
        time.sleep(0.2)
    if pin:
        # The workers are up once the monitor is ready; replacements fork from the
        # forkserver, which moves with them.
        for child in descendants(proc.pid):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(child, others)
    return proc


async def _drive_http(
    port: int, payloads: Payloads, seconds: float, concurrency: int
) -> tuple[int, int]:
    import aiohttp

    sent = pushback = 0
    url = f"http://127.0.0.1:{port}/v1/traces"
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession(headers={"Content-Type": "application/x-protobuf"}) as session:

        async def worker() -> None:
            nonlocal sent, pushback
            while time.monotonic() < deadline:
                async with session.post(url, data=payloads.next()) as response:
                    await response.read()
                    if response.status == 200:
                        sent += 1
                    elif response.status == 503:
                        pushback += 1
                        await asyncio.sleep(0.05)
                    else:
                        raise RuntimeError(f"unexpected HTTP {response.status}")

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return sent, pushback


async def _drive_grpc(
    port: int, payloads: Payloads, seconds: float, concurrency: int
) -> tuple[int, int]:
    import grpc
    from grpc import aio

    sent = pushback = 0
    deadline = time.monotonic() + seconds
    async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        export: aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
        )

        async def worker() -> None:
            nonlocal sent, pushback
            while time.monotonic() < deadline:
                try:
                    await export(payloads.next(), timeout=30)
                    sent += 1
                except aio.AioRpcError as exc:
                    if exc.code() != grpc.StatusCode.UNAVAILABLE:
                        raise
                    pushback += 1
                    await asyncio.sleep(0.05)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return sent, pushback


@dataclasses.dataclass
class Monitor:
    """A running `rag-monitor run` on free ports, at `sampling`."""

    sampling: float
    pin: bool = True  # see `start_monitor`
    grpc_port: int = dataclasses.field(default_factory=_port)
    http_port: int = dataclasses.field(default_factory=_port)
    metrics_port: int = dataclasses.field(default_factory=_port)
    proc: subprocess.Popen[bytes] | None = None
    _before: tuple[dict[str, float], float] = dataclasses.field(default=({}, 0.0))

    @contextlib.contextmanager
    def running(self) -> Iterator[Monitor]:
        tmp = Path(tempfile.mkdtemp(prefix="rag-monitor-bench-"))
        log = tmp / "monitor.log"
        fresh = iter(range(TRIES))

        def start() -> subprocess.Popen[bytes]:
            if next(fresh):  # a port picked before was taken: every one afresh
                self.grpc_port, self.http_port, self.metrics_port = _port(), _port(), _port()
            return self._start(tmp, log)

        try:
            self.proc = retrying(start)
            try:
                yield self
            finally:
                stop_process(self.proc, 60)
                sys.stderr.write(log.read_text(errors="replace"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _start(self, tmp: Path, log: Path) -> subprocess.Popen[bytes]:
        config = tmp / "config.yaml"
        config.write_text(
            "receivers:\n  otlp:\n"
            f"    grpc: {{endpoint: '127.0.0.1:{self.grpc_port}'}}\n"
            f"    http: {{endpoint: '127.0.0.1:{self.http_port}'}}\n"
            f"sampling: {{rate: {self.sampling}}}\n"
            f"exporters:\n  prometheus: {{endpoint: '127.0.0.1:{self.metrics_port}'}}\n"
        )
        proc = start_monitor(config, self.metrics_port, pin=self.pin, log=log)
        try:
            # /metrics answers before the receivers listen (the worker pool starts between).
            for port in (self.grpc_port, self.http_port):
                try:
                    _wait_listening(port, proc)
                except RuntimeError:
                    check_exited(proc.poll(), log, "rag-monitor")
                    raise
        except BaseException:
            stop_process(proc, 60)
            raise
        return proc

    def port(self, protocol: str) -> int:
        return self.http_port if protocol == "http" else self.grpc_port

    def mark(self) -> None:
        """Start of a measured window: counters and server CPU."""
        assert self.proc is not None
        self._before = (_metrics(self.metrics_port), _proc_stats(self.proc.pid)[0])

    def since_mark(self, seconds: float, spans_per_trace: int) -> dict[str, float]:
        """What the server did since `mark`, over a window of `seconds`."""
        assert self.proc is not None
        before, cpu0 = self._before
        after = _metrics(self.metrics_port)
        cpu1, hwm = _proc_stats(self.proc.pid)

        def delta(prefix: str) -> float:
            return _sum(after, prefix) - _sum(before, prefix)

        accepted = delta("rag_monitor_spans_received_total")
        cpu_per_100k = (cpu1 - cpu0) / max(accepted, 1) * 100_000
        return {
            "spans_accepted_per_s": accepted / seconds,
            "spans_assembled_per_s": delta("rag_monitor_traces_assembled_total")
            * spans_per_trace
            / seconds,
            "records": delta("rag_monitor_records_total"),
            "unsampled_traces": delta("rag_monitor_traces_unsampled_total"),
            "server_cpu_s_per_100k_spans": cpu_per_100k,
            "spans_per_cpu_s": 100_000 / max(cpu_per_100k, 1e-9),
            "peak_rss_mb": hwm / 2**20,
        }


def _drive(
    protocol: str,
) -> Callable[[int, Payloads, float, int], Coroutine[None, None, tuple[int, int]]]:
    return _drive_http if protocol == "http" else _drive_grpc


def run_protocol(
    protocol: str,
    seconds: float,
    concurrency: int,
    light: int,
    profile: str | None = None,
    sampling: float = 0.01,
    warmup: float = 3.0,
) -> dict[str, float]:
    """One monitor at `sampling` under `concurrency` senders for `seconds`, after `warmup`
    seconds of the same load."""
    drive = _drive(protocol)
    with Monitor(sampling).running() as monitor, on_cpus(cpu_layout()[1]):
        assert monitor.proc is not None
        payloads = Payloads(light=light)
        port = monitor.port(protocol)
        asyncio.run(drive(port, payloads, warmup, concurrency))
        time.sleep(1)
        monitor.mark()
        spy = None
        if profile:
            # Collapsed stacks of the server during the measured window (py-spy's "raw").
            spy = subprocess.Popen(
                [
                    "py-spy",
                    "record",
                    "-p",
                    str(monitor.proc.pid),
                    "-f",
                    "raw",
                    "-o",
                    f"{profile}.{protocol}.txt",
                    "-d",
                    str(int(seconds)),
                    "-r",
                    "200",
                    "--gil",
                ],
                stdout=subprocess.DEVNULL,
            )
        sent, pushback = asyncio.run(drive(port, payloads, seconds, concurrency))
        if spy is not None:
            spy.wait(timeout=60)
        # Let the pipeline drain what was accepted, then read the counters.
        time.sleep(1.5)
        result = monitor.since_mark(seconds, payloads.spans_per_trace)
    return {"requests": sent, "pushbacks": pushback, **result}


def sampling_cost(
    protocol: str, seconds: float, concurrency: int, sampling: float = 0.01, warmup: float = 3.0
) -> dict[str, float]:
    """What sampled records cost the ingest process: a monitor at `sampling` and one with
    nothing sampled, both pinned to the same CPU and loaded at the same time, so that both
    figures see the same machine (CPU clock, other jobs) over the same seconds; spans per
    server CPU-second of each and their ratio."""
    drive = _drive(protocol)
    sampled, reference = Monitor(sampling), Monitor(0.0)
    with sampled.running(), reference.running(), on_cpus(cpu_layout()[1]):
        load_a, load_b = Payloads(light=0, seed=1), Payloads(light=0, seed=2)

        async def both(duration: float) -> None:
            await asyncio.gather(
                drive(sampled.port(protocol), load_a, duration, concurrency),
                drive(reference.port(protocol), load_b, duration, concurrency),
            )

        asyncio.run(both(warmup))
        time.sleep(1)
        sampled.mark()
        reference.mark()
        asyncio.run(both(seconds))
        time.sleep(1.5)
        a = sampled.since_mark(seconds, load_a.spans_per_trace)
        b = reference.since_mark(seconds, load_b.spans_per_trace)
    return {
        "sampled_spans_per_cpu_s": a["spans_per_cpu_s"],
        "reference_spans_per_cpu_s": b["spans_per_cpu_s"],
        "ratio": a["spans_per_cpu_s"] / b["spans_per_cpu_s"],
        "records": a["records"],
    }


def _sampling_cost_row(protocol: str, sampling: float, costs: list[dict[str, float]]) -> list[str]:
    ratios = [c["ratio"] for c in costs]
    ratio = statistics.median(ratios)
    return [
        "OTLP/HTTP" if protocol == "http" else "OTLP/gRPC",
        f"{statistics.median(c['sampled_spans_per_cpu_s'] for c in costs):,.0f}",
        f"{statistics.median(c['reference_spans_per_cpu_s'] for c in costs):,.0f}",
        f"**{ratio:.3f}**",
        f"{min(ratios):.3f} to {max(ratios):.3f}",
        "met" if ratio >= TARGET_SAMPLING_COST else "not met",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--protocol", choices=["http", "grpc", "both"], default="both")
    parser.add_argument(
        "--light-spans",
        type=int,
        default=0,
        help="extra non-RAG spans per trace (e.g. 12: a service with DB/HTTP client spans)",
    )
    parser.add_argument(
        "--sampling", type=float, default=0.01, help="sampling.rate of the monitor (0: ingest only)"
    )
    parser.add_argument(
        "--py-spy",
        metavar="PREFIX",
        help="profile the server with py-spy (collapsed stacks to PREFIX.<protocol>.txt)",
    )
    parser.add_argument(
        "--sampling-cost",
        type=int,
        metavar="ROUNDS",
        help="instead: ROUNDS of a monitor at --sampling against one with nothing sampled, "
        "loaded side by side (sampling_cost); the ratio of spans per server CPU-second",
    )
    parser.add_argument(
        "--extraction-cost",
        type=int,
        metavar="ROUNDS",
        help="instead: ROUNDS of extraction CPU per convention-read trace in this tree "
        "against the checkout --against, each over the raw parse in its own process",
    )
    parser.add_argument("--against", type=Path, help="the other checkout (--extraction-cost)")
    parser.add_argument(
        "--repeat", type=int, default=20, help="payloads per turn (--extraction-cost)"
    )
    parser.add_argument(
        "--warmup", type=float, default=3.0, help="seconds of load before each measured window"
    )
    bench_docs.add_flag(parser)
    # Smoke: windows short enough to post a few requests (each sender posts one at least).
    args = bench_smoke.parse_args(
        parser, seconds=0.3, concurrency=2, protocol="http", repeat=2, warmup=0.1
    )
    if args.extraction_cost:
        if args.against is None:
            parser.error("--extraction-cost needs --against DIR (the checkout to compare with)")
        print(bench_docs.machine())
        ratios = extraction_cost(args.against, args.extraction_cost, args.repeat)
        print(
            f"extraction CPU per convention-read trace, this tree / {args.against}: "
            f"median {statistics.median(ratios):.3f} over {len(ratios)} rounds "
            f"(min {min(ratios):.3f}, max {max(ratios):.3f})"
        )
        return
    if args.sampling_cost:
        print(bench_docs.machine())
        rows = []
        for protocol in ["http", "grpc"] if args.protocol == "both" else [args.protocol]:
            costs = []
            for _ in range(args.sampling_cost):
                cost = sampling_cost(
                    protocol, args.seconds, args.concurrency, args.sampling, args.warmup
                )
                costs.append(cost)
                print(
                    f"otlp_{protocol}: sampling {args.sampling:g} "
                    f"{cost['sampled_spans_per_cpu_s']:,.0f} spans per server CPU-s "
                    f"({int(cost['records'])} records), nothing sampled "
                    f"{cost['reference_spans_per_cpu_s']:,.0f}: ratio {cost['ratio']:.3f}"
                )
            rows.append(_sampling_cost_row(protocol, args.sampling, costs))
        header = [
            "protocol",
            f"spans per server CPU-s, sampling {args.sampling:g}",
            "nothing sampled, side by side",
            "ratio, median of the rounds",
            "rounds",
            f"target ≥ {TARGET_SAMPLING_COST}",
        ]
        table = bench_docs.table(header, rows)
        print(table)
        if args.write_docs:
            bench_docs.write_block("docs/performance.md", "ingest-sampling-cost", table)
        return
    payload, ids = build_payload(random.Random(0), args.light_spans)
    print(
        f"payload: {len(ids) * (SPANS_PER_TRACE + args.light_spans)} spans in {len(ids)} traces, "
        f"{len(payload)} bytes"
    )
    for name, value in reference(payload, args.light_spans).items():
        print(f"reference  {name:34s} {value:10.0f} spans/s (one thread, CPU time)")
    for protocol in ["http", "grpc"] if args.protocol == "both" else [args.protocol]:
        result = run_protocol(
            protocol,
            args.seconds,
            args.concurrency,
            args.light_spans,
            args.py_spy,
            args.sampling,
            args.warmup,
        )
        print(
            f"otlp_{protocol:5s} accepted {result['spans_accepted_per_s']:8.0f} spans/s, "
            f"assembled {result['spans_assembled_per_s']:8.0f} spans/s, "
            f"{int(result['records'])} records evaluated / "
            f"{int(result['unsampled_traces'])} traces unsampled, "
            f"server CPU {result['server_cpu_s_per_100k_spans']:.2f} s/100k spans "
            f"(= {result['spans_per_cpu_s']:.0f} spans per CPU-second), "
            f"{int(result['pushbacks'])} pushbacks / {int(result['requests'])} requests, "
            f"peak RSS {result['peak_rss_mb']:.0f} MB"
        )


if __name__ == "__main__":
    main()
