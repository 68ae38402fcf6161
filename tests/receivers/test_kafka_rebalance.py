"""Kafka rebalances against a real broker: what a replica exports follows the partitions it
owns. On tansu: under load, noida-db sometimes leaves a rejoining member unanswered for longer
than any test waits (a broker fault; see the static-membership case in test_kafka.py)."""

from __future__ import annotations

import pytest

from monitor.records import RagRecord
from monitor.service import Service
from tests._kafka import Broker, unique
from tests._wait import wait_until_async
from tests.receivers.test_kafka import (
    Capture,
    _otlp_message,
    _rag_attributes,
    config,
    metric,
    native,
    running,
    tansu,
)

__all__ = ["tansu"]  # the session's broker fixture, shared with tests/receivers/test_kafka.py

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
