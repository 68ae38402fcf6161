"""Which senders' whole traces wait for late spans.

A whole trace waits `late_spans_wait_s` for spans that end after its root, unless its
sender has shown `QUIET_AFTER` whole traces in a row without such a span. A sender is a
service together with who sent the trace's root: its `service.instance.id`, else the
client address the receiver saw. One replica whose spans come late (a skewed clock, an
exporter that flushes children after the root) thus makes its own traces wait, and the
other replicas of the service are released as soon as they are whole.
"""

from __future__ import annotations

from collections import OrderedDict

from monitor.spans import Span

# Whole traces a sender shows in a row without a late span before its traces stop waiting.
QUIET_AFTER = 5
INSTANCE_ID = "service.instance.id"

Sender = tuple[str, str]  # (service, instance id or client address; "" when neither)


def sender_of(span: Span, address: str | None) -> Sender:
    """Who sent `span`: its service, and its instance id or else the client's address."""
    instance = span.resource.get(INSTANCE_ID)
    who = instance if isinstance(instance, str) and instance else (address or "")
    return span.service, who[:256]


class Punctuality:
    """Senders → whole traces in a row that waited and had no late span (bounded: the
    least recently seen senders are forgotten first, and wait again)."""

    __slots__ = ("_in_a_row", "_max")

    def __init__(self, max_senders: int) -> None:
        self._in_a_row: OrderedDict[Sender, int] = OrderedDict()
        self._max = max(1, max_senders)

    def punctual(self, sender: Sender) -> bool:
        return self._in_a_row.get(sender, 0) >= QUIET_AFTER

    def on_time(self, sender: Sender) -> None:
        """A whole trace of `sender` waited and no span of it came late."""
        self._in_a_row[sender] = self._in_a_row.pop(sender, 0) + 1
        while len(self._in_a_row) > self._max:
            self._in_a_row.popitem(last=False)

    def late(self, sender: Sender) -> None:
        """A span of `sender`'s trace ended after its root, or missed its record."""
        self._in_a_row.pop(sender, None)
