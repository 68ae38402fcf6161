"""Every benchmark in one run, one table: measured figure, a reference point measured in
the same run on the same machine, and their ratio.

    python bench/all.py [--seconds 10] [--kafka-records 40000] [--judge-records 96]
                        [--skip ingest,kafka,evaluation,pool,judge,memory] [--pool-traces 320]

| row | measured | reference point (same run) |
|---|---|---|
| OTLP/HTTP, OTLP/gRPC ingest | spans/s accepted by a running `rag-monitor run` (`bench/ingest.py`: 512-span requests, sampling 1%, four local evaluators; the ingest process pinned to CPU 0, its evaluation worker and the load generator on the other CPU), and spans per server CPU-second | raw protobuf parse of the same payload, one thread (the ceiling: nothing can ingest faster than protobuf parses) |
| OTLP/HTTP at 1% per server CPU-s | spans per CPU-second of a monitor's ingest process at sampling 1% (`bench/ingest.py --sampling-cost`) | the same with nothing sampled, the two monitors loaded side by side on the same CPU over the same seconds; the ratio is the median of 3 rounds' |
| Kafka per CPU-s | records per CPU-second of the ingest process (one evaluation worker, on the other CPU), consumed, evaluated at `--kafka-sampling` and at 0, committed (`bench/kafka_ingest.py --side-by-side`, noida-db broker) | kafka-python alone polling the same topic, nothing done per record, beside it on the same CPU over the same seconds; medians of 2 rounds |
| evaluation | CPU ms per record, four local evaluators through the real `EvaluationStage` (500-word context, 60-word answer) | the four evaluators called directly on the same records, as `bench/local_scoring.py` calls them, in turns with the stage; the ratio (median of 3 rounds') is what the stage adds |
| local evaluation in worker processes | records/s through the pool with 2 worker processes (`bench/worker_pool.py`) | the same with 1 worker process, both pools measured in turns; the ratio is the median of 6 rounds' |
| judge | records/s through the stage with a judge of fixed latency L and concurrency C (`bench/judge_pipeline.py`) | C/L, the most a judge of that latency and concurrency allows |
| peak RSS | VmHWM of the monitor during the ingest runs | RSS of the same monitor idle right after start |

The machine (nproc, CPU model, load average before and after) is printed with the table:
on a shared machine even CPU-time figures move between runs (the CPU's speed does), so the
ratios that carry targets pair their two sides in time (side by side, or in turns).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harness import bench_docs, bench_smoke  # noqa: E402

# name, measured, unit, reference name, reference, and the ratio when it is not
# measured / reference (the median of paired rounds' ratios)
Row = tuple[str, float, str, str, float, float | None]


def ingest_rows(seconds: float, warmup: float) -> tuple[list[Row], float]:
    from bench import ingest
    from harness.otlp_load import build_payload

    payload, _ = build_payload(random.Random(0), 0)
    ceiling = ingest.reference(payload, 0)["raw protobuf parse"]
    rows: list[Row] = []
    peak = 0.0
    for protocol in ("http", "grpc"):
        result = ingest.run_protocol(protocol, seconds, 4, 0, warmup=warmup)
        name = f"OTLP/{protocol.upper() if protocol == 'http' else 'gRPC'} ingest"
        ref = "raw protobuf parse, 1 thread"
        rows.append((name, result["spans_accepted_per_s"], "spans/s", ref, ceiling, None))
        per_cpu = result["spans_per_cpu_s"]
        rows.append((f"  {name} per server CPU-s", per_cpu, "spans/CPU-s", ref, ceiling, None))
        peak = max(peak, result["peak_rss_mb"])
    return rows, peak


def sampling_cost_rows(seconds: float, warmup: float, rounds: int = 3) -> list[Row]:
    """What the sampled 1% costs the ingest process: a monitor at 1% beside one with
    nothing sampled (`bench/ingest.py --sampling-cost`), medians of `rounds`."""
    from bench import ingest

    runs = [ingest.sampling_cost("http", seconds, 4, warmup=warmup) for _ in range(rounds)]
    return [
        ("OTLP/HTTP ingest at 1% per server CPU-s",
         statistics.median(r["sampled_spans_per_cpu_s"] for r in runs), "spans/CPU-s",
         "nothing sampled, side by side on the same CPU",
         statistics.median(r["reference_spans_per_cpu_s"] for r in runs),
         statistics.median(r["ratio"] for r in runs)),
    ]  # fmt: skip


def kafka_rows(records: int, sampling: float, rounds: int = 2) -> list[Row]:
    """Records per CPU-second of the ingest process (one evaluation worker process, on
    another CPU) against kafka-python alone beside it on the same CPU, at `sampling` and
    with nothing sampled; medians of `rounds`."""
    from bench import kafka_ingest as kafka
    from harness.kafka_broker import running_broker

    runs: dict[float, list[tuple[dict[str, float], dict[str, float]]]] = {sampling: [], 0.0: []}
    with tempfile.TemporaryDirectory() as tmp, running_broker("noida", Path(tmp)) as broker:
        topic = f"bench-all-{int(time.time())}"
        kafka.produce(broker.bootstrap, topic, records, 4)
        for i in range(rounds):
            for j, rate in enumerate(runs):
                group = 2 * i + j
                runs[rate].append(
                    kafka.side_by_side(broker.bootstrap, topic, records, rate, group, 1, True)
                )
    ref = "kafka-python alone, side by side"
    rows: list[Row] = []
    for rate, pairs in runs.items():
        rows.append(
            (f"Kafka ingest per CPU-s (sampling {rate:g})",
             statistics.median(row["records_per_cpu_s"] for row, _ in pairs), "records/CPU-s",
             ref, statistics.median(alone["records_per_cpu_s"] for _, alone in pairs),
             statistics.median(
                 row["records_per_cpu_s"] / alone["records_per_cpu_s"] for row, alone in pairs
             ))
        )  # fmt: skip
    return rows


def pool_rows(traces: int, rounds: int = 6) -> list[Row]:
    """Local evaluation throughput with 2 worker processes against 1, both pools started
    and measured in turns (`bench/worker_pool.py`); medians of the rounds."""
    from bench import worker_pool as pool

    result = asyncio.run(pool.scaling(2, traces, rounds))
    return [
        ("sampled traces extracted and scored, 2 worker processes", statistics.median(result["many"]),
         "traces/s", "1 worker process, in turns", statistics.median(result["one"]),
         statistics.median(result["ratio"])),
    ]  # fmt: skip


def evaluation_rows(records: int = 120, rounds: int = 3) -> list[Row]:
    from bench import local_scoring
    from monitor.component import SampledRecord
    from monitor.config import Config
    from monitor.processors.evaluation import EvaluationStage
    from monitor.service import Service

    batch = local_scoring.synthetic_records(records)
    four = local_scoring.scorers()
    local_scoring.cpu_ms(batch[:16], four, 1)  # warm

    async def through_stage() -> float:
        config = Config.model_validate(
            {
                "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
                # In this process, so that its CPU time is the evaluation's.
                "pipeline": {"processes": 0},
            }
        )
        service = Service(config, serve_http=False, with_receivers=False)
        stage: EvaluationStage = service.stage
        await stage.start()
        every = frozenset(e.name for e in config.evaluators)
        started = time.process_time()
        for record in batch:
            await stage.put_many([SampledRecord(record, "bench", every)])
        await stage.shutdown(120)
        return (time.process_time() - started) / len(batch) * 1000

    # In turns, so that a slower moment of a shared machine hits both sides of a round.
    stage_ms, direct_ms = [], []
    for _ in range(rounds):
        local_scoring.clear_text_caches()  # both sides meet the texts as new ones
        stage_ms.append(asyncio.run(through_stage()))
        direct_ms.append(sum(local_scoring.cpu_ms(batch, four, 1).values()))
    ratio = statistics.median(s / d for s, d in zip(stage_ms, direct_ms, strict=True))
    return [
        ("evaluation, 4 local evaluators via stage", statistics.median(stage_ms),
         "CPU ms/record", "the 4 called directly, same records, in turns",
         statistics.median(direct_ms), ratio),
    ]  # fmt: skip


def judge_rows(records: int, latency: float = 0.5, concurrency: int = 8) -> list[Row]:
    from bench import judge_pipeline as judge

    with judge.running_stub(latency) as port:
        result = asyncio.run(judge.throughput(port, latency, concurrency, records))
    return [
        (f"judge, L={latency:g}s C={concurrency}", result["throughput_per_s"], "records/s",
         "C/L", result["ideal_per_s"], None),
    ]  # fmt: skip


def idle_rss_mb() -> float:
    from harness.reliability import MonitorProcess, proc_memory_kb

    with tempfile.TemporaryDirectory() as tmp:
        mon = MonitorProcess(Path(tmp), {"sampling": {"rate": 0.01}}).start()
        try:
            time.sleep(1)
            return proc_memory_kb(mon.pid)["VmRSS"] / 1024
        finally:
            mon.stop()


def table(rows: list[Row]) -> str:
    cells = []
    for name, value, unit, ref_name, ref, paired in rows:
        ratio = paired if paired is not None else value / ref if ref else float("nan")
        digits = 0 if max(value, ref) >= 100 else 2
        cells.append(
            [
                name.strip(),
                f"{value:,.{digits}f}",
                unit,
                ref_name,
                f"{ref:,.{digits}f}",
                f"{ratio:.3g}",
            ]
        )
    header = ["measurement", "value", "unit", "reference point (same run)", "reference", "ratio"]
    return bench_docs.table(header, cells)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10, help="per ingest protocol")
    parser.add_argument("--kafka-records", type=int, default=40_000)
    parser.add_argument("--kafka-sampling", type=float, default=0.01)
    parser.add_argument("--judge-records", type=int, default=96)
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated: ingest,kafka,evaluation,pool,judge,memory (evaluation: pool too)",
    )
    parser.add_argument(
        "--rounds", type=int, help="paired rounds of every row (default: each row's own)"
    )
    parser.add_argument("--evaluation-records", type=int, default=120)
    parser.add_argument("--pool-traces", type=int, default=320, help="per pool and round")
    parser.add_argument(
        "--warmup", type=float, default=3, help="seconds of load before each ingest window"
    )
    bench_docs.add_flag(parser)
    # The smoke run leaves out the rows whose bench has a smoke run of its own (ingest.py,
    # ingest.py --sampling-cost, kafka_ingest.py, worker_pool.py, judge_pipeline.py) and
    # the memory row that needs the ingest runs; mypy checks the calls into them.
    args = bench_smoke.parse_args(
        parser, seconds=1.0, kafka_records=400, judge_records=8, rounds=1,
        evaluation_records=16, pool_traces=16, warmup=0.5,
        skip="ingest,kafka,pool,judge,memory",
    )  # fmt: skip
    rounds = {} if args.rounds is None else {"rounds": args.rounds}
    skip = set(filter(None, args.skip.split(",")))
    logging.basicConfig(level=logging.WARNING)
    before = bench_docs.machine()
    started = time.monotonic()
    rows: list[Row] = []
    peak = 0.0
    idle = 0.0 if "memory" in skip else idle_rss_mb()  # first: later benches set env vars
    if "ingest" not in skip:
        ingest, peak = ingest_rows(args.seconds, args.warmup)
        rows += ingest
        rows += sampling_cost_rows(args.seconds, args.warmup, **rounds)
    if "kafka" not in skip:
        rows += kafka_rows(args.kafka_records, args.kafka_sampling, **rounds)
    if "evaluation" not in skip:
        rows += evaluation_rows(args.evaluation_records, **rounds)
    if not {"evaluation", "pool"} & skip:
        rows += pool_rows(args.pool_traces, **rounds)
    if "judge" not in skip:
        rows += judge_rows(args.judge_records)
    if "memory" not in skip and peak:
        rows.append(("peak RSS during ingest", peak, "MB", "idle monitor RSS", idle, None))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    took = f"load average after: {load}; {time.monotonic() - started:.0f} s in all"
    result = table(rows)
    print(f"\n{result}\n\nmachine before: {before}\n{took}")
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "all", f"{result}\n\n{took}.")


if __name__ == "__main__":
    main()
