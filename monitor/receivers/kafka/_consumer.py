"""The consumer loop: a consumer-group member that hands each message to the trace stage.

Threading: kafka-python is blocking and not thread-safe, so exactly one thread (the
"consumer thread") owns the `KafkaConsumer` and the dead-letter producer. It polls, turns
a poll's messages into deliveries (`_intake`: runs of one-record messages, every other
message on its own) and hands them to the trace stage in one `consume`, run on the event
loop, where the stage lives, while the thread waits for the answer (`_loop`). The trace
stage calls a delivery's `on_done` once everything built from it is finished, on the
loop; that appends a token to a deque this thread drains. Nothing here knows about
traces or sampling.

At-least-once: offsets are committed only up to the contiguous prefix of finished
messages (`_offsets`, `_commits`): at most once a second, on partition revocation (after
a short grace for in-flight messages) and at shutdown. The open traces of a partition
given away, and at shutdown of every partition, are handed back to the trace stage
unevaluated (`_rebalance`): their messages stay unfinished, so the next owner reads them
again whole. A crash re-delivers, it never skips; a run is re-delivered whole.

Backpressure: while more than `max_in_flight` deliveries are handed out and unfinished, or
the trace stage refused a poll's deliveries (the evaluation stage is full: they are held
and offered again), every assigned partition is paused (`pause()`); polling continues so
group membership is kept. Nothing is buffered beyond that bound.

Availability: the consumer is (re)created under the retry policy (`monitor/shared/retry.py`:
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

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import CorruptRecordError

from monitor.component import OriginConsumer
from monitor.config import KafkaConfig
from monitor.receivers.kafka._client import BOOTSTRAP_TIMEOUT_MS, client_options, construct
from monitor.receivers.kafka._commits import Commits
from monitor.receivers.kafka._dead_letter import DeadLetters
from monitor.receivers.kafka._intake import Batch, KafkaIntake, Token
from monitor.receivers.kafka._loop import StageThroughLoop
from monitor.receivers.kafka._offsets import PartitionTracker
from monitor.receivers.kafka._rebalance import Listener, Partitions, Revoking
from monitor.receivers.kafka._status import LagGauge, heartbeat_age
from monitor.receivers.kafka._unreadable import skip_unreadable
from monitor.shared.retry import Retry, RetryPolicy
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

_POLL_TIMEOUT_MS = 100
_STATUS_INTERVAL_S = 1.0
# Reconnecting and polling again after a failure: from 0.5 s, doubling, at most 30 s.
RECONNECT = RetryPolicy(base_s=0.5, max_s=30.0)
_LOG_INTERVAL_S = 30.0
# Committing and leaving the group at shutdown: the client's close timeout and some.
_LEAVE_S = BOOTSTRAP_TIMEOUT_MS / 1000 + 10


class KafkaReceiver:
    """Consumes `config.topics` in group `config.group_id` into `consumer`."""

    def __init__(
        self,
        config: KafkaConfig,
        consumer: OriginConsumer,
        telemetry: Telemetry,
        *,
        max_in_flight: int = 2_000,
        rng: random.Random | None = None,
    ) -> None:
        self._cfg = config
        self._next = StageThroughLoop(
            consumer, telemetry, answer_within_s=config.max_poll_interval_ms / 1000 / 2
        )
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
        # Shared with the consumer thread: completions, appended from the event loop (and
        # the dead-letter producer's thread).
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
        self._commits = Commits(telemetry, self._log)
        self._lag = LagGauge(telemetry)
        self._partitions = Partitions(
            self._next, self._commits, self._lag, self._log, self._collect_done
        )
        self._trackers = self._partitions.trackers
        self._held: Batch = []  # refused by a full stage
        self._hand_back_owed = False  # draining: open traces may hold our messages
        self._paused = False
        self._last_status = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- lifecycle (event loop) -----------------------------------------------------------

    async def start(self) -> None:
        if self._thread is not None:
            return
        self._next.loop = asyncio.get_running_loop()
        self._status = (False, "connecting to " + ",".join(self._cfg.bootstrap_servers))
        self._thread = threading.Thread(target=self._main, name="kafka-consumer", daemon=True)
        self._thread.start()

    async def shutdown(self, deadline_s: float) -> None:
        """Stop fetching, hand back the open traces of our messages (`Partitions.hand_back`),
        let our other in-flight messages finish until `deadline_s`, then commit what
        finished and leave the group; those two get what is left of the deadline, and at
        least the client's own close time (`_LEAVE_S`), since a commit cut short costs a
        re-delivery of everything finished. What is not finished is re-delivered to the
        next owner. Idempotent; safe without `start`."""
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
                    self._t.counter("dropped").labels("kafka", "poll_error").inc()
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
            consumer.subscribe(topics=list(self._cfg.topics), listener=Listener(self))
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
        self._partitions.joined = False
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
            if not skip_unreadable(
                consumer, exc, self._partitions.assigned, self._tracker, self._t, self._log
            ):
                raise
            polled = {}
        batch: Batch = []
        if polled and not self._draining.is_set():
            for tp, messages in polled.items():
                self._intake.take(messages, self._tracker(tp), batch)
        self._hand_over(batch)
        if self._draining.is_set() and self._hand_back_owed and not self._held:
            self._hand_back_owed = False
            self._partitions.hand_back()
        self._collect_done()
        now = time.monotonic()
        if self._commits.due(now):
            self._commits.commit(self._consumer, list(self._trackers.values()))
        if now - self._last_status >= _STATUS_INTERVAL_S:
            self._last_status = now
            self._refresh_status(consumer)
        if self._draining.is_set() and not self._held and self._in_flight == 0:
            self._drained.set()

    def _tracker(self, tp: TopicPartition) -> PartitionTracker:
        return self._partitions.tracker(tp, self._consumer)

    def _delivered(self, tracker: PartitionTracker, offset: int, ok: bool) -> None:
        """A delivery's `on_done` (on the event loop), for the unit registered at
        `offset`: settled when this thread next drains the deque."""
        self._done.append((tracker, offset, ok, True))

    def _hand_over(self, batch: Batch) -> None:
        if not batch:
            return
        if self._held or not self._offer(batch):
            # The trace stage is full: hold these, pause, offer them again next step.
            self._held.extend(batch)
            return
        self._hand_back_owed = True

    def _offer(self, batch: Batch) -> bool:
        """Hand `batch` to the trace stage (on the event loop, waiting for its answer);
        counted in flight first, since the stage may finish some of them before it
        returns."""
        self._in_flight += len(batch)
        if self._next.consume([d for _, d in batch]):
            return True
        self._in_flight -= len(batch)
        return False

    def _offer_held(self) -> None:
        if not self._held:
            return
        held = [(t, d) for t, d in self._held if not t.revoked]
        self._held = []
        if held and not self._offer(held):
            self._held = held
            return
        self._hand_back_owed = self._hand_back_owed or bool(held)

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
        if tracker.revoked:
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
        """Pause every assigned partition while the stage is full or too much is in
        flight, and resume them all once half of that finished. Whether fetching is paused
        is read from the client each time, never remembered beside it: kafka-python keeps a
        partition's pause across a rebalance that gives it straight back, so a flag reset
        by the assignment would leave that partition paused, unread, while the others go
        on."""
        paused = consumer.paused()
        if (
            self._draining.is_set()
            or self._held
            or self._in_flight >= self._max_in_flight
            or (paused and self._in_flight > self._max_in_flight // 2)
        ):
            unpaused = consumer.assignment() - paused
            if unpaused:
                consumer.pause(*unpaused)
            self._paused = True
            return
        if paused:
            consumer.resume(*paused)
        self._paused = False

    def _refresh_status(self, consumer: KafkaConsumer) -> None:
        age = heartbeat_age(consumer)
        stale_after = 2 * self._cfg.heartbeat_interval_ms / 1000 + 1
        if not self._partitions.joined:
            self._status = (False, f"joining consumer group {self._cfg.group_id}")
        elif math.isfinite(age) and age > stale_after:
            self._status = (
                False,
                f"no heartbeat from the group coordinator for {age:.0f}s (brokers unreachable?)",
            )
        else:
            self._status = (True, f"consuming {len(consumer.assignment())} partitions")
        self._lag.update(consumer, self._partitions.assigned, self._trackers)

    def _close(self) -> None:
        self._drained.set()
        if self._dead_letters is not None:
            # Dead letters acknowledged now can still be committed below.
            self._dead_letters.flush(timeout_s=5)
        self._collect_done()
        consumer = self._consumer
        if consumer is not None:
            self._commits.commit(consumer, list(self._trackers.values()))
            if any(t.commit_point() is not None for t in self._trackers.values()):
                self._partitions.joined = False
                self._commits.after_rejoin(
                    consumer, lambda: self._partitions.joined, lambda: list(self._trackers.values())
                )
        self._consumer = None
        if consumer is not None:
            try:
                consumer.close(autocommit=False, timeout_ms=5_000)
            except Exception as exc:
                log.warning("kafka: consumer close failed: %s", exc)
        self._partitions.give_away()  # leaving the group revoked everything
        if self._dead_letters is not None:
            self._dead_letters.close()

    # -- rebalance callbacks (consumer thread, inside poll) ---------------------------------

    def _on_revoked(self, revoked: set[TopicPartition]) -> Revoking:
        """Waits between looks at the messages in flight, then ends with the commit sent
        for the revoked partitions (a kafka-python future), if any (`Partitions.revoked`)."""
        return self._partitions.revoked(revoked, self._consumer, closing=self._stop.is_set())

    def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        self._partitions.assigned_now(assigned)

    def _commit_failed(self, exc: BaseException) -> None:
        self._commits.failed(exc)
