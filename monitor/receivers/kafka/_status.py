"""What the consumer thread reports about itself: readiness from the group coordinator's
heartbeat, and `kafka_lag{topic,partition}` per partition we own.

Lag is the fetch high watermark minus the first message not yet finished (fetched is not
done), so work in progress shows as lag; a partition given away loses its series.
"""

from __future__ import annotations

import math

from kafka import KafkaConsumer, TopicPartition

from monitor.receivers.kafka._offsets import PartitionTracker
from monitor.telemetry import Telemetry


def heartbeat_age(consumer: KafkaConsumer) -> float:
    """Seconds since the last heartbeat to the group coordinator (inf when unknown)."""
    try:
        metrics = consumer.metrics() or {}
        return float(
            metrics.get("consumer-coordinator-metrics", {}).get(
                "last-heartbeat-seconds-ago", math.inf
            )
        )
    except Exception:
        return math.inf


class LagGauge:
    """The `kafka_lag` series of the partitions we own (consumer thread only)."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._gauge = telemetry.gauge("kafka_lag")
        self._series: set[TopicPartition] = set()

    def update(
        self,
        consumer: KafkaConsumer,
        owned: set[TopicPartition],
        trackers: dict[TopicPartition, PartitionTracker],
    ) -> None:
        for tp in self._series - owned:
            self.remove(tp)
        for tp in consumer.assignment() & owned:
            high = consumer.highwater(tp)
            if high is None:
                continue
            tracker = trackers.get(tp)
            base = tracker.first_unfinished if tracker is not None else None
            if base is None:
                try:
                    base = consumer.position(tp, timeout_ms=50)
                except Exception:
                    continue
            if base is not None:
                self._gauge.labels(tp.topic, str(tp.partition)).set(max(0, high - base))
                self._series.add(tp)

    def remove(self, tp: TopicPartition) -> None:
        self._series.discard(tp)
        try:
            self._gauge.remove(tp.topic, str(tp.partition))
        except KeyError:
            pass
