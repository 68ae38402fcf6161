"""Local evaluation in worker processes: records per second through the pool that runs
the four local evaluators (`pipeline.processes`), with 1 and with 2 worker processes in
one run, and their ratio (how evaluation scales with the cores the sidecar is given).

    python bench/worker_pool.py [--records 320] [--processes 2] [--rounds 6]

Records: a 500-word context and a 60-word answer (the detector bench's synthetic text),
sent in batches of 16 as the evaluation stage sends them, as many batches at once as the
pool has slots (`DEPTH` per worker). Both pools are started first and then measured in
turns, so that on a shared machine both rates of a round see the same minutes; the
scaling is the median of the rounds' ratios. Also prints the resident memory (VmRSS) of
this process and of each worker once warm.
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

from bench import _docs  # noqa: E402
from monitor.config import EvaluatorConfig  # noqa: E402
from monitor.pool import ProcessPool  # noqa: E402
from monitor.processors._scoring import PRELOAD, score, scorer_initializer  # noqa: E402
from monitor.records import RagRecord  # noqa: E402
from monitor.telemetry import create_telemetry  # noqa: E402

NAMES = ("local_groundedness", "local_relevance", "local_retrieval", "local_safety")
BATCH = 16
# The project's target for 2 workers against 1 on 2 CPUs (docs/performance.md, "Targets").
TARGET_SCALING = 1.8


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def records(n: int) -> list[RagRecord]:
    from bench import detector_quality

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


def _pool(processes: int) -> ProcessPool:
    specs = [EvaluatorConfig(name=n) for n in NAMES]
    return ProcessPool(
        processes,
        300.0,
        create_telemetry(),
        initializers=[scorer_initializer(specs)],
        preload=PRELOAD,
    )


async def _drain(pool: ProcessPool, batch_list: list[list[RagRecord]]) -> float:
    """Records per second through a started pool, as many batches at once as it has
    slots (as the evaluation stage sends them)."""
    queue: asyncio.Queue[list[RagRecord]] = asyncio.Queue()
    for b in batch_list:
        queue.put_nowait(b)

    async def drain() -> None:
        while not queue.empty():
            batch = queue.get_nowait()
            await score(pool, [(r, NAMES) for r in batch])

    started = time.perf_counter()
    await asyncio.gather(*(drain() for _ in range(pool.slots)))
    return sum(len(b) for b in batch_list) / (time.perf_counter() - started)


async def _warm(pool: ProcessPool, batch_list: list[list[RagRecord]]) -> dict[str, float]:
    """Start `pool`, score a batch in every worker, and read the resident memory."""
    await pool.start()
    await asyncio.gather(*(score(pool, [(r, NAMES) for r in b]) for b in batch_list[: pool.size]))
    rss = {"main_rss_mb": rss_mb(os.getpid())}
    for i, pid in enumerate(sorted(pool.pids)):
        rss[f"worker{i}_rss_mb"] = rss_mb(pid)
    return rss


async def throughput(processes: int, batch_list: list[list[RagRecord]]) -> dict[str, float]:
    """One pool of `processes` workers: records per second, and memory once warm."""
    pool = _pool(processes)
    try:
        rss = await _warm(pool, batch_list)
        rate = await _drain(pool, batch_list)
    finally:
        await pool.shutdown(10.0)
    return {"records_per_s": rate, **rss}


async def scaling(
    processes: int, batch_list: list[list[RagRecord]], rounds: int
) -> dict[str, list[float]]:
    """A pool of 1 worker and one of `processes`, both started (idle workers cost no
    CPU), measured in turns (1, N, N, 1, ...) so that both see the machine of the same
    minutes; per round the two rates and their ratio."""
    one, many = _pool(1), _pool(processes)
    out: dict[str, list[float]] = {"one": [], "many": [], "ratio": []}
    try:
        await _warm(one, batch_list)
        await _warm(many, batch_list)
        for i in range(rounds):
            order = (one, many) if i % 2 == 0 else (many, one)
            rates = {id(pool): await _drain(pool, batch_list) for pool in order}
            out["one"].append(rates[id(one)])
            out["many"].append(rates[id(many)])
            out["ratio"].append(rates[id(many)] / rates[id(one)])
    finally:
        await one.shutdown(10.0)
        await many.shutdown(10.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=320)
    parser.add_argument("--processes", type=int, default=2, help="against 1 worker process")
    parser.add_argument("--rounds", type=int, default=6, help="rounds in turns; medians")
    _docs.add_flag(parser)
    args = parser.parse_args()
    print(_docs.machine())
    recs = records(args.records)
    batches = [recs[i : i + BATCH] for i in range(0, len(recs), BATCH)]
    memory: dict[int, str] = {}
    for processes in (1, args.processes):
        row = asyncio.run(throughput(processes, batches))
        memory[processes] = ", ".join(
            f"{k.removesuffix('_rss_mb')} {v:.0f}" for k, v in row.items() if k.endswith("_mb")
        )
    result = asyncio.run(scaling(args.processes, batches, args.rounds))
    for one, many, ratio in zip(result["one"], result["many"], result["ratio"], strict=True):
        print(
            f"round: 1 worker {one:.1f} records/s, {args.processes} workers {many:.1f}: "
            f"{ratio:.2f}x"
        )
    scaling_x = statistics.median(result["ratio"])
    rows = [
        [f"{n} worker{'s' if n > 1 else ''}", f"{statistics.median(rates):.1f}", memory[n]]
        for n, rates in ((1, result["one"]), (args.processes, result["many"]))
    ]
    table = _docs.table(["pool", "records/s, median of the rounds", "RSS once warm, MB"], rows)
    verdict = "met" if scaling_x >= TARGET_SCALING else "not met"
    summary = (
        f"Scaling, {args.processes} workers against 1: **{scaling_x:.2f}×** (median of "
        f"{args.rounds} rounds' ratios, {min(result['ratio']):.2f}× to "
        f"{max(result['ratio']):.2f}×); target ≥ {TARGET_SCALING}× on 2 CPUs: {verdict}."
    )
    print(f"{table}\n\n{summary}")
    if args.write_docs:
        _docs.write_block("docs/performance.md", "worker-pool", f"{table}\n\n{summary}")


if __name__ == "__main__":
    main()
