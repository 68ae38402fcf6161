"""Kafka receiver: a consumer-group member that feeds records into the evaluation stage.

Threading: kafka-python is blocking and not thread-safe, so exactly one thread (the
"consumer thread") owns the `KafkaConsumer` and the dead-letter `KafkaProducer`. It polls,
decodes (`kafka_decode`), and hands records to the event loop in batches
(`call_soon_threadsafe` onto an inbox drained by one feeder task that awaits
`EvaluationStage.put_many` per poll batch). Records no evaluator samples never make that
trip: the consumer thread asks `stage.skips`, counts them with `stage.count_skipped` and
treats them as finished at once. For the others the stage calls `on_done` from the loop
when the record is evaluated or deliberately skipped (over budget, say); that appends a
token to a deque the consumer thread drains.

At-least-once: offsets are committed per partition only up to the contiguous prefix of
messages whose records have all finished (`kafka_offsets.PartitionTracker`), at most once a
second, on partition revocation (after a short grace for in-flight records) and at
shutdown after our in-flight records drained. A crash re-delivers, it never skips.

Backpressure: when more than `max_in_flight` records are handed out and unfinished, every
assigned partition is paused (`pause()`); polling continues so group membership is kept,
and partitions resume below half the limit. Nothing is buffered beyond that bound.

Bad input: a message that does not decode, or holds a record that does not parse, is
counted in `records_rejected_total{receiver="kafka",reason}` and, when
`dead_letter_topic` is set, produced there with its original key, value and headers plus
`rag-monitor-error` / `rag-monitor-error-reason` / `rag-monitor-source` headers. Parsed
records of the same message are still evaluated. The partition never stalls on it.

Availability: the consumer is (re)created with exponential backoff while the brokers are
unreachable; `ready()` says why it is not ready (bootstrap failing, joining the group, no
heartbeat from the coordinator). `kafka_lag{topic,partition}` is the fetch high watermark
minus the end of the finished prefix (messages not yet fully evaluated).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import random
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from kafka import (
    ConsumerRebalanceListener,
    KafkaConsumer,
    KafkaProducer,
    OffsetAndMetadata,
    TopicPartition,
)
from kafka.consumer.fetcher import ConsumerRecord
from kafka.net.compat import KafkaNetClient

from monitor.config import ConfigError, TraceAssembly
from monitor.config import KafkaReceiver as KafkaConfig
from monitor.processors.evaluate import EvaluationStage
from monitor.receivers.kafka_decode import Rejection, decode_message
from monitor.receivers.kafka_offsets import PartitionTracker
from monitor.receivers.kafka_otlp import KafkaTraces, TraceHandle
from monitor.receivers.otlp.assembler import FinishedTrace
from monitor.records import RagRecord
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

SOURCE = "kafka"
_POLL_TIMEOUT_MS = 100
_COMMIT_INTERVAL_S = 1.0
_STATUS_INTERVAL_S = 1.0
_REVOKE_GRACE_S = 3.0
_BACKOFF_INITIAL_S = 0.5
_BACKOFF_MAX_S = 30.0
_BOOTSTRAP_TIMEOUT_MS = 5_000
_LOG_INTERVAL_S = 30.0
_MAX_HEADERS = 16
_MAX_META_CHARS = 256

# Token kinds travelling from the loop / producer thread back to the consumer thread:
# (tracker, offset, kind) for a JSON record or a dead-lettered message, and
# (trace handle, 0, kind) for a record extracted from an assembled trace.
_RECORD_DONE = 0
_RECORD_ABANDONED = 1
_DEAD_LETTER_DONE = 2
_TRACE_DONE = 3
_TRACE_ABANDONED = 4
_ABANDONED = {_RECORD_DONE: _RECORD_ABANDONED, _TRACE_DONE: _TRACE_ABANDONED}

_Token = tuple[Any, int, int]
_Item = tuple[RagRecord, _Token]


@dataclass
class _Backoff:
    initial: float = _BACKOFF_INITIAL_S
    maximum: float = _BACKOFF_MAX_S
    _current: float = field(default=0.0, init=False)

    def next(self) -> float:
        self._current = min(self.maximum, max(self.initial, self._current * 2))
        return self._current * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self._current = 0.0


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, receiver: KafkaReceiver) -> None:
        self._receiver = receiver

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._receiver._on_revoked(revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._receiver._on_assigned(assigned)


def client_options(cfg: KafkaConfig) -> dict[str, Any]:
    """Connection and security options shared by the consumer and the producer."""
    options: dict[str, Any] = {
        "bootstrap_servers": list(cfg.bootstrap_servers),
        "security_protocol": cfg.security_protocol,
        "client_id": f"rag-monitor-{socket.gethostname()}",
        "bootstrap_timeout_ms": _BOOTSTRAP_TIMEOUT_MS,
        "reconnect_backoff_max_ms": 5_000,
    }
    if cfg.sasl_mechanism:
        options["sasl_mechanism"] = cfg.sasl_mechanism
        options["sasl_plain_username"] = cfg.sasl_username
        if cfg.sasl_password_env:
            password = os.environ.get(cfg.sasl_password_env)
            if password is None:
                raise ConfigError(
                    [
                        "receivers.kafka.sasl_password_env: environment variable "
                        f"{cfg.sasl_password_env} is not set"
                    ]
                )
            options["sasl_plain_password"] = password
    for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        value = getattr(cfg, key)
        if value:
            options[key] = value
    return options


T = TypeVar("T")


def _construct(kind: Callable[..., T], **options: Any) -> T:
    """Build a kafka-python consumer/producer; if its constructor fails (brokers
    unreachable), close the network client it already started. kafka-python 3.0 leaves
    that client's IO thread running otherwise, one more per retry of a long outage."""
    made: list[KafkaNetClient] = []

    def client(**kwargs: Any) -> KafkaNetClient:
        made.append(KafkaNetClient(**kwargs))
        return made[-1]

    try:
        return kind(kafka_client=client, **options)
    except BaseException:
        for instance in made:
            with contextlib.suppress(Exception):
                instance.close()
        raise


class KafkaReceiver:
    """Consumes `config.topics` in group `config.group_id` into `stage`."""

    def __init__(
        self,
        config: KafkaConfig,
        stage: EvaluationStage,
        telemetry: Telemetry,
        *,
        drain_timeout_s: float = 20.0,
        max_in_flight: int = 2_000,
        assembly: TraceAssembly | None = None,
        route_attribute: str = "http.route",
    ) -> None:
        self._cfg = config
        self._stage = stage
        self._t = telemetry
        self._options = client_options(config)
        self._drain_timeout_s = drain_timeout_s
        self._max_in_flight = max(max_in_flight, 1)
        self._log = RateLimitedLog(log, _LOG_INTERVAL_S)
        assembly = assembly or TraceAssembly()
        self._traces = KafkaTraces(
            idle_timeout_s=assembly.idle_timeout_s,
            max_open_traces=assembly.max_open_traces,
            route_attribute=route_attribute,
            telemetry=telemetry,
            warn=self._log,
        )
        self._last_expire = 0.0
        self._traces_drained = False
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
        self._producer: KafkaProducer | None = None
        self._trackers: dict[TopicPartition, PartitionTracker] = {}
        self._skipped: list[RagRecord] = []  # unsampled records of this poll, to count
        self._paused = False
        self._joined = False
        self._last_commit = 0.0
        self._last_status = 0.0
        # Owned by the event loop.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox: asyncio.Queue[list[_Item]] | None = None
        self._feeder: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- lifecycle (event loop) -----------------------------------------------------------

    async def start(self) -> None:
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._inbox = asyncio.Queue()
        self._feeder = asyncio.create_task(self._feed(), name="kafka-feeder")
        self._status = (False, "connecting to " + ",".join(self._cfg.bootstrap_servers))
        self._thread = threading.Thread(target=self._main, name="kafka-consumer", daemon=True)
        self._thread.start()

    async def shutdown(self) -> None:
        """Stop fetching, let our in-flight records finish (bounded), commit, leave the group."""
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
                "kafka: %d records still in flight at shutdown; they will be re-delivered",
                self._in_flight,
            )
        self._stop.set()
        await asyncio.to_thread(thread.join, _BOOTSTRAP_TIMEOUT_MS / 1000 + 10)
        if self._feeder is not None:
            self._feeder.cancel()
            await asyncio.gather(self._feeder, return_exceptions=True)
        self._status = (False, "stopped")

    def ready(self) -> tuple[bool, str]:
        return self._status

    @property
    def in_flight(self) -> int:
        """Records handed to the pipeline and not finished yet."""
        return self._in_flight

    @property
    def paused(self) -> bool:
        """Whether fetching is paused for backpressure (or shutdown)."""
        return self._paused

    # -- event loop side of the hand-off --------------------------------------------------

    async def _feed(self) -> None:
        assert self._inbox is not None
        done = self._done
        while True:
            batch = await self._inbox.get()
            taken = await self._stage.put_many(
                [(record, partial(done.append, token)) for record, token in batch], SOURCE
            )
            if taken < len(batch):
                # The stage stopped accepting: these records are not committed and will
                # be re-delivered to whoever owns the partition next.
                self._log.log(
                    "feed",
                    logging.WARNING,
                    "kafka: stage stopped accepting; %d records left for re-delivery",
                    len(batch) - taken,
                )
                self._t.dropped.labels("kafka", "shutting_down").inc(len(batch) - taken)
                for _, (owner, offset, kind) in batch[taken:]:
                    done.append((owner, offset, _ABANDONED[kind]))

    # -- consumer thread --------------------------------------------------------------------

    def _main(self) -> None:
        backoff = _Backoff()
        try:
            while not self._stop.is_set():
                if self._consumer is None:
                    if self._draining.is_set():
                        break  # nothing was consumed, nothing to drain
                    if not self._connect():
                        self._sleep(backoff.next())
                        continue
                    backoff.reset()
                try:
                    self._step()
                except Exception as exc:
                    self._t.dropped.labels("kafka", "poll_error").inc()
                    self._log.log(
                        "poll",
                        logging.WARNING,
                        "kafka: poll failed, retrying: %s: %s",
                        type(exc).__name__,
                        exc,
                    )
                    self._sleep(backoff.next())
        finally:
            self._close()

    def _sleep(self, delay_s: float) -> None:
        """Back off, but wake for shutdown (and then never spin faster than 20 Hz)."""
        if self._wake.wait(delay_s):
            self._stop.wait(0.05)

    def _connect(self) -> bool:
        try:
            consumer = _construct(
                KafkaConsumer,
                group_id=self._cfg.group_id,
                enable_auto_commit=False,
                auto_offset_reset=self._cfg.auto_offset_reset,
                session_timeout_ms=self._cfg.session_timeout_ms,
                heartbeat_interval_ms=self._cfg.heartbeat_interval_ms,
                max_poll_interval_ms=self._cfg.max_poll_interval_ms,
                max_poll_records=self._cfg.max_poll_records,
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
        self._backpressure(consumer)
        polled = consumer.poll(timeout_ms=_POLL_TIMEOUT_MS, max_records=self._cfg.max_poll_records)
        batch: list[_Item] = []
        if polled and not self._draining.is_set():
            for tp, messages in polled.items():
                tracker = self._tracker(tp)
                for message in messages:
                    self._handle(message, tracker, batch)
        now = time.monotonic()
        if self._draining.is_set() and not self._traces_drained:
            self._traces_drained = True
            self._release(self._traces.drain(), batch)
        elif now - self._last_expire >= self._traces.expire_every_s:
            self._last_expire = now
            self._release(self._traces.expire(), batch)
        self._handoff(batch)
        self._stage.count_skipped(self._skipped, SOURCE)
        self._skipped.clear()
        self._collect_done()
        if now - self._last_commit >= _COMMIT_INTERVAL_S:
            self._commit(list(self._trackers.values()))
        if now - self._last_status >= _STATUS_INTERVAL_S:
            self._last_status = now
            self._refresh_status(consumer)
        if self._draining.is_set() and self._traces_drained and self._in_flight == 0:
            self._drained.set()

    def _tracker(self, tp: TopicPartition) -> PartitionTracker:
        tracker = self._trackers.get(tp)
        if tracker is None:
            tracker = PartitionTracker(tp.topic, tp.partition)
            self._trackers[tp] = tracker
        return tracker

    def _handoff(self, batch: list[_Item]) -> None:
        if not batch:
            return
        self._in_flight += len(batch)
        assert self._loop is not None and self._inbox is not None
        self._loop.call_soon_threadsafe(self._inbox.put_nowait, batch)

    def _release(self, finished: list[FinishedTrace], batch: list[_Item]) -> None:
        if not finished:
            return
        released = self._traces.release(finished)
        batch.extend((record, (handle, 0, _TRACE_DONE)) for record, handle in released.records)
        for tracker, offset in released.paid:
            self._finish(tracker, offset)

    def _handle(
        self, message: ConsumerRecord, tracker: PartitionTracker, batch: list[_Item]
    ) -> None:
        meta = _metadata(message)
        decoded = decode_message(message.value, self._cfg.encoding, meta)
        problems = decoded.problems
        dead_letter = bool(problems) and self._cfg.dead_letter_topic is not None
        owed = 1 if dead_letter else 0
        if decoded.spans:
            units, finished = self._traces.add(decoded.spans, tracker, message.offset, meta)
            tracker.add(message.offset, units + owed)
            self._release(finished, batch)
        else:
            # Records no evaluator samples are finished here, in this thread: they owe
            # nothing, so the message can be committed without waiting on the loop.
            token = (tracker, message.offset, _RECORD_DONE)
            units = 0
            for record in decoded.records:
                if self._stage.skips(record):
                    self._skipped.append(record)
                else:
                    batch.append((record, token))
                    units += 1
            tracker.add(message.offset, units + owed)
        if problems:
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
            if dead_letter:
                self._dead_letter(message, problems, tracker)

    def _dead_letter(
        self, message: ConsumerRecord, problems: list[Rejection], tracker: PartitionTracker
    ) -> None:
        token: _Token = (tracker, message.offset, _DEAD_LETTER_DONE)
        topic = self._cfg.dead_letter_topic
        assert topic is not None
        headers = list(message.headers or [])
        headers.append(("rag-monitor-error-reason", problems[0].reason.encode()))
        headers.append(("rag-monitor-error", "; ".join(p.detail for p in problems)[:4096].encode()))
        headers.append(
            (
                "rag-monitor-source",
                f"{message.topic}/{message.partition}/{message.offset}".encode(),
            )
        )
        try:
            if self._producer is None:
                # Bounded waits: a missing dead-letter topic must not hold the thread.
                self._producer = _construct(
                    KafkaProducer,
                    linger_ms=20,
                    max_block_ms=5_000,
                    request_timeout_ms=10_000,
                    delivery_timeout_ms=20_000,
                    **self._options,
                )
            future = self._producer.send(
                topic, value=message.value, key=message.key, headers=headers
            )
        except Exception as exc:
            self._dead_letter_failed(token, exc)
            return
        future.add_callback(lambda _meta: self._done.append(token))
        future.add_errback(lambda exc: self._dead_letter_failed(token, exc))

    def _dead_letter_failed(self, token: _Token, exc: BaseException) -> None:
        # Never stall the partition on the dead-letter topic: count, log, move on.
        self._t.dropped.labels("kafka_dead_letter", "send_error").inc()
        self._log.log(
            "dead_letter",
            logging.ERROR,
            "kafka: cannot write to dead-letter topic %s: %s",
            self._cfg.dead_letter_topic,
            exc,
        )
        self._done.append(token)

    def _collect_done(self) -> None:
        done = self._done
        while done:
            owner, offset, kind = done.popleft()
            if kind != _DEAD_LETTER_DONE:
                self._in_flight -= 1
            if kind == _RECORD_DONE or kind == _DEAD_LETTER_DONE:
                self._finish(owner, offset)
            elif kind == _TRACE_DONE:
                handle: TraceHandle = owner
                handle.remaining -= 1
                if handle.remaining == 0:
                    for tracker, message_offset in handle.contributors:
                        self._finish(tracker, message_offset)

    def _finish(self, tracker: PartitionTracker, offset: int) -> None:
        """Count a finished unit, unless the partition was revoked since it was handed out."""
        if self._trackers.get(TopicPartition(tracker.topic, tracker.partition)) is tracker:
            tracker.finish(offset)

    def _backpressure(self, consumer: KafkaConsumer) -> None:
        if self._draining.is_set() or self._in_flight >= self._max_in_flight:
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
        for tp in assigned:
            high = consumer.highwater(tp)
            if high is None:
                continue
            tracker = self._trackers.get(tp)
            base = tracker.finished_through if tracker is not None else None
            if base is None:
                try:
                    base = consumer.position(tp, timeout_ms=50)
                except Exception:
                    continue
            if base is not None:
                self._t.kafka_lag.labels(tp.topic, str(tp.partition)).set(max(0, high - base))

    # -- rebalance callbacks (consumer thread, inside poll) ---------------------------------

    def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        # Eager rebalancing revokes every partition: release the open traces now, so their
        # messages can be committed (a trace cut short is evaluated on what it has).
        batch: list[_Item] = []
        self._release(self._traces.drain(), batch)
        self._handoff(batch)
        mine = [self._trackers[tp] for tp in revoked if tp in self._trackers]
        # At close the in-flight records already had their chance (shutdown drained them).
        deadline = time.monotonic() + (0 if self._stop.is_set() else _REVOKE_GRACE_S)
        while any(t.outstanding for t in mine) and time.monotonic() < deadline:
            self._collect_done()
            time.sleep(0.005)
        self._collect_done()
        self._commit(mine, wait=False)
        for tp in revoked:
            self._trackers.pop(tp, None)
            try:
                self._t.kafka_lag.remove(tp.topic, str(tp.partition))
            except KeyError:
                pass
        if revoked:
            log.info("kafka: partitions revoked: %s", _names(revoked))

    def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        self._joined = True
        self._paused = False
        log.info("kafka: partitions assigned: %s", _names(assigned) or "none")

    def _close(self) -> None:
        self._drained.set()
        if self._producer is not None:
            # Dead letters acknowledged now can still be committed below.
            with contextlib.suppress(Exception):
                self._producer.flush(timeout=5)
        self._collect_done()
        if self._consumer is not None:
            self._commit(list(self._trackers.values()))
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close(autocommit=False, timeout_ms=5_000)
            except Exception as exc:
                log.warning("kafka: consumer close failed: %s", exc)
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=5)
            except Exception as exc:
                log.warning("kafka: dead-letter producer close failed: %s", exc)


def _names(partitions: set[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(partitions))


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")[:_MAX_META_CHARS]


def _metadata(message: ConsumerRecord) -> dict[str, str]:
    meta = {
        "kafka.topic": message.topic,
        "kafka.partition": str(message.partition),
        "kafka.offset": str(message.offset),
    }
    if message.key is not None:
        meta["kafka.key"] = _text(message.key)
    for name, value in (message.headers or [])[:_MAX_HEADERS]:
        meta[f"kafka.header.{name}"] = _text(value) if value is not None else ""
    return meta
