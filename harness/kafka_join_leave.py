"""The join-then-leave run of a Kafka consumer group, shared by its test
(`tests/receivers/test_kafka_rebalance.py`) and its bench (`bench/kafka_join_leave.py`).

Two partitions, their records produced up front, and a first replica whose results wait on a
stalled disk, so that its pipeline fills and fetching pauses. A second replica joins; the
disk comes back as the join's assignment arrives, and the work in flight finishes before the
first replica's next poll (a pipeline that drained during the rebalance). The second replica
works the partition it was given to the end, stays `stay_s` in all, and leaves. The run has
settled once every record is evaluated and both partitions are committed to their end: the
partition the first replica kept, paused in the client across the rebalance (kafka-python
keeps a partition's pause when an assignment gives it straight back), must be read again.
Replicas run in this process (`Service`), each with its own consumer thread and group
membership, as `rag-monitor run` would.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.kafka_broker import Broker, unique
from harness.wait import Deadline, wait_until, wait_until_async
from monitor.component import Evaluated
from monitor.config import Config
from monitor.receivers.kafka import KafkaReceiver
from monitor.service import Service

PARTITIONS = 2


class StalledDisk:
    """A results sink whose writes wait until `release` (a stalled disk, scripted)."""

    def __init__(self, stalled: bool = True) -> None:
        self.ids: set[str] = set()
        self._stalled = stalled
        self._waiting: list[asyncio.Future[bool]] = []

    async def start(self) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> list[asyncio.Future[bool]]:
        loop, owed = asyncio.get_running_loop(), []
        for evaluated in batch:
            self.ids.add(evaluated.record.request_id)
            written: asyncio.Future[bool] = loop.create_future()
            if self._stalled:
                self._waiting.append(written)
            else:
                written.set_result(True)
            owed.append(written)
        return owed

    def release(self) -> None:
        self._stalled = False
        for written in self._waiting:
            if not written.done():
                written.set_result(True)
        self._waiting.clear()

    async def shutdown(self, deadline_s: float) -> None:
        self.release()


@dataclass
class Outcome:
    """How a run ended: `settled` within the deadline, `seconds` from the leave until then
    (or until the deadline passed), and what the first replica held at the end."""

    settled: bool
    seconds: float
    records: int
    evaluated: int
    committed: dict[int, int | None]
    paused: list[int] = field(default_factory=list)  # the first replica's, at the end


def replica_config(broker: Broker, topic: str, group: str) -> Config:
    """A replica with a small pipeline (five records queued, polls of ten), so that a
    stalled disk fills it quickly."""
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}},
                "kafka": broker.kafka_settings([topic], group, max_poll_records=10),
            },
            "evaluators": [{"name": "local_relevance"}],
            "pipeline": {"queue_size": 5, "workers": 1},
        }
    )


def record(request_id: str, i: int) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "service": "shop",
        "request": {"messages": [{"role": "user", "content": f"Question {i}?"}]},
        "retrieved_context": [{"content": "Paris is the capital of France.", "doc_uri": "d1"}],
        "response": "Paris is the capital of France.",
    }


def owned(service: Service) -> set[int]:
    consumer = _receiver(service)._consumer
    return {tp.partition for tp in consumer.assignment()} if consumer is not None else set()


def _receiver(service: Service) -> KafkaReceiver:
    receiver = service.receivers[0]
    assert isinstance(receiver, KafkaReceiver)
    return receiver


async def join_then_leave(
    broker: Broker, *, per_partition: int = 300, stay_s: float = 0.0, settle_s: float = 60.0
) -> Outcome:
    """One run (see the module docstring); the waits before the leave fail the caller's
    test when they pass their deadline, the settling is what the outcome says."""
    topic = broker.create_topic(unique("join-leave"), partitions=PARTITIONS)
    group = unique("g")
    everything: set[str] = set()
    for p in range(PARTITIONS):
        records = [record(f"jl{p}-{i}", i) for i in range(per_partition)]
        everything |= {r["request_id"] for r in records}
        broker.produce(topic, records, partition=p)
    ends = {p: per_partition for p in range(PARTITIONS)}
    cfg = replica_config(broker, topic, group)
    disk, second_disk = StalledDisk(), StalledDisk(stalled=False)
    first = Service(cfg, serve_http=False, extra_sinks=[disk])
    await first.start()
    receiver = _receiver(first)

    def state() -> str:
        consumer = receiver._consumer
        paused = sorted(tp.partition for tp in consumer.paused()) if consumer else []
        return (
            f"first owns {sorted(owned(first))}, paused {paused}, in flight "
            f"{receiver.in_flight}; records {len(disk.ids | second_disk.ids)} of "
            f"{len(everything)}; committed {broker.committed(group, topic, PARTITIONS)}"
        )

    try:
        await wait_until_async(lambda: receiver.paused, 60, "the first replica paused")
        loop = asyncio.get_running_loop()
        assign = receiver._on_assigned
        released = threading.Event()

        async def disk_back() -> None:
            """The stalled writes go through, and the work in flight finishes before the
            next poll (its completions wait for the consumer thread, in this one)."""
            disk.release()
            await wait_until_async(
                lambda: len(receiver._done) >= receiver.in_flight and not first.stage.full,
                60,
                "the work finished",
            )

        def on_assigned(assigned: set[Any]) -> None:
            """The join's assignment arrives (kafka-python's thread, inside a poll)."""
            assign(assigned)
            if not released.is_set():
                released.set()
                asyncio.run_coroutine_threadsafe(disk_back(), loop).result()

        receiver._on_assigned = on_assigned  # type: ignore[method-assign]
        second = Service(cfg, serve_http=False, extra_sinks=[second_disk])
        await second.start()
        joined = time.monotonic()
        try:
            await wait_until_async(
                lambda: len(owned(first)) == 1 and len(owned(second)) == 1,
                60,
                "the join",
                context=state,
            )
            # The second replica works its partition to the end before it leaves, so the
            # first one reads nothing new after the leave.
            (theirs,) = owned(second)
            await asyncio.to_thread(
                wait_until,
                lambda: broker.committed(group, topic, PARTITIONS)[theirs] == per_partition,
                60,
                "the second replica's partition committed to its end",
                context=state,
            )
            await asyncio.sleep(max(0.0, stay_s - (time.monotonic() - joined)))
        finally:
            left = time.monotonic()
            await second.shutdown(10)
        deadline = Deadline(settle_s)
        committed = await asyncio.to_thread(broker.committed, group, topic, PARTITIONS)
        while (disk.ids | second_disk.ids) != everything or committed != ends:
            if deadline.passed():
                break
            await asyncio.sleep(0.2)
            committed = await asyncio.to_thread(broker.committed, group, topic, PARTITIONS)
        consumer = receiver._consumer
        return Outcome(
            settled=(disk.ids | second_disk.ids) == everything and committed == ends,
            seconds=time.monotonic() - left,
            records=len(everything),
            evaluated=len(disk.ids | second_disk.ids),
            committed=committed,
            paused=sorted(tp.partition for tp in consumer.paused()) if consumer else [],
        )
    finally:
        await first.shutdown(10)


def describe(outcome: Outcome) -> str:
    return json.dumps(
        {
            "settled": outcome.settled,
            "seconds": round(outcome.seconds, 1),
            "evaluated": f"{outcome.evaluated} of {outcome.records}",
            "committed": outcome.committed,
            "paused": outcome.paused,
        }
    )
