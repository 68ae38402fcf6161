"""The evaluation stage's task in worker processes: sampled traces per second through the
pool that extracts them and runs the four local evaluators (`pipeline.processes`), with 1
and with 2 worker processes in one run, and their ratio (how evaluation scales with the
cores the sidecar is given).

    python bench/worker_pool.py [--records 320] [--processes 2] [--rounds 6]

Traces: one span each, as the OTLP receivers decode it (attributes still serialized),
whose `rag.*` attributes give a 500-word context in two documents and a 60-word answer
(the detector bench's synthetic text); sent through the stage's task runner in batches of
16 as the evaluation stage sends them, as many batches at once as the pool has slots
(`DEPTH` per worker): extraction and scoring in one task, the records and results back.
Both pools are started first and then measured in turns, so that on a shared machine both
rates of a round see the same minutes, each round on texts neither pool has read; the
scaling is the median of the rounds' ratios.
Also prints the resident memory (VmRSS) of this process and of each worker once warm.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan  # noqa: E402

from harness import bench_docs, bench_smoke  # noqa: E402
from monitor.config import EvaluatorConfig  # noqa: E402
from monitor.evaluators.base import CpuScorer  # noqa: E402
from monitor.evaluators.factory import BuildContext  # noqa: E402
from monitor.evaluators.registry import build  # noqa: E402
from monitor.pool import ProcessPool  # noqa: E402
from monitor.processors.evaluation import PRELOAD, Settings, worker_initializer  # noqa: E402
from monitor.processors.evaluation._runner import TaskRunner  # noqa: E402
from monitor.processors.evaluation._task import Job  # noqa: E402
from monitor.spans import Span, decode_protobuf  # noqa: E402
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


Trace = list[Span]


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def traces(n: int, seed: int = 7) -> list[Trace]:
    """`n` one-span RAG traces, decoded as the OTLP receivers decode them; another seed
    gives other texts."""
    from bench import detector_quality

    rng = random.Random(seed)
    spans = []
    for _ in range(n):
        context = detector_quality._synthetic(rng, 500)
        half = len(context) // 2
        attributes = [
            _kv("rag.query", "what does the report say?"),
            _kv("rag.context", json.dumps([context[:half], context[half:]])),
            _kv("rag.response", detector_quality._synthetic(rng, 60)),
        ]
        spans.append(
            ProtoSpan(
                trace_id=rng.randbytes(16),
                span_id=rng.randbytes(8),
                name="ask",
                start_time_unix_nano=1,
                end_time_unix_nano=2,
                attributes=attributes,
            )
        )
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    )
    return [[span] for span in decode_protobuf(request.SerializeToString(), lazy=True).spans]


class Pool:
    """A pool of `processes` workers and the evaluation stage's task runner on it."""

    def __init__(self, processes: int) -> None:
        specs = [EvaluatorConfig(name=n) for n in NAMES]
        settings = Settings()
        self.processes = ProcessPool(
            processes,
            300.0,
            create_telemetry(),
            initializer=worker_initializer(specs, settings),
            preload=PRELOAD,
        )
        scorers = {}
        for spec in specs:
            scorer = build(spec, BuildContext())
            assert isinstance(scorer, CpuScorer)
            scorers[spec.name] = scorer
        self.runner = TaskRunner(
            self.processes,
            scorers,
            settings,
            evaluation_timeout_s=300.0,
            extraction_timeout_s=10.0,
        )

    async def run(self, batch: list[Trace]) -> None:
        done = await self.runner.run([Job(NAMES, spans=spans) for spans in batch])
        for trace in done:
            assert trace.scored is not None and len(trace.scored) == 1, trace


async def _drain(pool: Pool, batch_list: list[list[Trace]]) -> float:
    """Traces per second through a started pool, as many batches at once as it has
    slots (as the evaluation stage sends them)."""
    queue: asyncio.Queue[list[Trace]] = asyncio.Queue()
    for b in batch_list:
        queue.put_nowait(b)

    async def drain() -> None:
        while not queue.empty():
            await pool.run(queue.get_nowait())

    started = time.perf_counter()
    await asyncio.gather(*(drain() for _ in range(pool.processes.slots)))
    return sum(len(b) for b in batch_list) / (time.perf_counter() - started)


async def _warm(pool: Pool, batch_list: list[list[Trace]]) -> dict[str, float]:
    """Start `pool`, run a batch in every worker, and read the resident memory."""
    await pool.processes.start()
    await asyncio.gather(*(pool.run(b) for b in batch_list[: pool.processes.size]))
    rss = {"main_rss_mb": rss_mb(os.getpid())}
    for i, pid in enumerate(sorted(pool.processes.pids)):
        rss[f"worker{i}_rss_mb"] = rss_mb(pid)
    return rss


async def throughput(processes: int, batch_list: list[list[Trace]]) -> dict[str, float]:
    """One pool of `processes` workers: traces per second, and memory once warm."""
    pool = Pool(processes)
    try:
        rss = await _warm(pool, batch_list)
        rate = await _drain(pool, batch_list)
    finally:
        await pool.processes.shutdown(10.0)
    return {"traces_per_s": rate, **rss}


def batches(n: int, seed: int) -> list[list[Trace]]:
    """`n` traces (`traces`) in batches of `BATCH`, as the evaluation stage sends them."""
    made = traces(n, seed)
    return [made[i : i + BATCH] for i in range(0, len(made), BATCH)]


async def scaling(processes: int, n: int, rounds: int) -> dict[str, list[float]]:
    """A pool of 1 worker and one of `processes`, both started (idle workers cost no
    CPU), measured in turns (1, N, N, 1, ...) so that both see the machine of the same
    minutes; per round the two rates and their ratio. Each round's `n` traces are new
    texts, the same for both pools: the detector caches what it read of a text, so a
    worker given texts it has seen would score them faster than a fresh one."""
    one, many = Pool(1), Pool(processes)
    out: dict[str, list[float]] = {"one": [], "many": [], "ratio": []}
    try:
        await _warm(one, batches(n, seed=1_000))
        await _warm(many, batches(n, seed=1_001))
        for i in range(rounds):
            order = (one, many) if i % 2 == 0 else (many, one)
            fresh = batches(n, seed=i)
            rates = {id(pool): await _drain(pool, fresh) for pool in order}
            out["one"].append(rates[id(one)])
            out["many"].append(rates[id(many)])
            out["ratio"].append(rates[id(many)] / rates[id(one)])
    finally:
        await one.processes.shutdown(10.0)
        await many.processes.shutdown(10.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=320)
    parser.add_argument("--processes", type=int, default=2, help="against 1 worker process")
    parser.add_argument("--rounds", type=int, default=6, help="rounds in turns; medians")
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, records=16, rounds=1)
    print(bench_docs.machine())
    memory: dict[int, str] = {}
    for processes in (1, args.processes):
        row = asyncio.run(throughput(processes, batches(args.records, seed=7)))
        memory[processes] = ", ".join(
            f"{k.removesuffix('_rss_mb')} {v:.0f}" for k, v in row.items() if k.endswith("_mb")
        )
    result = asyncio.run(scaling(args.processes, args.records, args.rounds))
    for one, many, ratio in zip(result["one"], result["many"], result["ratio"], strict=True):
        print(
            f"round: 1 worker {one:.1f} traces/s, {args.processes} workers {many:.1f}: {ratio:.2f}x"
        )
    scaling_x = statistics.median(result["ratio"])
    rows = [
        [f"{n} worker{'s' if n > 1 else ''}", f"{statistics.median(rates):.1f}", memory[n]]
        for n, rates in ((1, result["one"]), (args.processes, result["many"]))
    ]
    table = bench_docs.table(["pool", "traces/s, median of the rounds", "RSS once warm, MB"], rows)
    verdict = "met" if scaling_x >= TARGET_SCALING else "not met"
    summary = (
        f"Scaling, {args.processes} workers against 1: **{scaling_x:.2f}×** (median of "
        f"{args.rounds} rounds' ratios, {min(result['ratio']):.2f}× to "
        f"{max(result['ratio']):.2f}×); target ≥ {TARGET_SCALING}× on 2 CPUs: {verdict}."
    )
    print(f"{table}\n\n{summary}")
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "worker-pool", f"{table}\n\n{summary}")


if __name__ == "__main__":
    main()
