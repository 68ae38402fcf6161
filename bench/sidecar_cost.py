"""What the sidecar costs beside a collector sidecar: spans per CPU-second and PSS, in one run.

    python bench/sidecar_cost.py [--rounds 5] [--seconds 8] [--sampling 0.01] [--pin-ingest]
                                 [--settle 3] [--warmup 2]

Starts rotel (`rotel-agent` from the `rotel` package: OTLP receivers, blackhole exporter)
and two `rag-monitor run` on their defaults (local evaluators, worker processes per CPU),
one at `--sampling` and one with nothing sampled (`sampling.rate: 0`). Each is driven in
turn by the same load: one client sending OTLP/HTTP protobuf requests of 512 spans
(`harness/otlp_load.py`: 4-span RAG traces with longer documents, ~875 bytes per span, fresh
trace ids in every request), for `--seconds`.
Measured per window: spans accepted (200 responses × spans per request) and the CPU time
of the whole process tree (the process and every descendant: forkserver, evaluation
workers, resource tracker), from `/proc/<pid>/stat`, until the tree is quiet again after
the window (what was accepted is still being assembled and scored). The machine is shared, so the sides
are paired in time: every round measures rotel and both monitors one after the other (the
order rotating), and the ratio monitor/rotel is taken per round; the median of the round
ratios is the result.

Also printed: CPU microseconds per accepted span of the main (ingest) process and of the
rest of the tree, per side (less noisy than the ratio: the rotel side does not enter it).

Memory: PSS of every process of each tree (`bench/_pss.py`), idle after start and under
load (the largest total seen during one load window), each tree measured while it runs
alone: PSS splits a page among every process that maps it, so a monitor measured beside a
second monitor (the same libraries, the same memory-mapped word vectors) would look smaller.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._pss import ProcessMemory, tree_memory  # noqa: E402
from bench.ingest import Monitor, descendants  # noqa: E402
from harness import bench_docs, bench_smoke  # noqa: E402
from harness.otlp_load import BATCH, Payloads  # noqa: E402
from harness.ports import check_exited, free_port, retrying  # noqa: E402
from harness.servers import stop_process  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")
# The project's guards on 2 CPUs (docs/performance.md, "Targets"): the main (ingest)
# process's spans per CPU-second against rotel's, by sampling rate (the whole tree's ratio
# is reported, not guarded: scoring scales with the sampling rate the user sets); PSS of
# the monitor's tree idle and under this load, MB.
TARGET_MAIN_RATIO = {0.01: 0.9}
TARGET_PSS_IDLE_MB = 150
TARGET_PSS_LOADED_MB = 200


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process, now (0 once it is gone)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    return 0.0


def tree_cpu_s(pid: int) -> tuple[float, float]:
    """User + system CPU seconds, now, of `pid` and of every process below it."""
    return cpu_s(pid), sum(map(cpu_s, descendants(pid)))


def rotel_binary() -> Path:
    import rotel

    return Path(rotel.__file__).parent / "rotel-agent"


@contextlib.contextmanager
def running_rotel(workdir: Path) -> Iterator[tuple[int, int]]:
    """rotel with OTLP receivers and the blackhole exporter; yields (pid, HTTP port)."""
    proc, http_port = retrying(lambda: _start_rotel(workdir))
    try:
        yield proc.pid, http_port
    finally:
        stop_process(proc, 10)


def _start_rotel(workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """rotel on fresh ports, listening; stopped again when it does not start."""
    http_port, grpc_port = free_port(), free_port()
    log = workdir / "rotel.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(rotel_binary()), "start",
                "--otlp-http-endpoint", f"127.0.0.1:{http_port}",
                "--otlp-grpc-endpoint", f"127.0.0.1:{grpc_port}",
                "--exporter", "blackhole",
                "--pid-file", str(workdir / "rotel.pid"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", http_port), timeout=1).close()
                return proc, http_port
            except OSError:
                check_exited(proc.poll(), log, "rotel")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"rotel did not start:\n{log.read_text()}") from None
                time.sleep(0.1)
    except BaseException:
        stop_process(proc, 10)
        raise


async def drive(
    port: int, payloads: Payloads, seconds: float, pid: int
) -> tuple[int, list[ProcessMemory]]:
    """One client posting 512-span requests for `seconds`: the spans accepted, and the
    largest PSS snapshot of the tree under `pid` read meanwhile."""
    import aiohttp

    accepted = 0
    peak: list[ProcessMemory] = []
    url = f"http://127.0.0.1:{port}/v1/traces"
    deadline = time.monotonic() + seconds
    spans = BATCH // payloads.spans_per_trace * payloads.spans_per_trace

    async def watch_memory() -> None:
        while time.monotonic() < deadline:
            await asyncio.sleep(seconds / 3)
            memory = await asyncio.to_thread(tree_memory, pid)
            if _total(memory) > _total(peak):
                peak[:] = memory

    watcher = asyncio.create_task(watch_memory())
    async with aiohttp.ClientSession(headers={"Content-Type": "application/x-protobuf"}) as session:
        while time.monotonic() < deadline:
            async with session.post(url, data=payloads.next()) as response:
                await response.read()
                if response.status == 200:
                    accepted += spans
                elif response.status == 503:
                    await asyncio.sleep(0.01)
                else:
                    raise RuntimeError(f"unexpected HTTP {response.status} from port {port}")
    await watcher
    return accepted, peak


def _total(memory: list[ProcessMemory]) -> float:
    return sum(p.pss_mb for p in memory)


@dataclass
class Side:
    name: str
    pid: int
    port: int
    rates: list[float] = field(default_factory=list)  # spans per CPU-second, per round
    main_share: list[float] = field(default_factory=list)  # of the tree's CPU, per round
    # CPU microseconds per accepted span, per round: the main (ingest) process, the rest
    # of the tree (evaluation workers, fork server).
    main_us: list[float] = field(default_factory=list)
    rest_us: list[float] = field(default_factory=list)
    idle: list[ProcessMemory] = field(default_factory=list)
    loaded: list[ProcessMemory] = field(default_factory=list)

    def measure(self, payloads: Payloads, seconds: float) -> float:
        main0, rest0 = tree_cpu_s(self.pid)
        accepted, _ = asyncio.run(drive(self.port, payloads, seconds, self.pid))
        # What was accepted is still being assembled and scored: its CPU counts, until
        # the tree is quiet again.
        quiet_by, last = time.monotonic() + 15, sum(tree_cpu_s(self.pid))
        while time.monotonic() < quiet_by:
            time.sleep(0.5)
            now = sum(tree_cpu_s(self.pid))
            if now - last < 0.02:
                break
            last = now
        main1, rest1 = tree_cpu_s(self.pid)
        main, cpu = main1 - main0, main1 + rest1 - main0 - rest0
        self.main_share.append(main / max(cpu, 1e-9))
        self.main_us.append(main / max(accepted, 1) * 1e6)
        self.rest_us.append(max(0.0, cpu - main) / max(accepted, 1) * 1e6)
        rate = accepted / max(cpu, 1e-9)
        self.rates.append(rate)
        print(
            f"  {self.name:28s} {accepted / seconds:9,.0f} spans/s accepted, "
            f"{cpu / seconds:4.2f} cores ({main / max(cpu, 1e-9):.0%} main process), "
            f"{rate:9,.0f} spans per CPU-s",
            flush=True,
        )
        return rate


def _memory_lines(side: Side) -> list[str]:
    def fmt(memory: list[ProcessMemory]) -> str:
        parts = ", ".join(f"{p.role} {p.pss_mb:.0f}" for p in sorted(memory, key=lambda p: p.pid))
        return f"{_total(memory):6.0f} MB  ({parts})"

    return [
        f"  {side.name:28s} idle      {fmt(side.idle)}",
        f"  {side.name:28s} under load {fmt(side.loaded)}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--sampling", type=float, default=0.01)
    parser.add_argument(
        "--settle", type=float, default=3, help="seconds after start-up, workers warming up"
    )
    parser.add_argument(
        "--warmup", type=float, default=2, help="seconds of load on each side before the rounds"
    )
    parser.add_argument(
        "--doc-padding",
        type=int,
        default=112,
        help="characters added to every document (112: ~875 bytes per span)",
    )
    parser.add_argument(
        "--pin-ingest",
        action="store_true",
        help="a diagnostic: each monitor's ingest process on one CPU, its evaluation workers "
        "on the others (a pinned monitor sees one CPU, so it starts one worker)",
    )
    bench_docs.add_flag(parser)
    # Smoke: windows short enough to post a few requests (a window always sends one).
    args = bench_smoke.parse_args(parser, rounds=1, seconds=0.3, settle=0.2, warmup=0.1)
    payloads = Payloads(doc_padding=args.doc_padding)
    body = payloads.next()
    print(
        f"{bench_docs.machine()}; requests of "
        f"{BATCH} spans, {len(body)} bytes ({len(body) / BATCH:.0f} B/span)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="sidecar-cost-") as tmp:
        starts: dict[str, Callable[[], contextlib.AbstractContextManager[tuple[int, int]]]] = {
            "rotel (blackhole)": lambda: running_rotel(Path(tmp)),
            f"rag-monitor sampling {args.sampling:g}": lambda: _monitor(
                args.sampling, args.pin_ingest
            ),
            "rag-monitor nothing sampled": lambda: _monitor(0.0, args.pin_ingest),
        }
        memory = {
            name: _memory_alone(start, payloads, args.seconds, args.settle)
            for name, start in starts.items()
        }
        with contextlib.ExitStack() as stack:
            sides = [Side(name, *stack.enter_context(start())) for name, start in starts.items()]
            for side in sides:
                side.idle, side.loaded = memory[side.name]
            _rounds(sides, payloads, args)
    report = _report(sides, args.sampling, args.rounds)
    print(report)
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "sidecar-cost", report)


def _report(sides: list[Side], sampling: float, rounds: int) -> str:
    """The two tables of the docs block: CPU against rotel, and PSS."""
    rotel = sides[0]
    cpu_rows, memory_rows = [], []
    for side, rate in zip(sides, (None, sampling, 0.0), strict=True):
        ratios = [a / b for a, b in zip(side.rates, rotel.rates, strict=True)]
        ratio = statistics.median(ratios)
        # Spans per CPU-second of the main process against rotel's: the inverse ratio of
        # their CPU per span, paired by round.
        mains = [r / m for r, m in zip(rotel.main_us, side.main_us, strict=True)]
        main = statistics.median(mains)
        target = TARGET_MAIN_RATIO.get(rate) if rate is not None else None
        cpu_rows.append(
            [
                side.name,
                f"{statistics.median(side.rates):,.0f}",
                "1"
                if side is rotel
                else f"**{ratio:.3f}** ({min(ratios):.3f} to {max(ratios):.3f})",
                f"{statistics.median(side.main_us):.2f} + {statistics.median(side.rest_us):.2f}",
                "1" if side is rotel else f"**{main:.3f}** ({min(mains):.3f} to {max(mains):.3f})",
                "" if target is None else f"≥ {target}: {_met(main >= target)}",
            ]
        )
        idle, loaded = _total(side.idle), _total(side.loaded)
        by_process = ", ".join(
            f"{p.role} {p.pss_mb:.0f}" for p in sorted(side.idle, key=lambda p: p.pid)
        )
        memory_rows.append(
            [
                side.name,
                f"{idle:.0f}",
                f"{loaded:.0f}",
                by_process,
                ""
                if side is rotel
                else f"≤ {TARGET_PSS_IDLE_MB} idle: {_met(idle <= TARGET_PSS_IDLE_MB)}; "
                f"≤ {TARGET_PSS_LOADED_MB} under load: {_met(loaded <= TARGET_PSS_LOADED_MB)}",
            ]
        )
    cpu = bench_docs.table(
        [
            "",
            "spans per CPU-second",
            f"ratio to rotel, median of {rounds} rounds (range)",
            "CPU µs per span: main process + rest of the tree",
            f"main process: ratio to rotel, median of {rounds} rounds (range)",
            "guard (main process)",
        ],
        cpu_rows,
    )
    pss = bench_docs.table(
        ["", "PSS idle, MB", "PSS under load, MB", "idle, by process", "target"], memory_rows
    )
    return f"{cpu}\n\n{pss}"


def _met(ok: bool) -> str:
    return "met" if ok else "not met"


def _monitor(
    sampling: float, pin: bool = False
) -> contextlib.AbstractContextManager[tuple[int, int]]:
    """A `rag-monitor run` on its defaults at `sampling`; yields (pid, OTLP/HTTP port).
    `pin`: its ingest process on one CPU, its workers on the others (`bench.ingest`)."""

    @contextlib.contextmanager
    def running() -> Iterator[tuple[int, int]]:
        with Monitor(sampling, pin=pin).running() as monitor:
            assert monitor.proc is not None
            yield monitor.proc.pid, monitor.http_port

    return running()


def _memory_alone(
    start: Callable[[], contextlib.AbstractContextManager[tuple[int, int]]],
    payloads: Payloads,
    seconds: float,
    settle: float,
) -> tuple[list[ProcessMemory], list[ProcessMemory]]:
    """PSS of a tree running alone: idle `settle` seconds after start-up (workers warmed
    up), and the peak under one load window."""
    with start() as (pid, port):
        time.sleep(settle)
        idle = tree_memory(pid)
        _, peak = asyncio.run(drive(port, payloads, seconds, pid))
        return idle, peak


def _rounds(sides: list[Side], payloads: Payloads, args: argparse.Namespace) -> None:
    """Spans per CPU-second, the sides paired in time, and the memory of each measured alone."""
    time.sleep(args.settle)  # past start-up: workers warmed up
    for side in sides:
        asyncio.run(drive(side.port, payloads, args.warmup, side.pid))
    for round_ in range(args.rounds):
        print(f"round {round_ + 1}", flush=True)
        order = sides[round_ % 3 :] + sides[: round_ % 3]
        for side in order:
            side.measure(payloads, args.seconds)
    rotel = sides[0]
    print("spans per CPU-second of the whole process tree (median over rounds):")
    for side in sides:
        line = f"  {side.name:28s} {statistics.median(side.rates):9,.0f}"
        if side is not rotel:
            ratios = [a / b for a, b in zip(side.rates, rotel.rates, strict=True)]
            line += (
                f"  = {statistics.median(ratios):.3f}x rotel (median of round ratios; "
                f"rounds {', '.join(f'{r:.3f}' for r in ratios)})"
            )
        print(line)
    print("CPU microseconds per span (median over rounds): main process + the rest of the tree")
    for side in sides:
        print(
            f"  {side.name:28s} {statistics.median(side.main_us):5.2f} + "
            f"{statistics.median(side.rest_us):5.2f}  (rounds: "
            + ", ".join(f"{m:.2f}+{r:.2f}" for m, r in zip(side.main_us, side.rest_us, strict=True))
            + ")"
        )
    print("PSS by process, MB:")
    for side in sides:
        print("\n".join(_memory_lines(side)))


if __name__ == "__main__":
    main()
