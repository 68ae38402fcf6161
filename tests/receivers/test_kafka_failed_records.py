"""A record that fails inside the monitor costs that record alone, on a real broker: its
batch-mates are evaluated, its message is dead-lettered with the reason, and the partition's
committed offset moves past it. The failure is scripted (a results sink that raises on some
records, as an exporter meeting a value it cannot write would); everything else is real."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.kafka_broker import Broker, running_broker, unique
from harness.wait import wait_until_async
from monitor.component import Evaluated
from monitor.config import Config
from monitor.service import Service

pytestmark = pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")


@pytest.fixture(scope="module")
def noida(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with running_broker("noida", tmp_path_factory.mktemp("noida")) as broker:
        yield broker


class FailingSink:
    """Raises on a batch that holds a record whose id starts with `poison` (every time),
    and on every batch that holds a record it had not seen when `flaky` (a failure that a
    second try gets past); keeps the ids it wrote."""

    def __init__(self, *, flaky: bool = False) -> None:
        self.flaky = flaky
        self.tried: set[str] = set()
        self.written: set[str] = set()

    async def start(self) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> None:
        ids = {evaluated.record.request_id for evaluated in batch}
        first_try = not ids <= self.tried
        self.tried |= ids
        if any(i.startswith("poison") for i in ids) or (self.flaky and first_try):
            raise ValueError(f"cannot write the results of {', '.join(sorted(ids))}")
        self.written |= ids

    async def shutdown(self, deadline_s: float) -> None:
        return None


def _record(request_id: str) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "service": "shop",
        "question": f"What does order {request_id} contain?",
        "context": [f"Order {request_id} contains two lamps."],
        "answer": f"Order {request_id} contains two lamps.",
    }


def _config(broker: Broker, topic: str, group: str, **kafka: Any) -> Config:
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}},
                "kafka": broker.kafka_settings([topic], group, **kafka),
            },
            "evaluators": [{"name": "local_relevance"}],
        }
    )


@contextlib.asynccontextmanager
async def _running(cfg: Config, sink: FailingSink) -> AsyncIterator[Service]:
    service = Service(cfg, serve_http=False, extra_sinks=[sink])
    await service.start()
    try:
        yield service
    finally:
        await service.shutdown(10)


def _metric(service: Service, name: str, **labels: str) -> float:
    return service.telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0


# Two poison records among good ones: one-record messages travel as runs, so each failing
# record shares its delivery with good neighbours.
IDS = [f"good-{i}" for i in range(8)] + ["poison-1"] + [f"good-{i}" for i in range(8, 14)]
IDS += ["poison-2", "good-14"]
GOOD = {i for i in IDS if i.startswith("good")}


async def test_a_record_failing_twice_is_dead_lettered_alone_and_the_offset_moves_past(
    noida: Broker,
) -> None:
    topic = noida.create_topic(unique("failing"))
    dead = noida.create_topic(unique("dead"))
    group = unique("g")
    noida.produce(topic, [_record(i) for i in IDS], key=b"k")
    sink = FailingSink()
    async with _running(_config(noida, topic, group, dead_letter_topic=dead), sink) as service:
        await wait_until_async(lambda: sink.written >= GOOD, 30, "every good record written")
        letters = noida.read_all(dead, 2)
        await wait_until_async(
            lambda: noida.committed(group, topic, 1) == {0: len(IDS)}, 30, "committed to the end"
        )
        assert _metric(service, "dropped_total", stage="evaluate", reason="sink_error") == 2
        assert _metric(service, "dropped_total", stage="kafka", reason="evaluation_failed") >= 1
    assert sink.written == GOOD
    # Exactly the poison messages, each with the reason and where it came from.
    assert sorted(json.loads(m.value)["request_id"] for m in letters) == ["poison-1", "poison-2"]
    for message in letters:
        headers = dict(message.headers)
        assert headers["rag-monitor-error-reason"] == b"evaluation_failed"
        assert b"cannot write the results of poison" in headers["rag-monitor-error"]
        offset = IDS.index(json.loads(message.value)["request_id"])
        assert headers["rag-monitor-source"] == f"{topic}/0/{offset}".encode()
        assert message.key == b"k"


async def test_without_a_dead_letter_topic_the_failed_record_is_counted_and_skipped(
    noida: Broker, tmp_path: Path
) -> None:
    topic = noida.create_topic(unique("failing"))
    group = unique("g")
    noida.produce(topic, [_record(i) for i in IDS])
    sink = FailingSink()
    async with _running(_config(noida, topic, group), sink) as service:
        await wait_until_async(lambda: sink.written >= GOOD, 30, "every good record written")
        await wait_until_async(
            lambda: noida.committed(group, topic, 1) == {0: len(IDS)}, 30, "committed to the end"
        )
        assert _metric(service, "dropped_total", stage="kafka", reason="evaluation_failed") >= 1
    assert sink.written == GOOD


async def test_a_failure_that_a_second_try_gets_past_loses_nothing(noida: Broker) -> None:
    topic = noida.create_topic(unique("flaky"))
    dead = noida.create_topic(unique("dead"))
    group = unique("g")
    ids = [f"good-{i}" for i in range(12)]
    noida.produce(topic, [_record(i) for i in ids])
    sink = FailingSink(flaky=True)
    async with _running(_config(noida, topic, group, dead_letter_topic=dead), sink) as service:
        await wait_until_async(lambda: sink.written == set(ids), 30, "every record written")
        await wait_until_async(
            lambda: noida.committed(group, topic, 1) == {0: len(ids)}, 30, "committed to the end"
        )
        assert _metric(service, "dropped_total", stage="kafka", reason="evaluation_failed") == 0
        assert _metric(service, "dropped_total", stage="evaluate", reason="sink_error") == 0
