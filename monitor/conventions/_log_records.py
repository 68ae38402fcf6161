"""The OTLP log records the receivers take, as the conventions declare them (`log_events`,
`log_lines`, `output_events`): the spans layer reads these sets and knows no framework of
its own. A user's conventions add the events they name (`monitor/extraction/_table.py`)."""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType

from monitor.conventions._entry import Convention
from monitor.conventions._shipped import SHIPPED
from monitor.conventions._verdicts import VERDICT_EVENTS


def log_events_of(conventions: Iterable[Convention]) -> frozenset[str]:
    """Every event a log record may be taken as under `conventions`: by its own name, or
    by its line's start."""
    return frozenset(event for c in conventions for event in (*c.log_events, *c.log_lines.values()))


# Log lines with no event name, by how their body starts → the event each becomes.
LOG_LINE_EVENTS = MappingProxyType(
    {start: event for c in SHIPPED for start, event in c.log_lines.items()}
)
# The events the shipped conventions take log records as, and those carrying the app's
# own verdicts (`_verdicts.py`).
LOG_EVENTS = log_events_of(SHIPPED) | VERDICT_EVENTS
# The log events that carry a model call's output.
OUTPUT_EVENTS = frozenset(e for c in SHIPPED for e in c.output_events)
