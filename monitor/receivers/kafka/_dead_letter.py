"""Dead letters: rejected messages produced to `receivers.kafka.dead_letter_topic`.

A message that does not decode, holds a record that does not parse, or failed inside the
monitor is produced there with its original key, value and headers plus
`rag-monitor-error-reason` (a closed-set reason), `rag-monitor-error` (the details) and
`rag-monitor-source` (`topic/partition/offset`) headers, whatever its size up to
`receivers.kafka.max_message_bytes` (the producer's request limit follows it). The source
partition never
waits on the dead-letter topic: a send that fails is counted
(`dropped_total{stage="kafka_dead_letter",reason="send_error"}`), logged, and the message
is finished anyway.

Used only by the consumer thread; send callbacks run on kafka-python's IO thread.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from kafka import KafkaProducer
from kafka.consumer.fetcher import ConsumerRecord

from monitor.receivers.kafka._client import construct
from monitor.receivers.kafka._messages import Rejection
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)
_MAX_ERROR_BYTES = 4096
# Room for the batch framing, the original headers and ours around the largest value.
_REQUEST_OVERHEAD_BYTES = 1024 * 1024


class DeadLetters:
    def __init__(
        self,
        topic: str,
        options: dict[str, Any],
        telemetry: Telemetry,
        warn: RateLimitedLog,
        *,
        max_message_bytes: int,
    ) -> None:
        self._topic = topic
        request = max_message_bytes + _REQUEST_OVERHEAD_BYTES
        # The client's default 1 MiB would refuse messages the broker took from their
        # producer: the request holds the largest message the consumer reads.
        self._options = {**options, "max_request_size": request}
        self._t = telemetry
        self._warn = warn
        self._producer: KafkaProducer | None = None

    def send(
        self, message: ConsumerRecord, problems: list[Rejection], done: Callable[[], None]
    ) -> None:
        """Produce `message` to the dead-letter topic; `done` is called once, when the
        broker acknowledged it or the send failed (counted)."""
        headers = list(message.headers or [])
        headers.append(("rag-monitor-error-reason", problems[0].reason.encode()))
        detail = "; ".join(p.detail for p in problems)
        headers.append(("rag-monitor-error", detail.encode()[:_MAX_ERROR_BYTES]))
        source = f"{message.topic}/{message.partition}/{message.offset}"
        headers.append(("rag-monitor-source", source.encode()))
        try:
            if self._producer is None:
                # Bounded waits: a missing dead-letter topic must not hold the thread.
                self._producer = construct(
                    KafkaProducer,
                    linger_ms=20,
                    max_block_ms=5_000,
                    request_timeout_ms=10_000,
                    delivery_timeout_ms=20_000,
                    **self._options,
                )
            future = self._producer.send(
                self._topic, value=message.value, key=message.key, headers=headers
            )
        except Exception as exc:
            self._failed(exc, done)
            return
        future.add_callback(lambda _meta: done())
        future.add_errback(lambda exc: self._failed(exc, done))

    def _failed(self, exc: BaseException, done: Callable[[], None]) -> None:
        self._t.counter("dropped").labels("kafka_dead_letter", "send_error").inc()
        self._warn.log(
            "dead_letter",
            logging.ERROR,
            "kafka: cannot write to dead-letter topic %s: %s",
            self._topic,
            exc,
        )
        done()

    def flush(self, timeout_s: float) -> None:
        """Wait for sends in flight (their messages can then be committed)."""
        if self._producer is not None:
            with contextlib.suppress(Exception):
                self._producer.flush(timeout=timeout_s)

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=5)
            except Exception as exc:
                log.warning("kafka: dead-letter producer close failed: %s", exc)
