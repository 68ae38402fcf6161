"""The OTLP log records the receivers take, as the shipped conventions declare them
(`log_events`, `log_lines`, `output_events`): the spans layer reads these sets and knows no
framework of its own."""

from __future__ import annotations

from types import MappingProxyType

from monitor.conventions._shipped import SHIPPED

# Log lines with no event name, by how their body starts → the event each becomes.
LOG_LINE_EVENTS = MappingProxyType(
    {start: event for c in SHIPPED for start, event in c.log_lines.items()}
)
# Every event a log record may be taken as: by its own name, or by its line's start.
LOG_EVENTS = frozenset({*(e for c in SHIPPED for e in c.log_events), *LOG_LINE_EVENTS.values()})
# The log events that carry a model call's output.
OUTPUT_EVENTS = frozenset(e for c in SHIPPED for e in c.output_events)
