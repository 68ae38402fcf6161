"""What a span is — a model call, a tool execution, a container (agent, workflow, chain,
request), a retrieval, an embedding call or a prompt template — from the role its
instrumentation declares (the conventions table, `monitor/conventions/_shipped.py`), never
from which content attributes it happens to carry. Every convention writes its content on containers
and tools too (GenAI message events on agent and tool spans, `gen_ai.prompt` /
`gen_ai.completion` on every run), so content decides nothing. A span
no convention names is `None`: the readers fall back on its content.

Also what the span readers share to read a span's content by the table: the conventions
in the order to read them (`reading_order`: the declaring one first), each part's sources
in the span's attributes (`sources`) and the span's events that carry it
(`content_events`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from monitor.conventions import (
    CONTAINER,
    EMBEDDINGS,
    INDEXING,
    MODEL,
    OTHER,
    PROMPT,
    RETRIEVAL,
    TOOL,
    Convention,
    Kind,
    Source,
)
from monitor.extraction._sources import event_fields
from monitor.extraction._table import Table, current
from monitor.spans import Span

__all__ = [
    "CONTAINER",
    "EMBEDDINGS",
    "INDEXING",
    "MODEL",
    "OTHER",
    "PROMPT",
    "RETRIEVAL",
    "TOOL",
    "content_events",
    "declared",
    "event_sources",
    "reading_order",
    "shows_call",
    "sources",
    "span_role",
]


def _folded(kind: Kind, value: Any) -> str | None:
    if isinstance(value, str) and value[:1] == '"' and value[-1:] == '"' and len(value) > 1:
        value = value[1:-1]  # a JSON string literal (some SDKs write every value as JSON)
    if not isinstance(value, str):
        return None
    if kind.fold == "upper":
        return value.upper()
    return value.lower() if kind.fold == "lower" else value


def _kind_role(kind: Kind, value: str) -> str | None:
    role = kind.roles.get(value)
    if role is not None:
        return role
    if kind.prefix and not value.startswith(kind.prefix):
        return None
    for suffix, suffix_role in kind.suffixes.items():
        if value.endswith(suffix):
            return suffix_role
    return kind.unlisted


def _declared(span: Span, rules: Table) -> tuple[str, Convention] | None:
    a = span.attributes
    for kind, convention in rules.kinds:
        value = _folded(kind, a.get(kind.attribute))
        if value is not None:
            role = _kind_role(kind, value)
            if role is not None:
                return role, convention
    for convention in rules.matching:
        if span.name in convention.span_names or any(
            key in a for key in convention.span_attributes
        ):
            assert convention.span_role is not None
            return convention.span_role, convention
    return None


def declared(span: Span) -> tuple[str, Convention] | None:
    """The role declared for `span` and the convention that declares it, or None: the
    first kind attribute (in table order) whose value names a role, else the first
    convention whose `span_names` / `span_attributes` match. Worked out once per span in
    an extraction."""
    now = current()
    if now.roles is None:
        return _declared(span, now.table)
    key = id(span)
    if key in now.roles:
        return now.roles[key]
    found = now.roles[key] = _declared(span, now.table)
    return found


def span_role(span: Span) -> str | None:
    """The role its instrumentation declares for `span`, or None when none does."""
    found = declared(span)
    return found[0] if found is not None else None


def shows_call(span: Span) -> bool:
    """A span that is not a model call but whose declared kind shows that one was made (a
    GenAI agent invocation: an agent calls a model, even when only the agent is traced)."""
    a = span.attributes
    for kind, _ in current().table.kinds:
        value = _folded(kind, a.get(kind.attribute))
        if value is not None and value in kind.calls:
            return True
    return False


def reading_order(span: Span) -> tuple[Convention, ...]:
    """The conventions to read `span`'s content by: the standard ones (GenAI, which other
    SDKs write beside their own), the one that declares its role, then every other in
    table order."""
    found = declared(span)
    return current().table.order(found[1] if found is not None else None)


def sources(span: Span, part: str, *, undeclared_only: bool = False) -> tuple[Source, ...]:
    """Where `part` (a `Convention` field: `model_input`, `documents`, ...) may be on
    `span`, in reading order; `undeclared_only`: those read on a span that declares no
    role."""
    found = declared(span)
    return current().table.sources(found[1] if found is not None else None, part, undeclared_only)


def event_sources(
    span: Span, *parts: str, undeclared_only: bool = False
) -> tuple[dict[str, tuple[tuple[Source, str], ...]], ...]:
    """Where each of `parts` may be in `span`'s events: by event name, the sources in
    reading order, each with its convention's name."""
    found = declared(span)
    first = found[1] if found is not None else None
    table = current().table
    return tuple(table.event_sources(first, part, undeclared_only) for part in parts)


def content_events(
    span: Span, part: str, *, undeclared_only: bool = False
) -> Iterator[tuple[tuple[tuple[Source, str], ...], dict[str, Any]]]:
    """The span's events, in time order, that carry `part` where a convention says: each
    event's sources (in reading order, each with its convention's name) and its fields
    (`_sources.event_fields`)."""
    if not span.events:
        return
    (by_event,) = event_sources(span, part, undeclared_only=undeclared_only)
    if not by_event:
        return
    bodies = current().table.event_bodies
    for event in span.events:
        sources_of_event = by_event.get(event.name)
        if sources_of_event:
            yield sources_of_event, event_fields(event, bodies)
