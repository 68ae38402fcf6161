"""Kafka ingest throughput: small JSON records consumed and evaluated, per CPU second.

    python bench/kafka_ingest.py [--records 50000] [--partitions 4] [--bootstrap HOST:PORT]
                                 [--rates 0,0.001,0.01,0.1,1] [--processes 0,1]
                                 [--side-by-side] [--no-pin]

Without `--bootstrap` it starts a noida-db broker on a free port (as the tests do). It
produces `--records` small native JSON records (one per message) once, then, each in a
fresh interpreter as a newly started monitor would be, with all its threads pinned to one
CPU and its evaluation worker processes on the other CPUs (the target is per core of the
ingest process; `--no-pin` lets everything spread):

- the ceiling: kafka-python alone polling the topic, nothing done per record; with
  `--side-by-side`, beside each monitor run on the same CPU over the same seconds (on a
  shared host the machine's speed moves between runs, and the ratio holds only so);
- for each sampling rate, the real pipeline (Kafka receiver → evaluation stage with the
  default local evaluators → metrics sink) in a new consumer group, from the first record
  consumed to the last one finished: records/s (wall clock), records per CPU second of
  the process (the "one core" figure: the consumer thread, kafka-python's network thread
  and the event loop share the GIL), that as a share of the ceiling, and evaluations run.

It also prints the per-record CPU cost, measured in isolation, of kafka-python's fetch
and of `decode_message` (JSON into a `RawRecord`, validated only if sampled).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.consumer.fetcher import ConsumerRecord

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ingest import descendants
from harness import bench_docs, bench_smoke
from monitor.config import Config
from monitor.receivers.kafka._messages import decode_message
from monitor.service import Service, tune_gc

# The project's targets, per CPU-second of the ingest process, at this (sampling rate,
# evaluation worker processes): docs/performance.md, "Targets".
TARGET_RUN = (0.01, 1)
TARGET_PER_CPU_S = 30_000
TARGET_SHARE = 0.40


def _record(i: int) -> bytes:
    return json.dumps(
        {
            "request_id": f"bench-{i}",
            "service": "bench",
            "request": f"What is the opening time of store {i % 97}?",
            "retrieved_context": [{"content": f"Store {i % 97} opens at 9am every day."}],
            "response": f"Store {i % 97} opens at 9am.",
        }
    ).encode()


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=20, batch_size=512 * 1024, compression_type="lz4"
    )
    started = time.perf_counter()
    for i in range(records):
        producer.send(topic, _record(i), partition=i % partitions)
    producer.flush()
    producer.close()
    return records / (time.perf_counter() - started)


# Set by `_measure` when pinned: this process's CPU, and the CPUs for its workers.
_PINNED: list[set[int]] = []


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def consume(
    bootstrap: str,
    topic: str,
    records: int,
    rate: float,
    run: int,
    processes: int,
    start: str = "",
) -> dict[str, float]:
    """The monitor consuming `records` at sampling `rate`; `start`: a file created when
    the measured window opens (`side_by_side`)."""
    cfg = Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}},
                "kafka": {
                    "enabled": True,
                    "bootstrap_servers": [bootstrap],
                    "topics": [topic],
                    "group_id": f"bench-{topic}-{run}",
                    "session_timeout_ms": 6000,
                    "heartbeat_interval_ms": 2000,
                },
            },
            "sampling": {"rate": rate},
            "pipeline": {"queue_size": 5000, "processes": processes},
        }
    )
    service = Service(cfg, serve_http=False)

    def processed() -> int:
        """Records finished: evaluated, or found unsampled by the trace stage. Reads the
        one counter it needs: collecting the whole registry (process metrics read /proc)
        every poll would cost the measured process a fifth of its CPU."""
        unsampled = sum(
            s.value
            for family in service.trace.unsampled.collect()
            for s in family.samples
            if s.name.endswith("_total")
        )
        return int(unsampled) + service.stage.completed

    await service.start()
    if _PINNED:  # the evaluation workers (and their forkserver) off this process's CPU
        for child in descendants(os.getpid()):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(child, _PINNED[1])
    try:
        while processed() == 0:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        wall0, cpu0, done0 = time.perf_counter(), _cpu(), processed()
        if start:
            os.close(os.open(start, os.O_CREAT | os.O_WRONLY))  # tiny: no thread hop
        while processed() < records:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
        finished = processed() - done0
        evaluations = sum(
            s.value
            for family in service.telemetry.registry.collect()
            for s in family.samples
            if s.name == "rag_monitor_evaluations_total"
        )
    finally:
        await service.shutdown(30)
    return {
        "rate": rate,
        "processes": processes,
        "records_per_s": finished / wall,
        "records_per_cpu_s": finished / cpu,
        "cpu_share": cpu / wall,
        "evaluations": evaluations,
    }


def client_only(
    bootstrap: str, topic: str, records: int, start: str = "", stop: str = ""
) -> dict[str, float]:
    """The ceiling: kafka-python consuming the topic with nothing done per record. With
    `start` and `stop` files (`side_by_side`), it reads the topic over and over, measuring
    from when `start` exists until `stop` does: the window of the monitor beside it."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    in_pass = 0

    def poll() -> int:
        nonlocal in_pass
        got = sum(len(batch) for batch in consumer.poll(timeout_ms=500).values())
        in_pass += got
        if stop and in_pass >= records:  # read it all: again, until told to stop
            consumer.seek_to_beginning(*partitions)
            in_pass = 0
        return got

    seen = 0
    while seen == 0:
        seen += poll()
    if stop:  # reading: the monitor's window may open
        Path(f"{stop}.ready").touch()
    while start and not os.path.exists(start):
        seen += poll()
    wall0, cpu0, seen0 = time.perf_counter(), _cpu(), seen
    while not os.path.exists(stop) if stop else seen < records:
        seen += poll()
    wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
    consumer.close()
    return {"records_per_s": (seen - seen0) / wall, "records_per_cpu_s": (seen - seen0) / cpu}


def in_fresh_process(name: str, *args: Any, pin: bool = True) -> dict[str, float]:
    """Run the measurement `name` (`consume` or `client_only`) in a new interpreter, as
    a freshly started monitor: no heap, threads or clients left over from earlier runs
    (in one process, later runs measured up to 30% slower). `pin` keeps every thread of
    that interpreter on one CPU: the "one core" of the target, and the broker and producer
    stay off it."""
    done = subprocess.run(
        [sys.executable, __file__, "--measure", json.dumps([name, pin, *args])],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def side_by_side(
    bootstrap: str, topic: str, records: int, rate: float, run: int, processes: int, pin: bool
) -> tuple[dict[str, float], dict[str, float]]:
    """The monitor (`consume`) and kafka-python alone (`client_only`), each in a fresh
    interpreter, on the same CPU over the same seconds: both figures see the same machine
    (its clock, other jobs), so their ratio holds on a shared host. Returns both."""
    with tempfile.TemporaryDirectory() as tmp:
        start, stop = str(Path(tmp) / "start"), str(Path(tmp) / "stop")
        client = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--measure",
                json.dumps(["client_only", pin, bootstrap, topic, records, start, stop]),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            # The monitor's window opens once the client reads: a client slower to start
            # than the monitor's whole window would measure nothing.
            while not Path(f"{stop}.ready").exists():
                if client.poll() is not None:
                    raise SystemExit(f"kafka-python alone exited {client.returncode}")
                time.sleep(0.05)  # polling for a file the client writes
            row = in_fresh_process(
                "consume", bootstrap, topic, records, rate, run, processes, start, pin=pin
            )
        finally:
            Path(stop).touch()
            out, _ = client.communicate(timeout=120)
        ceiling: dict[str, float] = json.loads(out.splitlines()[-1])
    return row, ceiling


def _measure(spec: str) -> None:
    name, pin, *args = json.loads(spec)
    if pin:
        # Threads started from here on inherit the mask (kafka-python's, the executor's);
        # the evaluation workers go to the other CPUs (`consume`).
        cpus = os.sched_getaffinity(0)
        mine = max(cpus)
        _PINNED.extend([{mine}, (cpus - {mine}) or {mine}])
        os.sched_setaffinity(0, {mine})
    tune_gc()  # as `rag-monitor run` does
    if name == "consume":
        result = asyncio.run(consume(*args))
    else:
        result = client_only(*args)
    print(json.dumps(result))


def per_record_costs(bootstrap: str, topic: str, sample: int) -> dict[str, float]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    messages: list[ConsumerRecord] = []
    started = time.process_time()
    while len(messages) < sample:
        for batch in consumer.poll(timeout_ms=500, max_records=5000).values():
            messages.extend(batch)
    fetch = (time.process_time() - started) / len(messages)
    consumer.close()
    started = time.process_time()
    for m in messages:
        decode_message(m.value, "auto")
    decode = (time.process_time() - started) / len(messages)
    return {"fetch_us": fetch * 1e6, "decode_us": decode * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap", help="an existing broker; default: start noida-db")
    parser.add_argument("--rates", default="0,0.001,0.01,0.1,1", help="sampling rates to run")
    parser.add_argument(
        "--processes",
        default="0,1",
        help="pipeline.processes values to run each rate with (0: evaluation in the ingest "
        "process; the CPU figures are the ingest process's own, workers excluded)",
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="let the measured process use every CPU"
    )
    parser.add_argument(
        "--side-by-side",
        action="store_true",
        help="run kafka-python alone beside each monitor run, on the same CPU over the same "
        "seconds (side_by_side), instead of once before them",
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # one run, in_fresh_process
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, records=400, partitions=2, rates="0.01", processes="0")
    logging.basicConfig(level=logging.WARNING)
    if args.measure:
        _measure(args.measure)
        return
    with ExitStack() as stack:
        bootstrap = args.bootstrap
        if bootstrap is None:
            from harness.kafka_broker import running_broker

            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            bootstrap = stack.enter_context(running_broker("noida", workdir)).bootstrap
        pin = not args.no_pin
        topic = f"bench-{int(time.time())}"
        produced = produce(bootstrap, topic, args.records, args.partitions)
        print(
            f"produced {args.records} records into {args.partitions} partitions ({produced:,.0f}/s)"
        )
        costs = per_record_costs(bootstrap, topic, min(20_000, args.records // args.partitions))
        print(
            "per record, in isolation: kafka-python fetch+parse {fetch_us:.1f} us, "
            "decode (JSON into a record, validated only if sampled) {decode_us:.1f} us".format(
                **costs
            )
        )
        if not args.side_by_side:
            ceiling = in_fresh_process("client_only", bootstrap, topic, args.records, pin=pin)
            print(
                f"kafka-python alone (poll, nothing done per record; the ceiling): "
                f"{ceiling['records_per_s']:,.0f} records/s, "
                f"{ceiling['records_per_cpu_s']:,.0f} per CPU s"
            )
        reference = (
            "kafka-python alone, side by side" if args.side_by_side else "kafka-python alone"
        )
        header = [
            "sampling",
            "processes",
            "records/s",
            "records per CPU-s",
            f"{reference}, per CPU-s",
            "share of it",
            "CPU used",
            "evaluations",
        ]
        rows: list[list[str]] = []
        met: list[str] = []
        runs = [
            (float(rate), int(processes))
            for rate in args.rates.split(",")
            for processes in args.processes.split(",")
        ]
        for run, (rate, processes) in enumerate(runs):
            if args.side_by_side:
                row, ceiling = side_by_side(
                    bootstrap, topic, args.records, rate, run, processes, pin
                )
            else:
                row = in_fresh_process(
                    "consume", bootstrap, topic, args.records, rate, run, processes, pin=pin
                )
            share = row["records_per_cpu_s"] / ceiling["records_per_cpu_s"]
            rows.append(
                [
                    f"{row['rate']:g}",
                    f"{row['processes']:g}",
                    f"{row['records_per_s']:,.0f}",
                    f"{row['records_per_cpu_s']:,.0f}",
                    f"{ceiling['records_per_cpu_s']:,.0f}",
                    f"{share:.0%}",
                    f"{row['cpu_share']:.2f}",
                    f"{row['evaluations']:,.0f}",
                ]
            )
            print(" | ".join(rows[-1]), flush=True)
            if (rate, processes) == TARGET_RUN:
                met.append(_targets(row["records_per_cpu_s"], share))
        table = bench_docs.table(header, rows)
        notes = (
            f"Per record, in isolation: kafka-python's fetch and parse {costs['fetch_us']:.1f} µs, "
            f"decoding (JSON into a record, validated only if sampled) {costs['decode_us']:.1f} µs."
        )
        body = "\n\n".join([table, notes, *met])
        print(f"\n{body}")
        if args.write_docs:
            bench_docs.write_block("docs/performance.md", "kafka", body)


def _targets(per_cpu_s: float, share: float) -> str:
    """The project's targets for sampling 0.01 with one evaluation worker."""
    first = "met" if per_cpu_s >= TARGET_PER_CPU_S else "not met"
    second = "met" if share >= TARGET_SHARE else "not met"
    return (
        f"Targets at sampling {TARGET_RUN[0]:g} with {TARGET_RUN[1]} worker: "
        f"≥ {TARGET_PER_CPU_S:,} records per CPU-second of the ingest process: {first}; "
        f"≥ {TARGET_SHARE:.0%} of kafka-python alone: {second}."
    )


if __name__ == "__main__":
    main()
