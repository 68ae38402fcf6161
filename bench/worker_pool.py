"""Local evaluation in worker processes: records per second through the pool that runs
the four local evaluators (`pipeline.processes`), with 1 and with 2 worker processes in
one run, and their ratio (how evaluation scales with the cores the sidecar is given).

    python bench/worker_pool.py [--records 480] [--processes 1,2] [--rounds 3]

Records: a 500-word context and a 60-word answer (the detector bench's synthetic text),
sent in batches of 16 as the evaluation stage sends them, as many batches at once as the
pool has slots (`DEPTH` per worker).
Also prints the resident memory (VmRSS) of this process and of each worker once warm.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from monitor.evaluators.base import EvaluatorSpec  # noqa: E402
from monitor.processors.evaluate import CpuPool  # noqa: E402
from monitor.records import RagRecord  # noqa: E402
from monitor.telemetry import create_telemetry  # noqa: E402

NAMES = ("local_groundedness", "local_relevance", "local_retrieval", "local_safety")
BATCH = 16


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def records(n: int) -> list[RagRecord]:
    import detector_quality

    rng = random.Random(7)
    out = []
    for i in range(n):
        context = detector_quality._synthetic(rng, 500)
        half = len(context) // 2
        out.append(
            RagRecord.model_validate(
                {
                    "request_id": f"r{i}",
                    "query": "what does the report say?",
                    "retrieved_context": [{"content": context[:half]}, {"content": context[half:]}],
                    "response": detector_quality._synthetic(rng, 60),
                }
            )
        )
    return out


async def throughput(processes: int, batch_list: list[list[RagRecord]]) -> dict[str, float]:
    pool = CpuPool([EvaluatorSpec(name=n) for n in NAMES], processes, 300.0, create_telemetry())
    await pool.start()
    try:
        await asyncio.gather(*(pool.score([(r, NAMES) for r in b]) for b in batch_list[:processes]))
        rss = {"main_rss_mb": rss_mb(os.getpid())}
        for i, pid in enumerate(sorted(pool.pids)):
            rss[f"worker{i}_rss_mb"] = rss_mb(pid)
        queue: asyncio.Queue[list[RagRecord]] = asyncio.Queue()
        for b in batch_list:
            queue.put_nowait(b)

        async def drain() -> None:
            while not queue.empty():
                batch = queue.get_nowait()
                await pool.score([(r, NAMES) for r in batch])

        started = time.perf_counter()
        await asyncio.gather(*(drain() for _ in range(pool.slots)))
        wall = time.perf_counter() - started
    finally:
        await pool.close(10.0)
    done = sum(len(b) for b in batch_list)
    return {"records_per_s": done / wall, **rss}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=480)
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; medians")
    args = parser.parse_args()
    recs = records(args.records)
    batches = [recs[i : i + BATCH] for i in range(0, len(recs), BATCH)]
    print(f"{os.cpu_count()} CPUs, affinity {len(os.sched_getaffinity(0))}, load {os.getloadavg()}")
    rates: dict[int, list[float]] = {}
    for _ in range(args.rounds):
        for processes in (int(p) for p in args.processes.split(",")):
            row = asyncio.run(throughput(processes, batches))
            rates.setdefault(processes, []).append(row["records_per_s"])
            memory = ", ".join(f"{k} {v:.0f}" for k, v in row.items() if k.endswith("_mb"))
            print(f"processes {processes}: {row['records_per_s']:.1f} records/s; RSS MB: {memory}")
    medians = {p: statistics.median(r) for p, r in rates.items()}
    for processes, median in medians.items():
        print(f"processes {processes}: median {median:.1f} records/s")
        if processes != 1 and 1 in medians:
            print(f"scaling {processes} vs 1 worker process: {median / medians[1]:.2f}x")


if __name__ == "__main__":
    main()
