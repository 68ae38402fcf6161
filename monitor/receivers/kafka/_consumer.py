"""The consumer loop: a consumer-group member that hands each message to the trace stage.

Threading: kafka-python is blocking and not thread-safe, so exactly one thread (the
"consumer thread") owns the `KafkaConsumer` and the dead-letter producer. It polls,
decodes each message (`_messages`) into a `Delivery` and hands a poll's deliveries to
the trace stage in one `consume` call. Consecutive messages of a partition that each hold
one JSON record (the common message) make one delivery, a run, acknowledged as a whole:
acknowledging every message on its own would cost more than reading it. Any other
message (OTLP spans, a JSON array of several records, a rejected message) is its own
delivery. Each record
carries where it came from (`_Provenance`, built only if read) as its metadata. The trace
stage calls a delivery's `on_done` once everything built from it is finished; that
appends a token to a deque this thread drains. Nothing here knows about traces or
sampling.

At-least-once: every run and message is registered with its partition's
`PartitionTracker` before anything that can fail (a run at its first offset, stretched
over its last when it closes), and offsets are committed only up to the contiguous prefix
of finished messages (`_offsets`): at most once a second, on partition revocation (after
a short grace for in-flight messages) and at shutdown. The open traces of a partition
given away are handed back to the trace stage unevaluated (`_give_away`): their messages
stay unfinished, so the next owner reads them again whole. A message that fails inside the
monitor costs that message alone: it is counted, dead-lettered where configured, and
finished, so its partition neither stalls nor skips. A crash re-delivers, it never skips;
a run is re-delivered whole.

Backpressure: while more than `max_in_flight` deliveries are handed out and unfinished, or
the trace stage refused a poll's deliveries (its intake is full: they are held and
offered again), every assigned partition is paused (`pause()`); polling continues so
group membership is kept. Nothing is buffered beyond that bound.

Availability: the consumer is (re)created with exponential backoff while the brokers are
unreachable, and the backoff resets after every good poll; `ready()` says why it is not
ready. `kafka_lag{topic,partition}` is the fetch high watermark minus the first message
not yet finished, so work in progress shows as lag.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kafka import (
    ConsumerRebalanceListener,
    KafkaConsumer,
    OffsetAndMetadata,
    TopicPartition,
)
from kafka.consumer.fetcher import ConsumerRecord

from monitor.component import Delivery, Invalid, TraceConsumer
from monitor.config import KafkaReceiver as KafkaConfig
from monitor.receivers.kafka._client import BOOTSTRAP_TIMEOUT_MS, client_options, construct
from monitor.receivers.kafka._dead_letter import DeadLetters
from monitor.receivers.kafka._messages import Decoded, Rejection, decode_message
from monitor.receivers.kafka._offsets import PartitionTracker
from monitor.records import RawRecord
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

SOURCE = "kafka"
_POLL_TIMEOUT_MS = 100
_COMMIT_INTERVAL_S = 1.0
_STATUS_INTERVAL_S = 1.0
_REVOKE_GRACE_S = 3.0
_BACKOFF_INITIAL_S = 0.5
_BACKOFF_MAX_S = 30.0
_LOG_INTERVAL_S = 30.0
_MAX_HEADERS = 16
_MAX_META_CHARS = 256

# What travels back to the consumer thread when a unit finishes: (tracker, offset it is
# registered at, ok, in_flight) — `in_flight` for a delivery, not for a dead letter.
_Token = tuple[PartitionTracker, int, bool, bool]


@dataclass
class Backoff:
    initial: float = _BACKOFF_INITIAL_S
    maximum: float = _BACKOFF_MAX_S
    jitter: Callable[[float, float], float] = random.uniform
    _current: float = field(default=0.0, init=False)

    def next(self) -> float:
        self._current = min(self.maximum, max(self.initial, self._current * 2))
        return self._current * self.jitter(0.8, 1.2)

    def reset(self) -> None:
        self._current = 0.0

    @property
    def current(self) -> float:
        """The delay the last failure backed off by (before jitter); 0 after a success."""
        return self._current


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, receiver: KafkaReceiver) -> None:
        self._receiver = receiver

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._receiver._on_revoked(revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._receiver._on_assigned(assigned)


class KafkaReceiver:
    """Consumes `config.topics` in group `config.group_id` into `consumer`."""

    def __init__(
        self,
        config: KafkaConfig,
        consumer: TraceConsumer,
        telemetry: Telemetry,
        *,
        drain_timeout_s: float = 20.0,
        max_in_flight: int = 2_000,
    ) -> None:
        self._cfg = config
        self._next = consumer
        self._t = telemetry
        self._options = client_options(config)
        self._encoding = config.encoding  # read for every message
        self._drain_timeout_s = drain_timeout_s
        self._max_in_flight = max(max_in_flight, 1)
        self._log = RateLimitedLog(log, _LOG_INTERVAL_S)
        self._dead_letters = (
            DeadLetters(
                config.dead_letter_topic,
                self._options,
                telemetry,
                self._log,
                max_message_bytes=config.max_message_bytes,
            )
            if config.dead_letter_topic is not None
            else None
        )
        self.backoff = Backoff()
        # Shared with the consumer thread.
        self._done: deque[_Token] = deque()
        self._stop = threading.Event()
        self._draining = threading.Event()
        self._drained = threading.Event()
        self._wake = threading.Event()  # cuts backoff sleeps short on shutdown
        self._status: tuple[bool, str] = (False, "not started")
        self._in_flight = 0
        # Owned by the consumer thread.
        self._consumer: KafkaConsumer | None = None
        self._trackers: dict[TopicPartition, PartitionTracker] = {}
        # Ours by the rebalance callbacks: the client's assignment set still lists revoked
        # partitions until the next assignment arrives.
        self._assigned: set[TopicPartition] = set()
        # Revoked, and not yet known to be given back or away (`_on_assigned`).
        self._leaving: dict[TopicPartition, PartitionTracker] = {}
        self._lag_series: set[TopicPartition] = set()
        self._held: list[tuple[PartitionTracker, Delivery]] = []  # refused by a full stage
        self._flush_owed = False  # draining: open traces may hold our messages
        self._paused = False
        self._joined = False
        self._last_commit = 0.0
        self._last_status = 0.0
        self._thread: threading.Thread | None = None
        self._thread_id = 0  # the consumer thread's
        self._closed = False

    # -- lifecycle (event loop) -----------------------------------------------------------

    async def start(self) -> None:
        if self._thread is not None:
            return
        self._status = (False, "connecting to " + ",".join(self._cfg.bootstrap_servers))
        self._thread = threading.Thread(target=self._main, name="kafka-consumer", daemon=True)
        self._thread.start()

    async def shutdown(self) -> None:
        """Stop fetching, let our in-flight messages finish (bounded), commit, leave the
        group. What is not finished by then is re-delivered to the next owner."""
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is None:
            return
        self._draining.set()
        self._wake.set()
        await asyncio.to_thread(self._drained.wait, self._drain_timeout_s)
        if self._in_flight > 0:
            log.warning(
                "kafka: %d deliveries still in flight at shutdown; they will be re-delivered",
                self._in_flight,
            )
        self._stop.set()
        await asyncio.to_thread(thread.join, BOOTSTRAP_TIMEOUT_MS / 1000 + 10)
        self._status = (False, "stopped")

    def ready(self) -> tuple[bool, str]:
        return self._status

    @property
    def in_flight(self) -> int:
        """Deliveries (a message, or a run of one-record messages) handed to the trace
        stage and not finished yet."""
        return self._in_flight

    @property
    def paused(self) -> bool:
        """Whether fetching is paused for backpressure (or shutdown)."""
        return self._paused

    # -- consumer thread --------------------------------------------------------------------

    def _main(self) -> None:
        self._thread_id = threading.get_ident()
        try:
            while not self._stop.is_set():
                if self._consumer is None:
                    if self._draining.is_set():
                        break  # nothing was consumed, nothing to drain
                    if not self._connect():
                        self._sleep(self.backoff.next())
                        continue
                try:
                    self._step()
                    self.backoff.reset()
                except Exception as exc:
                    self._t.dropped.labels("kafka", "poll_error").inc()
                    self._log.log(
                        "poll",
                        logging.WARNING,
                        "kafka: poll failed, retrying: %s: %s",
                        type(exc).__name__,
                        exc,
                    )
                    self._sleep(self.backoff.next())
        finally:
            self._close()

    def _sleep(self, delay_s: float) -> None:
        """Back off, but wake for shutdown (and then never spin faster than 20 Hz)."""
        if self._wake.wait(delay_s):
            self._stop.wait(0.05)

    def _connect(self) -> bool:
        try:
            consumer = construct(
                KafkaConsumer,
                group_id=self._cfg.group_id,
                enable_auto_commit=False,
                auto_offset_reset=self._cfg.auto_offset_reset,
                session_timeout_ms=self._cfg.session_timeout_ms,
                heartbeat_interval_ms=self._cfg.heartbeat_interval_ms,
                max_poll_interval_ms=self._cfg.max_poll_interval_ms,
                max_poll_records=self._cfg.max_poll_records,
                fetch_max_bytes=self._cfg.max_message_bytes,
                group_instance_id=self._cfg.group_instance_id,
                **self._options,
            )
            consumer.subscribe(topics=list(self._cfg.topics), listener=_Listener(self))
        except Exception as exc:
            servers = ",".join(self._cfg.bootstrap_servers)
            self._status = (False, f"cannot reach Kafka brokers {servers}: {exc}")
            self._log.log(
                "connect",
                logging.WARNING,
                "kafka: cannot reach brokers %s (%s); retrying",
                servers,
                exc,
            )
            return False
        self._consumer = consumer
        self._joined = False
        self._status = (False, f"joining consumer group {self._cfg.group_id}")
        log.info("kafka: connected; joining group %s for %s", self._cfg.group_id, self._cfg.topics)
        return True

    def _step(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        self._collect_done()
        self._offer_held()
        self._backpressure(consumer)
        polled = consumer.poll(timeout_ms=_POLL_TIMEOUT_MS, max_records=self._cfg.max_poll_records)
        batch: list[tuple[PartitionTracker, Delivery]] = []
        if polled and not self._draining.is_set():
            for tp, messages in polled.items():
                self._take(messages, self._tracker(tp), batch)
        self._hand_over(batch)
        if self._draining.is_set() and self._flush_owed and not self._held:
            self._flush_owed = False
            self._next.flush()
        self._collect_done()
        now = time.monotonic()
        if now - self._last_commit >= _COMMIT_INTERVAL_S:
            self._commit(list(self._trackers.values()))
        if now - self._last_status >= _STATUS_INTERVAL_S:
            self._last_status = now
            self._refresh_status(consumer)
        if self._draining.is_set() and not self._held and self._in_flight == 0:
            self._drained.set()

    def _tracker(self, tp: TopicPartition) -> PartitionTracker:
        tracker = self._trackers.get(tp)
        if tracker is None:
            tracker = PartitionTracker(tp.topic, tp.partition)
            self._trackers[tp] = tracker
        return tracker

    def _take(
        self,
        messages: list[ConsumerRecord],
        tracker: PartitionTracker,
        batch: list[tuple[PartitionTracker, Delivery]],
    ) -> None:
        """A partition's polled messages, in order, into deliveries: runs of one-record
        messages, and every other message on its own (`_handle`)."""
        run: list[RawRecord] = []
        first = last = 0
        for message in messages:
            offset = message.offset
            if not run:
                # Registered before anything can fail, owing one unit: the run this
                # message may open, or the message's own.
                tracker.add(offset, 1)
            decoded = self._decode(message)
            if decoded.spans is None and not decoded.problems and len(decoded.records) == 1:
                record = decoded.records[0]
                record.metadata = _Provenance(message)
                if not run:
                    first = offset
                run.append(record)
                last = offset
                continue
            if run:
                self._close_run(run, first, last, tracker, batch)
                run = []
                tracker.add(offset, 1)
            self._handle(message, decoded, tracker, batch)
        if run:
            self._close_run(run, first, last, tracker, batch)

    def _decode(self, message: ConsumerRecord) -> Decoded:
        try:
            return decode_message(message.value, self._encoding)
        except Exception as exc:  # a bug: this message alone fails
            return Decoded(problems=[_internal_error(message, exc)])

    def _close_run(
        self,
        run: list[RawRecord],
        first: int,
        last: int,
        tracker: PartitionTracker,
        batch: list[tuple[PartitionTracker, Delivery]],
    ) -> None:
        tracker.stretch(first, last)
        delivery = Delivery(
            SOURCE,
            records=run,
            on_done=partial(self._delivered, tracker, first),
            on_rejected=partial(self._invalid_records, tracker, first),
            origin=tracker,
        )
        batch.append((tracker, delivery))

    def _handle(
        self,
        message: ConsumerRecord,
        decoded: Decoded,
        tracker: PartitionTracker,
        batch: list[tuple[PartitionTracker, Delivery]],
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
                    record.metadata = _Provenance(message, position)
                delivery = Delivery(
                    SOURCE,
                    spans=decoded.spans or [],
                    records=records,
                    on_done=partial(self._delivered, tracker, offset),
                    on_rejected=partial(self._invalid_records, tracker, offset),
                    metadata=_Provenance(message) if decoded.spans else None,
                    origin=tracker,
                )
                batch.append((tracker, delivery))
                handed = True
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
            self._t.records_rejected.labels(SOURCE, problem.reason).inc()
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
            if not isinstance(origin, _Provenance):  # every record of ours has one
                log.error("kafka: an invalid record without its message: %s", detail)
                continue
            where = "" if origin.position is None else f"record {origin.position}: "
            message = origin.message
            entry = by_message.setdefault(id(message), (message, []))
            entry[1].append(Rejection(reason, where + detail))
        for message, rejections in by_message.values():
            self._dead_letter(message, tracker, unit, rejections)

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

    def _delivered(self, tracker: PartitionTracker, offset: int, ok: bool) -> None:
        """A delivery's `on_done` (any thread), for the unit registered at `offset`. Most
        are called in this thread, while the trace stage takes the delivery (nothing
        sampled): those finish at once, without the round trip through the deque that
        other threads' completions take."""
        if threading.get_ident() != self._thread_id:
            self._done.append((tracker, offset, ok, True))
            return
        self._settle(tracker, offset, ok, True)

    def _hand_over(self, batch: list[tuple[PartitionTracker, Delivery]]) -> None:
        if not batch:
            return
        if self._held or not self._offer(batch):
            # The trace stage is full: hold these, pause, offer them again next step.
            self._held.extend(batch)
            return
        self._flush_owed = True

    def _offer(self, batch: list[tuple[PartitionTracker, Delivery]]) -> bool:
        """Hand `batch` to the trace stage; counted in flight first, since the stage may
        finish some of them before it returns."""
        self._in_flight += len(batch)
        if self._next.consume([d for _, d in batch]):
            return True
        self._in_flight -= len(batch)
        return False

    def _offer_held(self) -> None:
        if not self._held:
            return
        held = [(t, d) for t, d in self._held if self._owned(t)]
        self._held = []
        if held and not self._offer(held):
            self._held = held
            return
        self._flush_owed = self._flush_owed or bool(held)

    def _owned(self, tracker: PartitionTracker) -> bool:
        return not tracker.revoked

    def _collect_done(self) -> None:
        done = self._done
        while done:
            self._settle(*done.popleft())

    def _settle(self, tracker: PartitionTracker, offset: int, ok: bool, counted: bool) -> None:
        """A completion, in the consumer thread: `counted` ones were in flight."""
        if counted:
            self._in_flight -= 1
        if not self._owned(tracker):
            return
        if ok:
            tracker.finish(offset)
        else:
            # An abandoned message is never finished: the commit stops before it and
            # the next owner reads it again. Nothing is left to wait for on it.
            tracker.drop(offset)

    def _backpressure(self, consumer: KafkaConsumer) -> None:
        if self._draining.is_set() or self._held or self._in_flight >= self._max_in_flight:
            unpaused = consumer.assignment() - consumer.paused()
            if unpaused:
                consumer.pause(*unpaused)
            self._paused = True
        elif self._paused and self._in_flight <= self._max_in_flight // 2:
            consumer.resume(*consumer.paused())
            self._paused = False

    def _commit(self, trackers: list[PartitionTracker], *, wait: bool = True) -> None:
        """Commit what is finished. `wait=False` from the rebalance listener: kafka-python
        runs listeners on its IO thread, where a blocking commit is refused; the async
        commit is sent before the group re-joins, so it lands in the old generation."""
        self._last_commit = time.monotonic()
        targets = {
            TopicPartition(t.topic, t.partition): (t, t.committable)
            for t in trackers
            if t.committable is not None
        }
        if not targets or self._consumer is None:
            return
        offsets = {tp: OffsetAndMetadata(target, "", -1) for tp, (_, target) in targets.items()}
        try:
            if not wait:
                self._consumer.commit_async(offsets=offsets, callback=self._commit_sent)
                return
            self._consumer.commit(offsets=offsets)
        except Exception as exc:
            self._commit_failed(exc)
            return
        log.debug(
            "kafka: committed %s",
            {f"{tp.topic}/{tp.partition}": m.offset for tp, m in offsets.items()},
        )
        for tracker, target in targets.values():
            tracker.committed = target

    def _commit_failed(self, exc: BaseException) -> None:
        self._t.dropped.labels("kafka", "commit_failed").inc()
        self._log.log(
            "commit",
            logging.WARNING,
            "kafka: offset commit failed (records may be re-delivered): %s: %s",
            type(exc).__name__,
            exc,
        )

    def _commit_sent(self, offsets: dict[TopicPartition, OffsetAndMetadata], response: Any) -> None:
        """Callback of an asynchronous commit (kafka-python's IO thread)."""
        if isinstance(response, BaseException):
            self._commit_failed(response)
        else:
            log.debug("kafka: committed on revocation %s", _names(set(offsets)))

    def _refresh_status(self, consumer: KafkaConsumer) -> None:
        age = math.inf
        try:
            metrics = consumer.metrics() or {}
            age = float(
                metrics.get("consumer-coordinator-metrics", {}).get(
                    "last-heartbeat-seconds-ago", math.inf
                )
            )
        except Exception:
            age = math.inf
        stale_after = 2 * self._cfg.heartbeat_interval_ms / 1000 + 1
        assigned = consumer.assignment()
        if not self._joined:
            self._status = (False, f"joining consumer group {self._cfg.group_id}")
        elif math.isfinite(age) and age > stale_after:
            self._status = (
                False,
                f"no heartbeat from the group coordinator for {age:.0f}s (brokers unreachable?)",
            )
        else:
            self._status = (True, f"consuming {len(assigned)} partitions")
        for tp in self._lag_series - self._assigned:
            self._remove_lag(tp)
        for tp in assigned & self._assigned:
            high = consumer.highwater(tp)
            if high is None:
                continue
            tracker = self._trackers.get(tp)
            # Lag counts from the first message not yet finished: fetched is not done.
            base = tracker.first_unfinished if tracker is not None else None
            if base is None:
                try:
                    base = consumer.position(tp, timeout_ms=50)
                except Exception:
                    continue
            if base is not None:
                self._t.kafka_lag.labels(tp.topic, str(tp.partition)).set(max(0, high - base))
                self._lag_series.add(tp)

    def _remove_lag(self, tp: TopicPartition) -> None:
        self._lag_series.discard(tp)
        try:
            self._t.kafka_lag.remove(tp.topic, str(tp.partition))
        except KeyError:
            pass

    # -- rebalance callbacks (consumer thread, inside poll) ---------------------------------

    def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        # Open traces are not released here: one released now would be evaluated cut
        # short. Their messages stay unfinished, so the commit below stops before them.
        # Whether they are abandoned waits for the assignment (`_on_assigned`): eager
        # rebalancing revokes every partition, and one given straight back keeps its read
        # position, so its open traces must stay.
        mine = [self._trackers[tp] for tp in revoked if tp in self._trackers]
        # At close the in-flight messages already had their chance (shutdown drained them).
        deadline = time.monotonic() + (0 if self._stop.is_set() else _REVOKE_GRACE_S)
        # Messages waiting in open traces finish only when more spans come: the grace
        # (which blocks the client's heartbeats) is for the others.
        waiting = self._next.holds(mine) if mine else 0
        while sum(t.outstanding for t in mine) > waiting and time.monotonic() < deadline:
            self._collect_done()
            time.sleep(0.005)
        self._collect_done()
        self._commit(mine, wait=False)
        for tp in revoked:
            leaving = self._trackers.pop(tp, None)
            if leaving is not None:
                self._leaving[tp] = leaving
            self._assigned.discard(tp)
            self._remove_lag(tp)
        if revoked:
            log.info("kafka: partitions revoked: %s", _names(revoked))

    def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        self._joined = True
        self._paused = False
        self._assigned |= assigned
        # A partition given straight back carries on with its tracker: the client kept
        # its read position, so its unfinished messages are not read again.
        for tp in assigned & self._leaving.keys():
            self._trackers[tp] = self._leaving.pop(tp)
        self._give_away()
        log.info("kafka: partitions assigned: %s", _names(assigned) or "none")

    def _give_away(self) -> None:
        """The partitions revoked and not given back: their open traces are abandoned
        unevaluated, not released. One released or kept would be evaluated cut (now, or
        at idle timeout) while the next owner, which reads their unfinished, uncommitted
        messages again, evaluates it whole. A trace that also holds messages of a
        partition we keep stays open (README, "Rebalances")."""
        gone = list(self._leaving.values())
        self._leaving.clear()
        if not gone:
            return
        self._next.abandon(gone)
        self._collect_done()  # the abandoned messages: never finished, no longer awaited
        for tracker in gone:
            tracker.revoked = True  # its late completions are ignored
        self._held = [(t, d) for t, d in self._held if self._owned(t)]

    def _close(self) -> None:
        self._drained.set()
        if self._dead_letters is not None:
            # Dead letters acknowledged now can still be committed below.
            self._dead_letters.flush(timeout_s=5)
        self._collect_done()
        if self._consumer is not None:
            self._commit(list(self._trackers.values()))
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close(autocommit=False, timeout_ms=5_000)
            except Exception as exc:
                log.warning("kafka: consumer close failed: %s", exc)
        self._give_away()  # leaving the group revoked everything
        if self._dead_letters is not None:
            self._dead_letters.close()


def _internal_error(message: ConsumerRecord, exc: Exception) -> Rejection:
    """A bug met while taking `message` apart: it costs that message alone."""
    log.debug("kafka: message %s failed", message.offset, exc_info=exc)
    return Rejection("internal_error", f"{type(exc).__name__}: {exc}")


def _names(partitions: set[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(partitions))


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")[:_MAX_META_CHARS]


class _Provenance(Mapping[str, str]):
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
