"""A partition's polled messages into deliveries for the trace stage (consumer thread).

Consecutive messages that each hold one JSON record (the common message) make one
delivery, a run, acknowledged as a whole: acknowledging every message on its own would
cost more than reading it. Any other message (OTLP spans, a JSON array of several records,
a rejected message) is its own delivery. Every run and message is registered with its
partition's `PartitionTracker` before anything that can fail (a run at its first offset,
stretched over its last when it closes). A message that fails here costs that message
alone: it is counted, dead-lettered where configured, and finished, so its partition
neither stalls nor skips. Each record carries where it came from (`Provenance`, built
only if read) as its metadata.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from functools import partial

from kafka.consumer.fetcher import ConsumerRecord

from monitor.component import Delivery, Invalid
from monitor.receivers.kafka._dead_letter import DeadLetters
from monitor.receivers.kafka._messages import Decoded, Encoding, Rejection, decode_message
from monitor.receivers.kafka._offsets import PartitionTracker
from monitor.records import RagRecord, RawRecord
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

SOURCE = "kafka"
_FAILED_DETAIL = (
    "a record of this delivery ({} messages) failed in the evaluation stage twice; "
    "see the monitor's log for the record and the error"
)
_MAX_HEADERS = 16
_MAX_META_CHARS = 256

# What travels back to the consumer thread when a unit finishes: (tracker, offset it is
# registered at, ok, in_flight) — `in_flight` for a delivery, not for a dead letter.
Token = tuple[PartitionTracker, int, bool, bool] | Callable[[], None]
"""Or work that must run in the consumer thread (a failed record's dead letter)."""
Batch = list[tuple[PartitionTracker, Delivery]]


class KafkaIntake:
    """Builds deliveries from polled messages (see the module docstring).

    `delivered(tracker, offset, ok)` is each delivery's `on_done`; a dead letter's
    acknowledgement is appended to `done` as a `Token`."""

    def __init__(
        self,
        encoding: Encoding,
        telemetry: Telemetry,
        quiet: RateLimitedLog,
        dead_letters: DeadLetters | None,
        delivered: Callable[[PartitionTracker, int, bool], None],
        done: deque[Token],
    ) -> None:
        self._encoding = encoding  # read for every message
        self._t = telemetry
        self._log = quiet
        self._dead_letters = dead_letters
        self._delivered = delivered
        self._done = done

    def take(
        self,
        messages: list[ConsumerRecord],
        tracker: PartitionTracker,
        batch: Batch,
    ) -> None:
        """A partition's polled messages, in order, into deliveries: runs of one-record
        messages, and every other message on its own (`_handle`)."""
        run: list[RawRecord] = []
        run_messages: list[ConsumerRecord] = []
        first = last = 0
        for message in messages:
            offset = message.offset
            if offset < tracker.read_to:
                continue  # read already: the client's position went back (`read_to`)
            if tracker.skip and tracker.skipped(offset):
                # Finished by the partition's previous reader (`PartitionTracker.skip`).
                if run:
                    self._close_run(run, run_messages, first, last, tracker, batch)
                    run, run_messages = [], []
                tracker.add(offset, 0)
                continue
            if not run:
                # Registered before anything can fail, owing one unit: the run this
                # message may open, or the message's own.
                tracker.add(offset, 1)
            decoded = self._decode(message)
            if decoded.spans is None and not decoded.problems and len(decoded.records) == 1:
                record = decoded.records[0]
                record.metadata = Provenance(message)
                if not run:
                    first = offset
                run.append(record)
                run_messages.append(message)
                last = offset
                continue
            if run:
                self._close_run(run, run_messages, first, last, tracker, batch)
                run, run_messages = [], []
                tracker.add(offset, 1)
            self._handle(message, decoded, tracker, batch)
        if run:
            self._close_run(run, run_messages, first, last, tracker, batch)

    def _decode(self, message: ConsumerRecord) -> Decoded:
        try:
            return decode_message(message.value, self._encoding)
        except Exception as exc:  # a bug: this message alone fails
            return Decoded(problems=[_internal_error(message, exc)])

    def _close_run(
        self,
        run: list[RawRecord],
        messages: list[ConsumerRecord],
        first: int,
        last: int,
        tracker: PartitionTracker,
        batch: Batch,
    ) -> None:
        tracker.stretch(first, last)
        if self._dead_letters is not None:
            tracker.messages[first] = messages
        delivery = Delivery(
            SOURCE,
            records=run,
            on_done=partial(self._delivered, tracker, first),
            on_rejected=partial(self._invalid_records, tracker, first),
            on_failed=partial(self._record_failed, tracker, first),
            origin=tracker,
        )
        batch.append((tracker, delivery))

    def _handle(
        self,
        message: ConsumerRecord,
        decoded: Decoded,
        tracker: PartitionTracker,
        batch: Batch,
    ) -> None:
        """Hand one decoded message on by itself. The caller registered it with its
        partition's tracker, owing one unit; that unit becomes its delivery's once the
        delivery is built, and is released here otherwise, so a failure costs this
        message alone and can never let a commit pass over it."""
        offset = message.offset
        handed = False
        problems = decoded.problems
        try:
            if decoded.spans or decoded.records:
                records, positions = decoded.records, decoded.positions
                for i, record in enumerate(records):
                    position = positions[i] if positions is not None else None
                    record.metadata = Provenance(message, position)
                delivery = Delivery(
                    SOURCE,
                    spans=decoded.spans or [],
                    records=records,
                    on_done=partial(self._delivered, tracker, offset),
                    on_rejected=partial(self._invalid_records, tracker, offset),
                    on_failed=partial(self._record_failed, tracker, offset),
                    metadata=Provenance(message) if decoded.spans else None,
                    origin=tracker,
                )
                batch.append((tracker, delivery))
                handed = True
                if self._dead_letters is not None:
                    tracker.messages[offset] = [message]
        except Exception as exc:
            problems = [_internal_error(message, exc)]
        if problems:
            self._reject(message, tracker, offset, problems)
        if not handed:
            tracker.finish(offset)

    def _reject(
        self,
        message: ConsumerRecord,
        tracker: PartitionTracker,
        unit: int,
        problems: list[Rejection],
    ) -> None:
        for problem in problems:
            self._t.counter("records_rejected").labels(SOURCE, problem.reason).inc()
        self._log.log(
            "reject:" + problems[0].reason,
            logging.WARNING,
            "kafka: rejected message %s/%d@%d: %s",
            message.topic,
            message.partition,
            message.offset,
            problems[0].detail,
        )
        self._dead_letter(message, tracker, unit, problems)

    def _invalid_records(
        self, tracker: PartitionTracker, unit: int, problems: list[Invalid]
    ) -> None:
        """Sampled records of the delivery registered at `unit` that failed validation
        (the trace stage counted and logged them): each message holding one is
        dead-lettered. Called in this thread, before the delivery is done."""
        by_message: dict[int, tuple[ConsumerRecord, list[Rejection]]] = {}
        for record, reason, detail in problems:
            origin = record.metadata
            if not isinstance(origin, Provenance):  # every record of ours has one
                log.error("kafka: an invalid record without its message: %s", detail)
                continue
            where = "" if origin.position is None else f"record {origin.position}: "
            message = origin.message
            entry = by_message.setdefault(id(message), (message, []))
            entry[1].append(Rejection(reason, where + detail))
        for message, rejections in by_message.values():
            self._dead_letter(message, tracker, unit, rejections)

    def _record_failed(
        self, tracker: PartitionTracker, unit: int, record: RagRecord | RawRecord, detail: str
    ) -> None:
        """A delivery's `on_failed` (the event loop's thread): the record's message is
        dead-lettered from the consumer thread, before the delivery's completion, which
        follows it through the same deque."""
        self._done.append(partial(self._dead_letter_failed, tracker, unit, record, detail))

    def _dead_letter_failed(
        self, tracker: PartitionTracker, unit: int, record: RagRecord | RawRecord, detail: str
    ) -> None:
        origin = record.metadata
        if tracker.revoked or not isinstance(origin, Provenance):
            return  # the next owner reads it again; or not a record of ours
        tracker.dead_lettered.add(unit)
        where = "" if origin.position is None else f"record {origin.position}: "
        problem = Rejection("evaluation_failed", where + detail)
        self._dead_letter(origin.message, tracker, unit, [problem])

    def failed(self, tracker: PartitionTracker, unit: int) -> None:
        """The delivery registered at `unit` failed inside the monitor (the evaluation
        stage gave a record of it up after a second try): a message that fails the same
        way on every read must not hold its partition, so it is counted, dead-lettered
        where configured, and finished — the commit moves past it once the dead-letter
        topic has it. A record delivered as such took its own message there already
        (`_dead_letter_failed`); for spans, the delivery's message goes."""
        messages = tracker.messages.pop(unit, [])
        if unit in tracker.dead_lettered:
            tracker.dead_lettered.discard(unit)
            messages = []
        self._t.counter("dropped").labels(SOURCE, "evaluation_failed").inc()
        self._log.log(
            "evaluation_failed",
            logging.ERROR,
            "kafka: a delivery of %s/%d at offset %d failed in evaluation; %s and committing "
            "past it (the log above names the record and the error)",
            tracker.topic,
            tracker.partition,
            unit,
            _what_happens(self._dead_letters is not None, len(messages)),
        )
        for message in messages:
            self._dead_letter(
                message,
                tracker,
                unit,
                [Rejection("evaluation_failed", _FAILED_DETAIL.format(len(messages)))],
            )
        tracker.finish(unit)

    def _dead_letter(
        self,
        message: ConsumerRecord,
        tracker: PartitionTracker,
        unit: int,
        problems: list[Rejection],
    ) -> None:
        """Send `message` to the dead-letter topic; the unit registered at `unit` (the
        message's own, or its run's) is not finished before the broker has it."""
        if self._dead_letters is not None:
            tracker.owe(unit, 1)
            token = (tracker, unit, True, False)
            self._dead_letters.send(message, problems, partial(self._done.append, token))


def _what_happens(dead_letters: bool, messages: int) -> str:
    if not dead_letters:
        return "skipping it (no dead_letter_topic)"
    if messages:
        return f"dead-lettering its {messages} message(s)"
    return "its failed records were dead-lettered"


def _internal_error(message: ConsumerRecord, exc: Exception) -> Rejection:
    """A bug met while taking `message` apart: it costs that message alone."""
    log.debug("kafka: message %s failed", message.offset, exc_info=exc)
    return Rejection("internal_error", f"{type(exc).__name__}: {exc}")


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")[:_MAX_META_CHARS]


class Provenance(Mapping[str, str]):
    """Where a record or span delivery came from (topic, partition, offset, key, headers):
    its metadata, built only if read, since only sampled records and dead letters need
    it and most records are neither. `position`: the record's index in a message that
    held several."""

    __slots__ = ("_built", "message", "position")

    def __init__(self, message: ConsumerRecord, position: int | None = None) -> None:
        self.message = message
        self.position = position
        self._built: dict[str, str] | None = None

    def _fields(self) -> dict[str, str]:
        if self._built is None:
            message = self.message
            meta = {
                "kafka.topic": message.topic,
                "kafka.partition": str(message.partition),
                "kafka.offset": str(message.offset),
            }
            if message.key is not None:
                meta["kafka.key"] = _text(message.key)
            for name, value in (message.headers or [])[:_MAX_HEADERS]:
                meta[f"kafka.header.{name}"] = _text(value) if value is not None else ""
            self._built = meta
        return self._built

    def __getitem__(self, key: str) -> str:
        return self._fields()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields())

    def __len__(self) -> int:
        return len(self._fields())
