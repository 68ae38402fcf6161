"""Kafka ingest throughput: small JSON records consumed and evaluated, per CPU second.

    python bench/kafka_ingest.py [--records 50000] [--partitions 4] [--bootstrap HOST:PORT]
                                 [--rates 0,0.01,0.1,1]

Without `--bootstrap` it starts a noida-db broker on a free port (as the tests do). It
produces `--records` small native JSON records once, then for each sampling rate runs the
real pipeline in this process (Kafka receiver → evaluation stage with the default local
evaluators → metrics sink) in a fresh consumer group, and reports, from the first record
consumed to the last one finished:

- records/s consumed and finished (wall clock), and records per CPU second of this
  process (the "one core" figure: the consumer thread and the event loop share the GIL);
- evaluations run, and the split of CPU cost measured in isolation per record:
  kafka-python fetch+parse, and `decode_message` (JSON + `parse_record`, with the
  Kafka metadata the receiver attaches);
- the receiver alone (a stand-in stage that finishes each record at once): the ceiling
  of fetch + decode + hand-off + offset commits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monitor.config import Config
from monitor.config import KafkaReceiver as KafkaSettings
from monitor.receivers.kafka import KafkaReceiver
from monitor.receivers.kafka_decode import decode_message
from monitor.service import Service, tune_gc
from monitor.telemetry import create_telemetry


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


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def consume(
    bootstrap: str, topic: str, records: int, rate: float, run: int
) -> dict[str, float]:
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
            "pipeline": {"queue_size": 5000},
        }
    )
    service = Service(cfg, serve_http=False)
    await service.start()
    try:
        while service.stage.completed == 0:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        wall0, cpu0, done0 = time.perf_counter(), _cpu(), service.stage.completed
        while service.stage.completed < records:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
        finished = service.stage.completed - done0
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
        "records_per_s": finished / wall,
        "records_per_cpu_s": finished / cpu,
        "cpu_share": cpu / wall,
        "evaluations": evaluations,
    }


class _FinishAtOnce:
    """Stands in for the evaluation stage to measure the receiver alone."""

    def __init__(self) -> None:
        self.completed = 0

    def skips(self, record: Any) -> bool:
        return False  # every record goes through the hand-off

    def count_skipped(self, records: list[Any], source: str) -> None:
        pass

    async def put_many(
        self, records: list[tuple[Any, Callable[[], None] | None]], source: str
    ) -> int:
        for _, on_done in records:
            self.completed += 1
            if on_done is not None:
                on_done()
        return len(records)


async def receiver_only(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    cfg = KafkaSettings(
        enabled=True,
        bootstrap_servers=[bootstrap],
        topics=[topic],
        group_id=f"bench-{topic}-receiver",
        session_timeout_ms=6000,
        heartbeat_interval_ms=2000,
    )
    stage = _FinishAtOnce()
    receiver = KafkaReceiver(cfg, stage, create_telemetry(), max_in_flight=10_000)  # type: ignore[arg-type]
    await receiver.start()
    try:
        while stage.completed == 0:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        wall0, cpu0, done0 = time.perf_counter(), _cpu(), stage.completed
        while stage.completed < records:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
    finally:
        await receiver.shutdown()
    finished = stage.completed - done0
    return {
        "records_per_s": finished / wall,
        "records_per_cpu_s": finished / cpu,
        "cpu_share": cpu / wall,
    }


def per_record_costs(bootstrap: str, topic: str, sample: int) -> dict[str, float]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    messages = []
    started = time.process_time()
    while len(messages) < sample:
        for batch in consumer.poll(timeout_ms=500, max_records=5000).values():
            messages.extend(batch)
    fetch = (time.process_time() - started) / len(messages)
    consumer.close()
    meta = {"kafka.topic": topic, "kafka.partition": "0", "kafka.offset": "0"}
    started = time.process_time()
    for m in messages:
        decode_message(m.value, "auto", meta)
    decode = (time.process_time() - started) / len(messages)
    return {"fetch_us": fetch * 1e6, "decode_us": decode * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap", help="an existing broker; default: start noida-db")
    parser.add_argument("--rates", default="0,0.01,0.1,1", help="sampling rates to run")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    tune_gc()  # as `rag-monitor run` does
    with ExitStack() as stack:
        bootstrap = args.bootstrap
        if bootstrap is None:
            from tests._kafka import running_broker

            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            bootstrap = stack.enter_context(running_broker("noida", workdir)).bootstrap
        topic = f"bench-{int(time.time())}"
        produced = produce(bootstrap, topic, args.records, args.partitions)
        print(
            f"produced {args.records} records into {args.partitions} partitions ({produced:,.0f}/s)"
        )
        costs = per_record_costs(bootstrap, topic, min(20_000, args.records // args.partitions))
        print(
            "per record, in isolation: kafka-python fetch+parse {fetch_us:.1f} us, "
            "decode (JSON + parse_record) {decode_us:.1f} us".format(**costs)
        )
        row = asyncio.run(receiver_only(bootstrap, topic, args.records))
        print(
            f"receiver alone (stage finishes each record at once): "
            f"{row['records_per_s']:,.0f} records/s, {row['records_per_cpu_s']:,.0f} per CPU s"
        )
        print(f"{'sampling':>8} {'records/s':>10} {'per CPU s':>10} {'CPU':>5} {'evaluations':>12}")
        for run, rate in enumerate(float(r) for r in args.rates.split(",")):
            row = asyncio.run(consume(bootstrap, topic, args.records, rate, run))
            print(
                f"{row['rate']:>8g} {row['records_per_s']:>10,.0f} {row['records_per_cpu_s']:>10,.0f}"
                f" {row['cpu_share']:>5.2f} {row['evaluations']:>12,.0f}"
            )


if __name__ == "__main__":
    main()
