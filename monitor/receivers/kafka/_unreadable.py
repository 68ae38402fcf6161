"""Messages kafka-python cannot read (a header key that is not UTF-8, a bad CRC): every
fetch of one fails the same way, so it is stepped over rather than retried forever.
Consumer thread only."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import CorruptRecordError

from monitor.receivers.kafka._intake import SOURCE
from monitor.receivers.kafka._offsets import PartitionTracker
from monitor.telemetry import RateLimitedLog, Telemetry


def skip_unreadable(
    consumer: KafkaConsumer,
    exc: CorruptRecordError,
    assigned: Collection[TopicPartition],
    tracker: Callable[[TopicPartition], PartitionTracker],
    telemetry: Telemetry,
    quiet: RateLimitedLog,
) -> bool:
    """Step over the message that raised `exc` (and the rest of its record batch, which
    kafka-python cannot read past it): counted
    (`records_rejected_total{reason="unreadable_message"}`), logged, and registered as
    finished so that the commit passes it; the messages before it were handed on
    already. False when the message cannot be found in an `assigned` partition (the poll
    error is then retried)."""
    found = unreadable_at(exc)
    if found is None or found[0] not in assigned:
        return False
    tp, first, end = found
    partition = tracker(tp)
    skipped = range(max(first, partition.read_to), end)
    telemetry.counter("records_rejected").labels(SOURCE, "unreadable_message").inc(len(skipped))
    quiet.log(
        "unreadable",
        logging.WARNING,
        "kafka: message %s/%d@%d cannot be read (%s); it and the %d after it in its "
        "record batch, which kafka-python cannot read past it, are skipped",
        tp.topic,
        tp.partition,
        first,
        exc,
        end - first - 1,
    )
    for offset in skipped:
        partition.add(offset, 0)
    consumer.seek(tp, end)
    return True


def unreadable_at(exc: BaseException) -> tuple[TopicPartition, int, int] | None:
    """Where the message that raised `exc` is — its partition, its offset and the end of
    its record batch: kafka-python's fetcher was unpacking it, in a frame holding the
    partition (`tp`), the offset it was to read next and the batch."""
    trace = exc.__traceback__
    while trace is not None:
        frame = trace.tb_frame
        if frame.f_code.co_name == "_unpack_records":
            tp = frame.f_locals.get("tp")
            offset = getattr(frame.f_locals.get("self"), "next_fetch_offset", None)
            end = getattr(frame.f_locals.get("batch"), "next_offset", None)
            if isinstance(tp, TopicPartition) and isinstance(offset, int):
                return tp, offset, end if isinstance(end, int) and end > offset else offset + 1
        trace = trace.tb_next
    return None
