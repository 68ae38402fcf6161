"""Which senders' whole traces wait for late spans.

A whole trace waits `late_spans_wait_s` for spans that end after its root, unless its
sender has shown `QUIET_AFTER` (`_in_a_row`) whole traces in a row without such a span. A
sender is a service together with who sent the trace's root as the receiver saw it: the
client address of the connection, and beneath it the `service.instance.id` the spans
claim. The address comes first because the receiver observed it; the instance id only
tells apart the senders behind one address (a Collector, a gateway), never joins senders
of different addresses, so a sender that claims another replica's id makes only its own
address's traces of that id wait, not the replica's. One replica whose spans come late (a
skewed clock, an exporter that flushes children after the root) thus makes its own traces
wait, and the other replicas of the service are released as soon as they are whole.
Where no address is known (Kafka, which does not see the producer), the instance id alone
tells senders apart.
"""

from __future__ import annotations

from monitor.spans import Span

INSTANCE_ID = "service.instance.id"
_MAX_CHARS = 256

Sender = tuple[str, str, str]  # (service, client address, instance id); "" where not known


def sender_of(span: Span, address: str | None) -> Sender:
    """Who sent `span`: its service, the client's address the receiver saw, and the
    instance id its resource claims."""
    instance = span.resource.get(INSTANCE_ID)
    claimed = instance[:_MAX_CHARS] if isinstance(instance, str) else ""
    return span.service, (address or "")[:_MAX_CHARS], claimed
