"""Kafka rebalances against a real broker (noida-db): what a replica exports follows the
partitions it owns."""

from __future__ import annotations

import pytest

from monitor.service import Service
from tests._kafka import Broker, unique
from tests._wait import wait_until_async
from tests.test_kafka import config, native, noida, running

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
