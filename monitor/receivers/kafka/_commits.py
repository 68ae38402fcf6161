"""Offsets: what is committed, and where a partition newly assigned starts.

A commit sends each partition's contiguous finished prefix (`PartitionTracker.commit_point`,
with what finished past it named in the metadata): at most once a second, for the
partitions revoked (from the rebalance listener, without blocking: kafka-python refuses a
blocking commit there), and at shutdown, again after rejoining the group when the group
rebalanced meanwhile. A partition newly assigned skips what its previous reader finished
past the committed offset (`finished_before`). Consumer thread only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

from monitor.receivers.kafka._offsets import PartitionTracker, parse_finished
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

COMMIT_INTERVAL_S = 1.0
_POLL_TIMEOUT_MS = 100
# Rejoining the group at shutdown to commit again after the group rebalanced.
_REJOIN_S = 5.0


class Commits:
    """Commits for one consumer-group member; `last` is when it last committed."""

    def __init__(self, telemetry: Telemetry, quiet: RateLimitedLog) -> None:
        self._t = telemetry
        self._log = quiet
        self.last = 0.0

    def due(self, now: float) -> bool:
        return now - self.last >= COMMIT_INTERVAL_S

    def commit(
        self,
        consumer: KafkaConsumer | None,
        trackers: Sequence[PartitionTracker],
        *,
        wait: bool = True,
    ) -> Any:
        """Commit what is finished. `wait=False` from the rebalance listener: the commit
        is sent and its future returned, for the listener to await before the group is
        joined again (None: nothing to commit)."""
        self.last = time.monotonic()
        targets = {
            TopicPartition(t.topic, t.partition): (t, target)
            for t in trackers
            if (target := t.commit_point()) is not None
        }
        if not targets or consumer is None:
            return None
        offsets = {
            tp: OffsetAndMetadata(offset, metadata, -1)
            for tp, (_, (offset, metadata)) in targets.items()
        }
        try:
            if not wait:
                return consumer.commit_async(offsets=offsets)
            consumer.commit(offsets=offsets)
        except Exception as exc:
            self.failed(exc)
            return None
        log.debug(
            "kafka: committed %s",
            {f"{tp.topic}/{tp.partition}": m.offset for tp, m in offsets.items()},
        )
        for tracker, (offset, metadata) in targets.values():
            tracker.committed, tracker.committed_metadata = offset, metadata
        return None

    def failed(self, exc: BaseException) -> None:
        self._t.counter("dropped").labels("kafka", "commit_failed").inc()
        self._log.log(
            "commit",
            logging.WARNING,
            "kafka: offset commit failed (records may be re-delivered): %s: %s",
            type(exc).__name__,
            exc,
        )

    def after_rejoin(
        self,
        consumer: KafkaConsumer,
        joined: Callable[[], bool],
        trackers: Callable[[], Sequence[PartitionTracker]],
    ) -> None:
        """The commit at close was refused, most often because the group rebalanced
        meanwhile (another replica left or joined: a rolling restart, a scale-down) and
        our generation is stale. Rejoin without reading anything (`joined` turns True
        with the next assignment), and commit again what the new assignment gives back to
        us; what it gives to another member is read again there (at-least-once)."""
        deadline = time.monotonic() + _REJOIN_S
        try:
            while not joined() and time.monotonic() < deadline:
                consumer.pause(*consumer.assignment())
                # Fetched messages of a partition assigned anew are not handed on or
                # registered: nothing of theirs is committed, the next owner reads them.
                consumer.poll(timeout_ms=_POLL_TIMEOUT_MS, max_records=1)
        except Exception as exc:
            log.warning("kafka: rejoining the group to commit at shutdown failed: %s", exc)
            return
        if not joined():
            log.warning(
                "kafka: the group was not rejoined within %.0f s at shutdown; what finished "
                "since the last commit will be read again by the next owner",
                _REJOIN_S,
            )
            return
        log.info("kafka: rejoined the group at shutdown to commit again")
        self.commit(consumer, trackers())


def finished_before(
    consumer: KafkaConsumer | None, tp: TopicPartition, quiet: RateLimitedLog
) -> list[tuple[int, int]]:
    """What the partition's previous reader finished past its committed offset (its
    commit's metadata): read before the first message of a new assignment, so never
    evaluated twice. Unknown (the fetch failed): everything is read again."""
    if consumer is None:
        return []
    try:
        committed = consumer.committed(tp, metadata=True, timeout_ms=5_000)
    except Exception as exc:
        quiet.log(
            "committed",
            logging.WARNING,
            "kafka: cannot read the committed offset of %s/%d (%s); messages its previous "
            "reader finished past it are read again",
            tp.topic,
            tp.partition,
            exc,
        )
        return []
    if committed is None:
        return []
    ranges = parse_finished(committed.metadata, committed.offset)
    if ranges:
        log.info(
            "kafka: %s/%d: %d messages past the committed offset %d were finished by its "
            "previous reader; they are skipped",
            tp.topic,
            tp.partition,
            sum(last - first + 1 for first, last in ranges),
            committed.offset,
        )
    return ranges
