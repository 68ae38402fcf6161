"""Log events (GenAI's, content log lines), which arrive as event spans, folded into the
span they belong to; and which model calls may still be waiting for theirs. Which events
carry a call's output, which hold a call's content as the span's own attributes, and which
conventions send content as log records: the conventions table."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from monitor.conventions import INDEXED, MODEL, SHIPPED
from monitor.extraction._table import current
from monitor.spans import LOG_EVENT_KEY, Span, SpanEvent

TIME = attrgetter("time_unix_nano")
# The kind attributes, and their values that mean a model call, of the conventions whose
# calls may send their content as log records.
_LOGGED_CALLS = tuple(
    (kind.attribute, frozenset(value for value, role in kind.roles.items() if role == MODEL))
    for convention in SHIPPED
    if convention.logged
    for kind in convention.kinds
)
# The events that carry a model call's output: once one has come, the call's content is in.
_OUTPUT_EVENTS = frozenset(
    {
        *(s.event for c in SHIPPED for s in c.model_output if s.event is not None),
        *(event for c in SHIPPED for event in c.detail_events),
    }
)
# Where a model call's output travels when it is on the span itself, in each convention
# (the conventions table's `model_output`, and the request output frameworks write on any
# span): single attributes, so that an unbuilt span is asked for a few keys only.
_OUTPUT_KEYS = tuple(
    dict.fromkeys(
        key
        for convention in SHIPPED
        for source in (
            *convention.model_output,
            *(s for s in convention.request_output if s.undeclared),
        )
        if "{" not in source.key and source.event is None
        for key in (
            (f"{source.key}.0.content", f"{source.key}.0.message.role")
            if source.encoding == INDEXED
            else (source.key,)
        )
    )
)


def awaits_log_events(span: Span) -> bool:
    """A model call, by the kind of a convention that sends content as log records (GenAI's
    `gen_ai.operation.name`), whose output is neither in its attributes nor in its span
    events: if its content is captured at all, it travels as OTLP log events, exported
    apart from the span. Reads single attributes, and decodes the span's events only for
    such a call."""
    for attribute, calls in _LOGGED_CALLS:
        operation = span.attribute(attribute)
        if isinstance(operation, str) and operation in calls:
            break
    else:
        return False
    if span.attribute(LOG_EVENT_KEY) is not None:
        return False
    if any(span.attribute(key) is not None for key in _OUTPUT_KEYS):
        return False
    return not any(event.name in _OUTPUT_EVENTS for event in span.events)


def join_log_events(spans: Sequence[Span]) -> list[Span]:
    """Fold the event spans made from OTLP GenAI log events (`monitor.spans.LOG_EVENT_KEY`)
    into the span they belong to: their events join its events, in time order. Then the
    attributes of a convention's detail event (`gen_ai.client.inference.operation.details`:
    the call's input and output messages), whether it came as a log record or as a span
    event (some SDKs, with `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`), fill
    the ones the span lacks. Event spans whose span never arrived are left out."""
    table = current().table
    detail_events = table.detail_events
    is_log_event = [s.name in table.log_events and bool(s.attribute(LOG_EVENT_KEY)) for s in spans]
    own = [s for s, from_log in zip(spans, is_log_event, strict=True) if not from_log]
    joined: dict[str, list[SpanEvent]] = {}
    if any(is_log_event):
        ids = {s.span_id for s in own}
        for event_span, from_log in zip(spans, is_log_event, strict=True):
            if from_log and event_span.parent_span_id in ids:
                joined.setdefault(event_span.parent_span_id, []).extend(event_span.events)
    out = []
    for span in own:
        extra = joined.get(span.span_id)
        events = sorted([*span.events, *extra], key=TIME) if extra else span.events
        details = [e for e in events if e.name in detail_events]
        if not extra and not details:
            out.append(span)
            continue
        attributes = dict(span.attributes)
        for event in details:
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
                events=events,
                error=span.error,
                service=span.service,
                parent_is_remote=span.parent_is_remote,
                resource=span.resource,
            )
        )
    return out
