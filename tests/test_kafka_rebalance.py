"""Kafka rebalances against a real broker (noida-db): what a replica exports follows the
partitions it owns."""

from __future__ import annotations

import pytest

from monitor.records import RagRecord
from monitor.service import Service
from tests._kafka import Broker, unique
from tests._wait import wait_until_async
from tests.test_kafka import (
    Capture,
    _otlp_message,
    _rag_attributes,
    config,
    metric,
    native,
    noida,
    running,
)

__all__ = ["noida"]  # the session's broker fixture, shared with tests/test_kafka.py

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


async def test_a_rebalance_leaves_no_lag_series_of_partitions_given_away(noida: Broker) -> None:
    topic = noida.create_topic(unique("lag"), partitions=2)
    group = unique("g")
    for partition in (0, 1):
        noida.produce(topic, [native(f"p{partition}-first")], partition=partition)
    async with running(config(noida, [topic], group)) as (first, capture):
        await wait_until_async(lambda: len(capture.records) == 2, 60, "both partitions read")
        await wait_until_async(lambda: lag_partitions(first, topic) == {0, 1}, 30, "lag series")
        async with running(config(noida, [topic], group)) as (second, _):
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


async def test_a_member_joining_mid_trace_does_not_cut_it(noida: Broker) -> None:
    """One span per message (`otlp_proto`): the retrieval arrives, a second member joins,
    then the root with the question and answer. Whichever member reads the rest, the
    trace is evaluated whole: with its context, its question and its answer."""
    topic = noida.create_topic(unique("join-mid-trace"), partitions=2)
    group = unique("g")
    trace_id = bytes.fromhex("7a" * 16)
    root, retrieval = bytes.fromhex("00000000000000a1"), bytes.fromhex("00000000000000b2")
    attributes = _rag_attributes(7)
    context = {"rag.context": attributes.pop("rag.context")}
    noida.produce(topic, [_otlp_message(trace_id, [(retrieval, root, context)])], partition=0)
    cfg = config(noida, [topic], group, encoding="otlp_proto")
    # Traces are released by their root, never by idleness during the test.
    assembly = cfg.trace_assembly.model_copy(update={"idle_timeout_s": 600.0})
    cfg = cfg.model_copy(update={"trace_assembly": assembly})

    def whole(capture: Capture) -> list[RagRecord]:
        return [
            r
            for r in capture.records
            if r.trace_id == trace_id.hex() and r.response and r.query and r.retrieved_context
        ]

    async with running(cfg) as (first, first_capture):
        await wait_until_async(
            lambda: metric(first, "spans_received_total", receiver="kafka") == 1, 60, "a span"
        )
        async with running(cfg) as (second, second_capture):
            await wait_until_async(
                lambda: len(owned(first)) == 1 and len(owned(second)) == 1, 60, "the join"
            )
            noida.produce(topic, [_otlp_message(trace_id, [(root, b"", attributes)])], partition=0)
            await wait_until_async(
                lambda: whole(first_capture) or whole(second_capture), 60, "the whole trace"
            )
            await wait_until_async(
                lambda: noida.committed(group, topic, 2)[0] == 2, 30, "partition 0 committed"
            )
            for capture in (first_capture, second_capture):
                assert all(r in whole(capture) for r in capture.records), capture.records
            assert metric(first, "dropped_total", stage="assemble", reason="late_span") == 0
            assert metric(second, "dropped_total", stage="assemble", reason="late_span") == 0
