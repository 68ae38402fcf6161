"""GenAI log events, which arrive as event spans, folded into the span they belong to."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from monitor.spans import GENAI_EVENTS, LOG_EVENT_KEY, Span, SpanEvent

OPERATION_DETAILS = "gen_ai.client.inference.operation.details"


def join_log_events(spans: Sequence[Span]) -> list[Span]:
    """Fold the event spans made from OTLP GenAI log events (`monitor.spans.LOG_EVENT_KEY`)
    into the span they belong to: their events join its events, in time order, and a
    `gen_ai.client.inference.operation.details` event's attributes (the call's input and
    output messages) fill the ones the span lacks. Event spans whose span never arrived
    are left out."""
    events = [s for s in spans if s.name in GENAI_EVENTS and s.attribute(LOG_EVENT_KEY)]
    if not events:
        return list(spans)
    own = [s for s in spans if not (s.name in GENAI_EVENTS and s.attribute(LOG_EVENT_KEY))]
    by_id = {s.span_id: s for s in own}
    joined: dict[str, list[SpanEvent]] = {}
    for event_span in events:
        if event_span.parent_span_id in by_id:
            joined.setdefault(event_span.parent_span_id, []).extend(event_span.events)
    out = []
    for span in own:
        extra = joined.get(span.span_id)
        if not extra:
            out.append(span)
            continue
        attributes = dict(span.attributes)
        for event in extra:
            if event.name == OPERATION_DETAILS:
                for key, value in event.attributes.items():
                    attributes.setdefault(key, value)
        out.append(
            Span(
                span.trace_id,
                span.span_id,
                span.parent_span_id,
                span.name,
                span.start_unix_nano,
                span.end_unix_nano,
                attributes=attributes,
                events=sorted([*span.events, *extra], key=attrgetter("time_unix_nano")),
                error=span.error,
                service=span.service,
                parent_is_remote=span.parent_is_remote,
                resource=span.resource,
            )
        )
    return out
