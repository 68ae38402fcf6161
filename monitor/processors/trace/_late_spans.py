"""Which senders' whole traces wait for late spans.

A whole trace waits `late_spans_wait_s` for spans that end after its root, unless its
sender has shown `QUIET_AFTER` (`_in_a_row`) whole traces in a row without such a span. A sender is a
service together with who sent the trace's root: its `service.instance.id`, else the
client address the receiver saw. One replica whose spans come late (a skewed clock, an
exporter that flushes children after the root) thus makes its own traces wait, and the
other replicas of the service are released as soon as they are whole.
"""

from __future__ import annotations

from monitor.spans import Span

INSTANCE_ID = "service.instance.id"

Sender = tuple[str, str]  # (service, instance id or client address; "" when neither)


def sender_of(span: Span, address: str | None) -> Sender:
    """Who sent `span`: its service, and its instance id or else the client's address."""
    instance = span.resource.get(INSTANCE_ID)
    who = instance if isinstance(instance, str) and instance else (address or "")
    return span.service, who[:256]
