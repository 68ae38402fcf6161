"""The consumer loop: a consumer-group member that hands each message to the trace stage.

Threading: kafka-python is blocking and not thread-safe, so exactly one thread (the
"consumer thread") owns the `KafkaConsumer` and the dead-letter producer. It polls, turns
a poll's messages into deliveries (`_intake`: runs of one-record messages, every other
message on its own) and hands them to the trace stage in one `consume` call. The trace
stage calls a delivery's `on_done` once everything built from it is finished; that
appends a token to a deque this thread drains. Nothing here knows about traces or
sampling.

At-least-once: offsets are committed only up to the contiguous prefix of finished
messages (`_offsets`): at most once a second, on partition revocation (after a short
grace for in-flight messages) and at shutdown. The open traces of a partition given away,
and at shutdown of every partition, are handed back to the trace stage unevaluated
(`_give_away`, `_hand_back`): their messages stay unfinished, so the next owner reads
them again whole. From the revoke until the assignment says whether the partition comes
back, however long the group takes to rejoin, its open traces are suspended in the trace
stage: no span of theirs can come meanwhile, so they are not released for idleness. A crash re-delivers, it never
skips; a run is re-delivered whole.

Backpressure: while more than `max_in_flight` deliveries are handed out and unfinished, or
the trace stage refused a poll's deliveries (its intake is full: they are held and
offered again), every assigned partition is paused (`pause()`); polling continues so
group membership is kept. Nothing is buffered beyond that bound.

Availability: the consumer is (re)created under the retry policy (`monitor/retry.py`:
exponential backoff with full jitter, capped, no deadline) while the brokers are
unreachable, and the backoff starts over after every good poll; `ready()` says why it is
not ready, and `kafka_lag{topic,partition}` counts from the first message not yet
finished (`_status`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import threading
import time
from collections import deque
from typing import Any

from kafka import (
    AsyncConsumerRebalanceListener,
    KafkaConsumer,
    OffsetAndMetadata,
    TopicPartition,
)
from kafka.errors import CorruptRecordError

from monitor.component import TraceConsumer
from monitor.config import KafkaConfig
from monitor.receivers.kafka._client import BOOTSTRAP_TIMEOUT_MS, client_options, construct
from monitor.receivers.kafka._dead_letter import DeadLetters
from monitor.receivers.kafka._intake import SOURCE, Batch, KafkaIntake, Token
from monitor.receivers.kafka._offsets import PartitionTracker, parse_finished
from monitor.receivers.kafka._status import LagGauge, heartbeat_age
from monitor.retry import Retry, RetryPolicy
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

_POLL_TIMEOUT_MS = 100
_COMMIT_INTERVAL_S = 1.0
_STATUS_INTERVAL_S = 1.0
_REVOKE_GRACE_S = 3.0
# Reconnecting and polling again after a failure: from 0.5 s, doubling, at most 30 s.
RECONNECT = RetryPolicy(base_s=0.5, max_s=30.0)
_LOG_INTERVAL_S = 30.0
# Committing and leaving the group at shutdown: the client's close timeout and some.
_LEAVE_S = BOOTSTRAP_TIMEOUT_MS / 1000 + 10
# Rejoining the group at shutdown to commit again after the group rebalanced.
_REJOIN_S = 5.0


class _Listener(AsyncConsumerRebalanceListener):  # type: ignore[misc]
    """Awaited by kafka-python's IO loop, so that the revocation's commit is done (and its
    outcome known) before the group is joined again, while heartbeats go on."""

    def __init__(self, receiver: KafkaReceiver) -> None:
        self._receiver = receiver

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        sent = self._receiver._on_revoked(revoked)
        if sent is not None:
            try:
                await sent
            except Exception as exc:
                self._receiver._commit_failed(exc)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._receiver._on_assigned(assigned)


class KafkaReceiver:
    """Consumes `config.topics` in group `config.group_id` into `consumer`."""

    def __init__(
        self,
        config: KafkaConfig,
        consumer: TraceConsumer,
        telemetry: Telemetry,
        *,
        max_in_flight: int = 2_000,
        rng: random.Random | None = None,
    ) -> None:
        self._cfg = config
        self._next = consumer
        self._t = telemetry
        self._options = client_options(config)
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
        # Reconnects and polls after a failure; `backoff.ceiling` is 0 after a good poll.
        self.backoff = Retry(RECONNECT, rng or random.Random())
        # Shared with the consumer thread.
        self._done: deque[Token] = deque()
        self._intake = KafkaIntake(
            config.encoding, telemetry, self._log, self._dead_letters, self._delivered, self._done
        )
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
        self._lag = LagGauge(telemetry)
        self._held: Batch = []  # refused by a full stage
        self._hand_back_owed = False  # draining: open traces may hold our messages
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

    async def shutdown(self, deadline_s: float) -> None:
        """Stop fetching, hand back the open traces of our messages (`_hand_back`), let our
        other in-flight messages finish until `deadline_s`, then commit what finished and
        leave the group; those two get what is left of the deadline, and
        at least the client's own close time (`_LEAVE_S`), since a commit cut short costs a
        re-delivery of everything finished. What is not finished is re-delivered to the next
        owner. Idempotent; safe without `start`."""
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is None:
            return
        started = time.monotonic()
        self._draining.set()
        self._wake.set()
        await asyncio.to_thread(self._drained.wait, max(0.0, deadline_s))
        if self._in_flight > 0:
            log.warning(
                "kafka: %d deliveries still in flight at shutdown; they will be re-delivered",
                self._in_flight,
            )
        self._stop.set()
        remaining = deadline_s - (time.monotonic() - started)
        await asyncio.to_thread(thread.join, max(remaining, _LEAVE_S))
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
                        self._back_off()
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
                    self._back_off()
        finally:
            self._close()

    def _back_off(self) -> None:
        """Wait before the next attempt, but wake for shutdown (and then never spin faster
        than 20 Hz)."""
        delay = self.backoff.next_delay()
        assert delay is not None  # RECONNECT has neither an attempt limit nor a deadline
        if self._wake.wait(delay):
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
        try:
            polled = consumer.poll(
                timeout_ms=_POLL_TIMEOUT_MS, max_records=self._cfg.max_poll_records
            )
        except CorruptRecordError as exc:
            if not self._skip_unreadable(consumer, exc):
                raise
            polled = {}
        batch: Batch = []
        if polled and not self._draining.is_set():
            for tp, messages in polled.items():
                self._intake.take(messages, self._tracker(tp), batch)
        self._hand_over(batch)
        if self._draining.is_set() and self._hand_back_owed and not self._held:
            self._hand_back_owed = False
            self._hand_back()
        self._collect_done()
        now = time.monotonic()
        if now - self._last_commit >= _COMMIT_INTERVAL_S:
            self._commit(list(self._trackers.values()))
        if now - self._last_status >= _STATUS_INTERVAL_S:
            self._last_status = now
            self._refresh_status(consumer)
        if self._draining.is_set() and not self._held and self._in_flight == 0:
            self._drained.set()

    def _skip_unreadable(self, consumer: KafkaConsumer, exc: CorruptRecordError) -> bool:
        """A message kafka-python cannot read (a header key that is not UTF-8, a bad CRC):
        its every fetch fails the same way, so it is stepped over, counted
        (`records_rejected_total{reason="unreadable_message"}`) and logged, and the commit
        passes it; the messages before it were handed on already. kafka-python does not
        say where the message is: it is found in the traceback, in the fetcher frame that
        was unpacking it. False when it cannot be found (the poll error is retried)."""
        found = _unreadable_at(exc)
        if found is None or found[0] not in self._assigned:
            return False
        tp, first, end = found
        tracker = self._tracker(tp)
        skipped = range(max(first, tracker.read_to), end)
        self._t.records_rejected.labels(SOURCE, "unreadable_message").inc(len(skipped))
        self._log.log(
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
            tracker.add(offset, 0)
        consumer.seek(tp, end)
        return True

    def _tracker(self, tp: TopicPartition) -> PartitionTracker:
        tracker = self._trackers.get(tp)
        if tracker is None:
            tracker = PartitionTracker(tp.topic, tp.partition)
            tracker.skip = self._finished_before(tp)
            self._trackers[tp] = tracker
        return tracker

    def _finished_before(self, tp: TopicPartition) -> list[tuple[int, int]]:
        """What the partition's previous reader finished past its committed offset (its
        commit's metadata): read before the first message of a new assignment, so never
        evaluated twice. Unknown (the fetch failed): everything is read again."""
        if self._consumer is None:
            return []
        try:
            committed = self._consumer.committed(tp, metadata=True, timeout_ms=5_000)
        except Exception as exc:
            self._log.log(
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

    def _delivered(self, tracker: PartitionTracker, offset: int, ok: bool) -> None:
        """A delivery's `on_done` (any thread), for the unit registered at `offset`. Most
        are called in this thread, while the trace stage takes the delivery (nothing
        sampled): those finish at once, without the round trip through the deque that
        other threads' completions take."""
        if threading.get_ident() != self._thread_id:
            self._done.append((tracker, offset, ok, True))
            return
        self._settle(tracker, offset, ok, True)

    def _hand_over(self, batch: Batch) -> None:
        if not batch:
            return
        if self._held or not self._offer(batch):
            # The trace stage is full: hold these, pause, offer them again next step.
            self._held.extend(batch)
            return
        self._hand_back_owed = True

    def _offer(self, batch: Batch) -> bool:
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
        self._hand_back_owed = self._hand_back_owed or bool(held)

    def _owned(self, tracker: PartitionTracker) -> bool:
        return not tracker.revoked

    def _collect_done(self) -> None:
        done = self._done
        while done:
            token = done.popleft()
            if callable(token):
                token()
            else:
                self._settle(*token)

    def _settle(self, tracker: PartitionTracker, offset: int, ok: bool, counted: bool) -> None:
        """A completion, in the consumer thread: `counted` ones were in flight."""
        if counted:
            self._in_flight -= 1
        if not self._owned(tracker):
            return
        if ok:
            if counted:
                tracker.messages.pop(offset, None)
            tracker.finish(offset)
        elif counted and not (self._draining.is_set() or tracker.given_away):
            # Neither handed back nor cut by shutdown: it failed inside the monitor, and
            # would fail the same way when read again.
            self._intake.failed(tracker, offset)
        else:
            # An abandoned message is never finished: the commit stops before it and
            # the next owner reads it again. Nothing is left to wait for on it.
            tracker.messages.pop(offset, None)
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

    def _commit(self, trackers: list[PartitionTracker], *, wait: bool = True) -> Any:
        """Commit what is finished. `wait=False` from the rebalance listener: kafka-python
        runs listeners on its IO thread, where a blocking commit is refused; the commit is
        sent and its future returned, for the listener to await before the group is
        joined again (None: nothing to commit)."""
        self._last_commit = time.monotonic()
        targets = {
            TopicPartition(t.topic, t.partition): (t, target)
            for t in trackers
            if (target := t.commit_point()) is not None
        }
        if not targets or self._consumer is None:
            return None
        offsets = {
            tp: OffsetAndMetadata(offset, metadata, -1)
            for tp, (_, (offset, metadata)) in targets.items()
        }
        try:
            if not wait:
                return self._consumer.commit_async(offsets=offsets)
            self._consumer.commit(offsets=offsets)
        except Exception as exc:
            self._commit_failed(exc)
            return None
        log.debug(
            "kafka: committed %s",
            {f"{tp.topic}/{tp.partition}": m.offset for tp, m in offsets.items()},
        )
        for tracker, (offset, metadata) in targets.values():
            tracker.committed, tracker.committed_metadata = offset, metadata
        return None

    def _commit_failed(self, exc: BaseException) -> None:
        self._t.dropped.labels("kafka", "commit_failed").inc()
        self._log.log(
            "commit",
            logging.WARNING,
            "kafka: offset commit failed (records may be re-delivered): %s: %s",
            type(exc).__name__,
            exc,
        )

    def _commit_after_rejoin(self) -> None:
        """The commit at close was refused, most often because the group rebalanced
        meanwhile (another replica left or joined: a rolling restart, a scale-down) and
        our generation is stale. Rejoin without reading anything, and commit again what
        the new assignment gives back to us; what it gives to another member is read
        again there (at-least-once)."""
        consumer = self._consumer
        assert consumer is not None
        deadline = time.monotonic() + _REJOIN_S
        self._joined = False
        try:
            while not self._joined and time.monotonic() < deadline:
                consumer.pause(*consumer.assignment())
                # Fetched messages of a partition assigned anew are not handed on or
                # registered: nothing of theirs is committed, the next owner reads them.
                consumer.poll(timeout_ms=_POLL_TIMEOUT_MS, max_records=1)
        except Exception as exc:
            log.warning("kafka: rejoining the group to commit at shutdown failed: %s", exc)
            return
        if not self._joined:
            log.warning(
                "kafka: the group was not rejoined within %.0f s at shutdown; what finished "
                "since the last commit will be read again by the next owner",
                _REJOIN_S,
            )
            return
        log.info("kafka: rejoined the group at shutdown to commit again")
        self._commit(list(self._trackers.values()))

    def _refresh_status(self, consumer: KafkaConsumer) -> None:
        age = heartbeat_age(consumer)
        stale_after = 2 * self._cfg.heartbeat_interval_ms / 1000 + 1
        if not self._joined:
            self._status = (False, f"joining consumer group {self._cfg.group_id}")
        elif math.isfinite(age) and age > stale_after:
            self._status = (
                False,
                f"no heartbeat from the group coordinator for {age:.0f}s (brokers unreachable?)",
            )
        else:
            self._status = (True, f"consuming {len(consumer.assignment())} partitions")
        self._lag.update(consumer, self._assigned, self._trackers)

    # -- rebalance callbacks (consumer thread, inside poll) ---------------------------------

    def _on_revoked(self, revoked: set[TopicPartition]) -> Any:
        """Returns the commit sent for the revoked partitions (a kafka-python future), if
        any."""
        # Open traces are not released here: one released now would be evaluated cut
        # short. Their messages stay unfinished, so the commit below stops before them.
        # Whether they are abandoned waits for the assignment (`_on_assigned`): eager
        # rebalancing revokes every partition, and one given straight back keeps its read
        # position, so its open traces must stay.
        mine = [self._trackers[tp] for tp in revoked if tp in self._trackers]
        # Until the assignment says whether they come back, their open traces wait however
        # long the rejoin takes: released for idleness now, they would be evaluated cut.
        if mine:
            self._next.suspend(mine)
        # At close the in-flight messages already had their chance (shutdown drained them).
        deadline = time.monotonic() + (0 if self._stop.is_set() else _REVOKE_GRACE_S)
        # Messages waiting in open traces finish only when more spans come: the grace
        # (which blocks the client's heartbeats) is for the others. Asked again each
        # time: queued messages join open traces while it runs.
        while (
            mine
            and sum(t.outstanding for t in mine) > self._next.holds(mine)
            and time.monotonic() < deadline
        ):
            self._collect_done()
            time.sleep(0.005)
        self._collect_done()
        sent = self._commit(mine, wait=False)
        for tp in revoked:
            leaving = self._trackers.pop(tp, None)
            if leaving is not None:
                self._leaving[tp] = leaving
            self._assigned.discard(tp)
            self._lag.remove(tp)
        if revoked:
            log.info("kafka: partitions revoked: %s", _names(revoked))
        return sent

    def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        self._joined = True
        self._paused = False
        self._assigned |= assigned
        # A partition given straight back carries on with its tracker: the client kept
        # its read position, so its unfinished messages are not read again.
        back = [self._leaving.pop(tp) for tp in assigned & self._leaving.keys()]
        for tracker in back:
            self._trackers[TopicPartition(tracker.topic, tracker.partition)] = tracker
        if back:
            self._next.resume(back)
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
        for tracker in gone:
            tracker.given_away = True  # what fails now was abandoned, not failed
        self._next.abandon(gone)
        self._collect_done()  # the abandoned messages: never finished, no longer awaited
        for tracker in gone:
            tracker.revoked = True  # its late completions are ignored
        self._held = [(t, d) for t, d in self._held if self._owned(t)]

    def _hand_back(self) -> None:
        """Shutdown, like a revoke: the open traces made of our messages alone are handed
        back unevaluated (their messages stay uncommitted; the next owner reads them
        whole), never released cut. What else holds our messages open (a trace that also
        has spans from OTLP) is released, so that the drain does not wait for it. Partitions
        revoked and not assigned again yet are leaving with the rest."""
        self._next.abandon([*self._trackers.values(), *self._leaving.values()])
        self._next.flush()

    def _close(self) -> None:
        self._drained.set()
        if self._dead_letters is not None:
            # Dead letters acknowledged now can still be committed below.
            self._dead_letters.flush(timeout_s=5)
        self._collect_done()
        if self._consumer is not None:
            self._commit(list(self._trackers.values()))
            if any(t.commit_point() is not None for t in self._trackers.values()):
                self._commit_after_rejoin()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close(autocommit=False, timeout_ms=5_000)
            except Exception as exc:
                log.warning("kafka: consumer close failed: %s", exc)
        self._give_away()  # leaving the group revoked everything
        if self._dead_letters is not None:
            self._dead_letters.close()


def _unreadable_at(exc: BaseException) -> tuple[TopicPartition, int, int] | None:
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


def _names(partitions: set[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(partitions))
