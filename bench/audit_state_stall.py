"""The event loop while the audit state file is written and read at the audit's bounds:
`audit.max_pending` records awaiting a label (request ids of a UUID's length) and 200,000
open traces, with a window of 24 buckets for a few services.

    python bench/audit_state_stall.py [--pending 100000] [--traces 200000] [--services 4]
        [--write-docs]

A probe on the loop sleeps 1 ms at a time and records how late each wake-up is; the
longest lateness is the loop's longest stall. Rows: the save as the sink makes it
(`KeptState.save`: each entry encoded to its text a slice at a time on the loop, written
off it), the reference in the same run (the whole state encoded at once on the loop, then
written off it), and the restore at start (parsed a value at a time and checked in a
thread, with no garbage collection meanwhile, what was parsed freed there). Per row: the file's size, the wall time
and the longest stall, and the stall's ratio to the reference's; a first row gives the loop's
lateness with nothing to do (the machine's own, under its load).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness import bench_docs, bench_smoke  # noqa: E402
from monitor.alerts.state import StateFile, StateFormat  # noqa: E402
from monitor.audit import saved  # noqa: E402
from monitor.audit.kept import KeptState, Pair  # noqa: E402
from monitor.audit.saved import (  # noqa: E402
    Awaiting,
    Bucket,
    OpenTrace,
    OpenTraces,
    Pending,
    Windows,
)
from monitor.evidence.ppi import Trace  # noqa: E402
from monitor.records.where import DIMENSIONS  # noqa: E402
from monitor.telemetry import create_telemetry  # noqa: E402

BUCKETS = 24
BUCKET_S = 3600.0
NOW = 1_800_000_000.0


def state(pending: int, traces: int, services: int) -> tuple[Windows, Awaiting, OpenTraces]:
    """A state at the given sizes: every bucket of every service with a few slices."""
    newest = int(NOW // BUCKET_S)
    windows: Windows = {}
    where = tuple("model-a" if d == "model" else "" for d in DIMENSIONS)
    for s in range(services):
        for b in range(BUCKETS):
            bucket = Bucket()
            for n in range(50):
                for _, tally in bucket.tallies(where):
                    tally.add_audited(n % 3 == 0, n % 4 == 0)
            windows[f"service-{s}"] = {**windows.get(f"service-{s}", {}), newest - b: bucket}
    waiting = Awaiting()
    for i in range(pending):
        entry = Pending(f"service-{i % services}", newest, True, where, f"{i:032x}")
        waiting.put(str(uuid.UUID(int=i)), entry, pending)
    sums = {(True, "", ""): Trace(2, 1, 1), (True, "model", "model-a"): Trace(2, 1, 1)}
    opened = OpenTraces()
    for i in range(traces):
        opened.put((f"service-{i % services}", f"{i:032x}"), OpenTrace(newest, dict(sums)), traces)
    return windows, waiting, opened


async def longest_stall(work: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """(wall seconds of `work`, the loop's longest lateness in seconds meanwhile)."""
    worst = 0.0
    done = False

    async def probe() -> None:
        nonlocal worst
        while not done:
            asked = time.perf_counter()
            await asyncio.sleep(0.001)
            worst = max(worst, time.perf_counter() - asked - 0.001)

    # No collection owed by what came before (building the state) falls in the phase: each
    # phase's own allocations are what it is measured on.
    gc.collect()
    task = asyncio.create_task(probe())
    await asyncio.sleep(0.01)
    start = time.perf_counter()
    await work()
    wall = time.perf_counter() - start
    done = True
    await task
    return wall, worst


async def run(args: argparse.Namespace) -> list[list[str]]:
    windows, waiting, opened = state(args.pending, args.traces, args.services)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        t = create_telemetry()
        shape = StateFormat("audit", *saved.STATE_FORMAT)
        path = Path(folder) / "alerts.state.audit"
        file = StateFile(str(path), t, shape)
        pair = Pair("local_groundedness", "labels")
        kept = KeptState(file, t, pair, max_pending=args.pending, service_name=t.service_cap)

        async def whole() -> None:
            body = saved.encode(pair.evaluator, pair.reference, windows, waiting, opened)
            await asyncio.to_thread(file.save, NOW, body)

        idle_wall, idle_stall = await longest_stall(lambda: asyncio.sleep(0.5))
        ref_wall, ref_stall = await longest_stall(whole)
        wall, stall = await longest_stall(lambda: kept.save(NOW, windows, waiting, opened))
        size = path.stat().st_size
        newest = int(NOW // BUCKET_S)
        restored = KeptState(
            StateFile(str(path), create_telemetry(), shape),
            t,
            pair,
            max_pending=args.pending,
            service_name=create_telemetry().service_cap,
        )
        held: list[object] = []

        async def restore() -> None:
            # Kept, as the sink keeps it: freed whole here, it would stall the loop itself.
            got = await restored.restore(NOW, 2 * BUCKETS * BUCKET_S, newest - BUCKETS + 1, newest)
            held.append(got)

        back_wall, back_stall = await longest_stall(restore)
        for name, w, s in (
            ("the loop idle (the machine's own lateness)", idle_wall, idle_stall),
            ("reference: encoded whole on the loop", ref_wall, ref_stall),
            ("save, a slice at a time", wall, stall),
            ("restore at start", back_wall, back_stall),
        ):
            rows.append(
                [
                    name,
                    f"{args.pending:,} / {args.traces:,}",
                    f"{size / 2**20:.1f}",
                    f"{w:.2f}",
                    f"{1000 * s:.0f}",
                    f"{s / ref_stall:.2f}" if ref_stall else "-",
                ]
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--traces", type=int, default=saved.OPEN_TRACES)
    parser.add_argument("--services", type=int, default=4)
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, argv, pending=2000, traces=4000, services=2)
    rows = asyncio.run(run(args))
    head = [
        "phase",
        "awaiting / open traces",
        "file MiB",
        "wall s",
        "longest stall ms",
        "stall ratio",
    ]
    worst = max(float(row[4]) for row in rows[2:])
    body = (
        f"{bench_docs.table(head, rows)}\n\nThe worst loop stall of a save or a restore at "
        f"these bounds: {worst:.0f} ms, against {float(rows[0][4]):.0f} ms of the loop idle "
        f"(the guard, 50 ms: {'met' if worst <= 50 else 'not met'})."
    )
    print(body)
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "audit-state-stall", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
