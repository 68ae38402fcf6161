"""Kafka rebalances against a real broker: what a replica exports follows the partitions it
owns. On tansu: under load, noida-db sometimes leaves a rejoining member unanswered for longer
than any test waits (a broker fault; see the static-membership case in test_kafka.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from harness.children import spawn
from harness.kafka_broker import Broker, flush, unique
from harness.kafka_join_leave import describe, join_then_leave
from harness.servers import stop_process
from harness.wait import wait_until, wait_until_async
from monitor.component import Evaluated
from monitor.config import Config
from monitor.records import RagRecord
from monitor.service import Service
from tests.receivers.test_kafka import (
    Capture,
    Replica,
    _otlp_message,
    _rag_attributes,
    config,
    metric,
    metric_sum,
    native,
    noida,
    replicas,
    running,
    tansu,
)

__all__ = [
    "noida",
    "tansu",
]  # the session's broker fixtures, shared with tests/receivers/test_kafka.py

pytestmark = pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")


def lag_partitions(service: Service, topic: str) -> set[int]:
    """The partitions of `topic` with a `rag_monitor_kafka_lag` series."""
    found: set[int] = set()
    for family in service.telemetry.registry.collect():
        for sample in family.samples:
            if sample.name == "rag_monitor_kafka_lag" and sample.labels["topic"] == topic:
                found.add(int(sample.labels["partition"]))
    return found


def owned(service: Service) -> set[int]:
    receiver = service.receivers[0]
    consumer = receiver._consumer  # type: ignore[attr-defined]
    return {tp.partition for tp in consumer.assignment()} if consumer is not None else set()


async def test_a_rebalance_leaves_no_lag_series_of_partitions_given_away(tansu: Broker) -> None:
    topic = tansu.create_topic(unique("lag"), partitions=2)
    group = unique("g")
    for partition in (0, 1):
        tansu.produce(topic, [native(f"p{partition}-first")], partition=partition)
    async with running(config(tansu, [topic], group)) as (first, capture):
        await wait_until_async(lambda: len(capture.records) == 2, 60, "both partitions read")
        await wait_until_async(lambda: lag_partitions(first, topic) == {0, 1}, 30, "lag series")
        async with running(config(tansu, [topic], group)) as (second, _):
            await wait_until_async(
                lambda: len(owned(first)) == 1 and len(owned(second)) == 1,
                60,
                "the partitions split between the two members",
            )
            given_away = ({0, 1} - owned(first)).pop()
            # The second member's series appears after its first status refresh; by then the
            # first has refreshed its own several times.
            await wait_until_async(
                lambda: lag_partitions(second, topic) == {given_away}, 30, "the new owner's lag"
            )
            await wait_until_async(
                lambda: lag_partitions(first, topic) == owned(first), 30, "the old owner's lag"
            )
            assert given_away not in lag_partitions(first, topic)


async def test_a_member_joining_mid_trace_does_not_cut_it(tansu: Broker) -> None:
    """One span per message (`otlp_proto`), a trace on each of two partitions: the
    retrievals arrive, a second member joins (the first keeps one partition and gives the
    other away), then the roots with the questions and answers. Each trace is evaluated
    whole, with its context, question and answer, by whichever member reads its root; no
    member ever evaluates a cut copy of either, then or at its shutdown."""
    topic = tansu.create_topic(unique("join-mid-trace"), partitions=2)
    group = unique("g")
    trace_ids = {p: bytes.fromhex(f"7{p}" * 16) for p in (0, 1)}
    root, retrieval = bytes.fromhex("00000000000000a1"), bytes.fromhex("00000000000000b2")
    attributes = _rag_attributes(7)
    # The first message alone would make a record (question and context, no answer): a
    # cut copy of a trace shows as a record without its answer.
    context = {key: attributes.pop(key) for key in ("rag.context", "rag.query")}
    for p, trace_id in trace_ids.items():
        tansu.produce(topic, [_otlp_message(trace_id, [(retrieval, root, context)])], partition=p)
    cfg = config(tansu, [topic], group, encoding="otlp_proto")
    # Traces are released by their root, never by idleness during the test.
    assembly = cfg.trace_assembly.model_copy(update={"idle_timeout_s": 600.0})
    cfg = cfg.model_copy(update={"trace_assembly": assembly})

    def whole(capture: Capture) -> list[RagRecord]:
        return [r for r in capture.records if r.response and r.query and r.retrieved_context]

    def evaluated(*captures: Capture) -> set[str | None]:
        return {r.trace_id for capture in captures for r in whole(capture)}

    async with running(cfg) as (first, first_capture):
        await wait_until_async(
            lambda: metric(first, "spans_received_total", receiver="kafka") == 2, 60, "two spans"
        )
        async with running(cfg) as (second, second_capture):
            await wait_until_async(
                lambda: len(owned(first)) == 1 and len(owned(second)) == 1, 60, "the join"
            )
            for p, trace_id in trace_ids.items():
                tansu.produce(
                    topic, [_otlp_message(trace_id, [(root, b"", attributes)])], partition=p
                )
            await wait_until_async(
                lambda: (
                    evaluated(first_capture, second_capture)
                    == {t.hex() for t in trace_ids.values()}
                ),
                60,
                "both traces whole",
            )
            await wait_until_async(
                lambda: tansu.committed(group, topic, 2) == {0: 2, 1: 2}, 30, "both committed"
            )
            assert metric(first, "dropped_total", stage="assemble", reason="late_span") == 0
            assert metric(second, "dropped_total", stage="assemble", reason="late_span") == 0
            # The first member handed its open copy of the given-away partition's trace back
            # unevaluated (one span) and completed the one of the partition it kept.
            assert metric(first, "dropped_total", stage="assemble", reason="handed_back") == 1
    # After both members stopped (each drained and flushed what it still held open):
    # every record, on either member, is whole, and there is one per trace at least.
    for member in (first, second):  # no cut copy released, whether it made a record or not
        for trigger in ("flushed", "idle_timeout", "shutdown", "evicted"):
            assert metric(member, "traces_assembled_total", trigger=trigger) == 0, trigger
    records = first_capture.records + second_capture.records
    assert whole(first_capture) + whole(second_capture) == records, records
    assert {r.trace_id for r in records} == {t.hex() for t in trace_ids.values()}
    assert tansu.committed(group, topic, 2) == {0: 2, 1: 2}


@pytest.mark.e2e
async def test_a_replica_joining_then_another_leaving_settles_with_every_record_read(
    tansu: Broker,
) -> None:
    """A replica joins while the first one's pipeline is full (its results wait on a stalled
    disk, so fetching is paused), works the partition it was given to the end, then leaves.
    The disk comes back as the join's assignment arrives and the work in flight finishes
    before the next poll: the partition the first replica keeps (still paused in the
    client, which keeps a partition's pause across a rebalance that gives it straight back)
    is read again, and once the second replica left, every record is evaluated and both
    partitions are committed to their end, as plain clients on the same broker settle
    (`harness/kafka_join_leave.py`; `bench/kafka_join_leave.py` runs it ten times)."""
    outcome = await join_then_leave(tansu)
    assert outcome.settled, describe(outcome)
    assert outcome.paused == []


class SlowWrites:
    """A results sink that keeps every record and persists slowly: the results of a
    record whose id starts with `slow` are written only once `let_go` is called (a disk
    stalling), so its Kafka message stays unfinished and a revoke waits its whole grace
    for it before the group is joined again."""

    def __init__(self) -> None:
        self.records: list[RagRecord] = []
        self._waiting: list[asyncio.Future[bool]] = []
        self._held = True

    async def start(self) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> list[asyncio.Future[bool]]:
        loop, owed = asyncio.get_running_loop(), []
        for evaluated in batch:
            record = evaluated.record
            self.records.append(record)
            future: asyncio.Future[bool] = loop.create_future()
            if self._held and record.request_id.startswith("slow"):
                self._waiting.append(future)
            else:
                future.set_result(True)
            owed.append(future)
        return owed

    def let_go(self) -> None:
        self._held = False
        for future in self._waiting:
            if not future.done():
                future.set_result(True)

    async def shutdown(self, deadline_s: float) -> None:
        self.let_go()


@contextlib.asynccontextmanager
async def running_with(cfg: Config, sink: SlowWrites) -> AsyncIterator[Service]:
    service = Service(cfg, serve_http=False, extra_sinks=[sink])
    await service.start()
    try:
        yield service
    finally:
        sink.let_go()
        await service.shutdown(10)


@contextlib.contextmanager
def busy_loops(count: int = 2) -> Iterator[None]:
    """`count` processes burning a CPU each, as on a busy node."""
    loops = [spawn([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            stop_process(loop, 10)


@pytest.mark.e2e
async def test_a_rejoin_longer_than_the_idle_timeout_cuts_no_trace(tansu: Broker) -> None:
    """The join-mid-trace case on a busy machine (two busy-loop processes on the two
    cores), with a rejoin that outlasts `idle_timeout_s`: the first member's revoke waits
    its whole grace for a message whose results are still being written (a stalling
    disk), and the traces' roots are sent meanwhile. Until the assignment says where each
    partition goes, idle expiry must not release their open traces: every record, on
    either member, is whole, and each trace is evaluated."""
    idle_s = 2.0  # shorter than the revoke's grace of 3 s alone
    topic = tansu.create_topic(unique("long-rejoin"), partitions=2)
    group = unique("g")
    trace_ids = {p: bytes.fromhex(f"8{p}" * 16) for p in (0, 1)}
    root, retrieval = bytes.fromhex("00000000000000a1"), bytes.fromhex("00000000000000b2")
    attributes = _rag_attributes(8)
    context = {key: attributes.pop(key) for key in ("rag.context", "rag.query")}
    for p, trace_id in trace_ids.items():
        tansu.produce(topic, [native(f"slow-{p}")], partition=p)
        tansu.produce(topic, [_otlp_message(trace_id, [(retrieval, root, context)])], partition=p)
    cfg = config(tansu, [topic], group)
    assembly = cfg.trace_assembly.model_copy(update={"idle_timeout_s": idle_s})
    cfg = cfg.model_copy(update={"trace_assembly": assembly})

    stop = threading.Event()
    # One producer for the test (thread-safe): a span sent is in its partition at once,
    # where a producer made per send would take a connection's time on a busy machine.
    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap, linger_ms=0)

    def send(p: int, spans: list[tuple[bytes, bytes, dict[str, str]]]) -> None:
        sent = producer.send(topic, _otlp_message(trace_ids[p], spans), partition=p)
        flush(producer)  # against a deadline that stretches with the load
        sent.get()

    def keep_sending() -> None:
        """A span of each trace every half second until the revoke, so that neither goes
        idle while the second member starts."""
        n = 0
        while not stop.wait(0.5):
            n += 1
            for p in trace_ids:
                send(p, [((0x100 + n).to_bytes(8, "big"), root, {})])

    def whole(records: list[RagRecord]) -> list[RagRecord]:
        return [r for r in records if r.response and r.query and r.retrieved_context]

    def traces(records: list[RagRecord]) -> list[RagRecord]:
        return [r for r in records if r.trace_id is not None]

    def cut(member: Service) -> float:
        """Traces the member released before their roots came."""
        return sum(
            metric(member, "traces_assembled_total", trigger=trigger)
            for trigger in ("idle_timeout", "evicted", "flushed")
        ) + metric_sum(member, "records_incomplete_total", missing="response")

    members: list[tuple[str, Service, SlowWrites]] = []  # as they start

    def state() -> str:
        """What each member holds and released, for a failure message."""
        lines = []
        for name, member, sink in members:
            assembled = {
                trigger: metric(member, "traces_assembled_total", trigger=trigger)
                for trigger in ("root_ended", "idle_timeout", "evicted", "flushed", "shutdown")
            }
            records = [
                (r.request_id, bool(r.query), len(r.retrieved_context), bool(r.response))
                for r in sink.records
            ]
            lines.append(
                f"{name}: owns {sorted(owned(member))}, open traces "
                f"{metric(member, 'open_traces'):.0f}, spans "
                f"{metric(member, 'spans_received_total', receiver='kafka'):.0f}, "
                f"assembled {assembled}, records (id, query, documents, answer) {records}"
            )
        return "\n".join(lines)

    first_sink, second_sink = SlowWrites(), SlowWrites()
    sender = threading.Thread(target=keep_sending, daemon=True)
    revoking = threading.Event()
    with busy_loops(2):
        async with running_with(cfg, first_sink) as first:
            members.append(("first", first, first_sink))
            await wait_until_async(
                lambda: (
                    len(first_sink.records) == 2
                    and metric(first, "spans_received_total", receiver="kafka") >= 2
                ),
                60,
                "both slow records in writing and both retrievals read",
            )
            # Observed, not changed: when the first member's revoke begins.
            receiver = first.receivers[0]
            revoke = receiver._on_revoked  # type: ignore[attr-defined]

            def on_revoked(revoked: set[Any]) -> Any:
                revoking.set()
                return revoke(revoked)

            receiver._on_revoked = on_revoked  # type: ignore[attr-defined]
            sender.start()
            try:
                async with running_with(cfg, second_sink) as second:
                    members.append(("second", second, second_sink))
                    await wait_until_async(revoking.is_set, 90, "the first member's revoke")
                    stop.set()
                    await asyncio.to_thread(sender.join)
                    # The roots reach their partitions while the revoke still waits: read
                    # once the group has rejoined, by whichever member then owns each.
                    for p in trace_ids:
                        await asyncio.to_thread(send, p, [(root, b"", attributes)])
                    await wait_until_async(
                        lambda: len(owned(first)) == 1 and len(owned(second)) == 1,
                        90,
                        "the join",
                        context=state,
                    )
                    # A trace released cut (its root then a late span) gives a record
                    # without an answer, which no evaluator here scores: the end is both
                    # traces evaluated whole, or one released cut.
                    await wait_until_async(
                        lambda: (
                            {
                                r.trace_id
                                for r in whole(traces(first_sink.records + second_sink.records))
                            }
                            == {t.hex() for t in trace_ids.values()}
                            or any(cut(member) for member in (first, second))
                        ),
                        60,
                        "both traces evaluated whole, or one cut",
                        context=state,
                    )
                    first_sink.let_go()
                    second_sink.let_go()
            finally:
                stop.set()
                if sender.is_alive():
                    await asyncio.to_thread(sender.join)
                producer.close(timeout=5)
    assert cut(first) == cut(second) == 0
    records = traces(first_sink.records) + traces(second_sink.records)
    assert whole(records) == records
    assert {r.trace_id for r in records} == {t.hex() for t in trace_ids.values()}


# Traces the producer keeps half delivered (retrieval sent, root not yet) at every moment.
_OPEN = 20


@pytest.mark.e2e
def test_a_rolling_restart_cuts_no_trace(noida: Broker, tmp_path: Path) -> None:
    """Two replicas, one span per message (`otlp_proto`, keyed by trace id), traces always
    half delivered; each replica in turn gets SIGTERM while it holds open traces and is
    started again, as a rolling restart does. Every trace is evaluated, and every results
    line is whole (question, context and answer): a stopping replica hands its open traces
    back, it never evaluates or commits half of one, and the next reader skips what it
    finished past its commit (the commit's metadata names it; noida-db keeps commit
    metadata as Kafka does, tansu drops it)."""
    topic = noida.create_topic(unique("rolling"), partitions=2)
    group = unique("g")
    sections: dict[str, dict[str, Any]] = {
        # Released by their roots only, never by idleness during the test.
        "trace_assembly": {"idle_timeout_s": 600},
        "exporters": {"results_include_text": True},
    }
    members = [
        Replica(
            noida,
            topic,
            group,
            tmp_path,
            name,
            sampling_rate=1.0,
            sections=sections,
            encoding="otlp_proto",
        )
        for name in ("a", "b")
    ]
    root, retrieval = bytes.fromhex("00000000000000a1"), bytes.fromhex("00000000000000b2")
    count = 240
    trace_ids = [bytes.fromhex(f"{i + 1:032x}") for i in range(count)]

    def half(i: int) -> tuple[bytes, bytes]:
        attributes = _rag_attributes(i)
        first = {key: attributes[key] for key in ("rag.context", "rag.query")}
        return trace_ids[i], _otlp_message(trace_ids[i], [(retrieval, root, first)])

    def rest(i: int) -> tuple[bytes, bytes]:
        answer = {"rag.response": _rag_attributes(i)["rag.response"]}
        return trace_ids[i], _otlp_message(trace_ids[i], [(root, b"", answer)])

    def split() -> bool:
        owned = [m.lag_partitions() for m in members]
        return all(len(p) == 1 for p in owned) and not owned[0] & owned[1]

    with replicas(*members):
        for member in members:
            member.start()
        wait_until(split, 60, "the partitions split between the replicas", interval_s=0.2)
        noida.produce_keyed(topic, [half(i) for i in range(_OPEN)])
        restarts = {count // 3: members[0], 2 * count // 3: members[1]}
        for i in range(_OPEN, count + _OPEN, 10):
            batch = [half(j) for j in range(i, min(i + 10, count))]
            noida.produce_keyed(topic, batch + [rest(j) for j in range(i - _OPEN, i - _OPEN + 10)])
            restarted = restarts.get(i - _OPEN)
            if restarted is None:
                continue

            def holds_open(member: Replica = restarted) -> bool:
                return member.total("open_traces") > 0

            wait_until(holds_open, 60, "open traces in the replica to restart", interval_s=0.1)
            assert restarted.stop() == 0, restarted.logs()
            restarted.start()
            wait_until(split, 60, "the replica back in the group", interval_s=0.2)
        expected = {t.hex() for t in trace_ids}

        def evaluated() -> set[str]:
            return {line["trace_id"] for m in members for line in _lines(m)}

        wait_until(lambda: evaluated() >= expected, 120, "every trace evaluated", interval_s=0.3)
        # Once the group settles every message is committed. Waited for before the last
        # stops: a member stopped while the other's leave rebalances the group commits at
        # close only if it rejoins within a bound (it logs when not), a race with the
        # machine's speed this test does not judge.
        ends = _per_partition(noida, topic, 2 * count)
        wait_until(lambda: noida.committed(group, topic, 2) == ends, 60, "every message committed")
        for member in members:
            assert member.stop() == 0, member.logs()
    lines = [line for m in members for line in _lines(m)]
    cut = [line["trace_id"] for line in lines if not _whole(line["extracted"])]
    assert not cut, f"{len(cut)} of {len(lines)} results lines cut: {cut[:5]}"
    assert {line["trace_id"] for line in lines} == expected
    assert noida.committed(group, topic, 2) == ends  # stopping moves no commit back


def _lines(member: Replica) -> list[dict[str, Any]]:
    if not member.results.exists():
        return []
    text = member.results.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def _whole(extracted: dict[str, Any]) -> bool:
    return bool(extracted.get("query") and extracted.get("context") and extracted.get("response"))


def _per_partition(broker: Broker, topic: str, total: int) -> dict[int, int | None]:
    """Messages in each partition of `topic` (`total` in all)."""
    counts: dict[int, int | None] = {}
    for message in broker.read_all(topic, total):
        counts[message.partition] = (counts.get(message.partition) or 0) + 1
    return counts
