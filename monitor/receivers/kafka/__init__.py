"""The Kafka receiver: a consumer-group member handing each message to the trace stage.

Split by job: `_consumer` (the consumer thread's loop, hand-over and backpressure),
`_loop` (the trace stage reached through the event loop), `_intake` (a poll's messages →
deliveries), `_commits` (what is committed, and where a new assignment starts),
`_offsets` (per-partition at-least-once bookkeeping), `_rebalance` (partitions revoked,
assigned, given away), `_unreadable` (messages kafka-python cannot read), `_messages`
(message bytes → records or spans), `_dead_letter` (rejected messages to the dead-letter
topic), `_status` (readiness and lag) and `_client` (kafka-python options and
construction). See `deploy/kafka.md` for operations.
"""

from monitor.receivers.kafka._client import client_options
from monitor.receivers.kafka._consumer import KafkaReceiver

__all__ = ["KafkaReceiver", "client_options"]
