"""Kafka receiver and size: messages far over the client's 1 MiB defaults against a real
broker (noida-db)."""

from __future__ import annotations

import asyncio
import json

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from harness.kafka_broker import Broker, flush, unique
from harness.wait import wait_until_async
from tests.receivers.test_kafka import config, metric, native, noida, running

__all__ = ["noida"]  # the session's broker fixture, shared with tests/receivers/test_kafka.py

pytestmark = pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
BIG = 20 * 1024 * 1024


def large_topic(broker: Broker, prefix: str) -> str:
    """A topic whose brokers take messages up to 64 MiB (`max.message.bytes`)."""
    name = unique(prefix)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        configs = {"max.message.bytes": str(64 * 1024 * 1024)}
        admin.create_topics([NewTopic(name, 1, 1, topic_configs=configs)])
    finally:
        admin.close()
    return name


def produce_large(broker: Broker, topic: str, values: list[bytes]) -> None:
    """As a producer configured for large messages does (max_request_size raised)."""
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        max_request_size=2 * BIG,
        linger_ms=5,
    )
    try:
        for value in values:
            producer.send(topic, value, key=b"k")
        flush(producer)
    finally:
        producer.close(timeout=5)


async def test_a_twenty_megabyte_message_is_dead_lettered_whole(noida: Broker) -> None:
    topic = large_topic(noida, "large")
    dead = large_topic(noida, "dead")
    group = unique("g")
    huge = json.dumps("x" * BIG).encode()  # valid JSON, not a record
    values = [json.dumps(native("before")).encode(), huge, json.dumps(native("after")).encode()]
    produce_large(noida, topic, values)
    async with running(config(noida, [topic], group, dead_letter_topic=dead)) as (
        service,
        capture,
    ):
        await wait_until_async(lambda: capture.ids() >= {"before", "after"}, 60, "good records")
        letters = await asyncio.to_thread(noida.read_all, dead, 1)
        assert len(letters) == 1 and letters[0].value == huge
        headers = dict(letters[0].headers)
        assert headers["rag-monitor-error-reason"] == b"not_object"
        assert headers["rag-monitor-error"] == b"a JSON string where a record object was expected"
        assert headers["rag-monitor-source"] == f"{topic}/0/1".encode()
        assert metric(service, "dropped_total", stage="kafka_dead_letter", reason="send_error") == 0
        await wait_until_async(
            lambda: metric(service, "kafka_lag", topic=topic, partition="0") == 0, 30, "no lag"
        )
    assert noida.committed(group, topic, 1) == {0: len(values)}


async def test_a_twenty_megabyte_response_is_rejected_before_evaluation(noida: Broker) -> None:
    """The oversized answer never reaches a worker: it is dead-lettered with its reason,
    the records around it (in the same poll) are evaluated, and the partition moves on."""
    topic = large_topic(noida, "huge-answer")
    dead = large_topic(noida, "dead")
    group = unique("g")
    huge = native("huge")
    huge["response"] = "Paris is the capital of France. " * (BIG // 32)
    values = [json.dumps(r).encode() for r in (native("before"), huge, native("after"))]
    produce_large(noida, topic, values)
    async with running(config(noida, [topic], group, dead_letter_topic=dead)) as (
        service,
        capture,
    ):
        await wait_until_async(lambda: capture.ids() >= {"before", "after"}, 60, "batch-mates")
        letters = await asyncio.to_thread(noida.read_all, dead, 1)
        assert [m.offset for m in letters] == [0] and len(letters[0].value) == len(values[1])
        headers = dict(letters[0].headers)
        assert headers["rag-monitor-error-reason"] == b"response_too_large"
        assert b"over the limit of 262144" in headers["rag-monitor-error"]
        assert (
            metric(service, "records_rejected_total", receiver="kafka", reason="response_too_large")
            == 1
        )
        await wait_until_async(
            lambda: metric(service, "kafka_lag", topic=topic, partition="0") == 0, 30, "no lag"
        )
        for results in capture.results:
            assert all(r.error is None for r in results.values()), results
    assert capture.ids() == {"before", "after"}
    assert noida.committed(group, topic, 1) == {0: len(values)}
