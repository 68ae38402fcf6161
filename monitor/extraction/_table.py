"""The conventions one extraction reads, in reading order: a user's
(`extraction.conventions`, made entries by `from_config`) before the shipped ones; and what
follows from them, worked out once per set (`Table`): the kind attributes to look at, each
part's sources in each reading order, the events that carry content."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from monitor.config import (
    AttributeSource,
    ConventionPart,
    ConventionRagPrompt,
    EventSource,
    MessageSource,
    UserConvention,
)
from monitor.conventions import (
    CONTAINER,
    EMBEDDINGS,
    JSON,
    MESSAGES,
    MODEL,
    OTHER,
    RETRIEVAL,
    SHIPPED,
    TEXT_PART,
    TOOL,
    TOOL_CALL_RESPONSE,
    VERDICT_EVENTS,
    Convention,
    Kind,
    PartShape,
    RagPrompt,
    Source,
    log_events_of,
)

_USER_ROLES = {
    "request": CONTAINER,
    "agent": CONTAINER,
    "chain": CONTAINER,
    "retrieval": RETRIEVAL,
    "model": MODEL,
    "tool": TOOL,
    "embeddings": EMBEDDINGS,
    "other": OTHER,
}


def _source(entry: AttributeSource, encoding: str | None = None) -> Source:
    return Source(
        entry.attribute,
        encoding or entry.encoding,
        entry.field,
        event=entry.event if isinstance(entry, EventSource) else None,
        role=entry.role if isinstance(entry, MessageSource) else None,
    )


def _sources(entries: Sequence[AttributeSource]) -> tuple[Source, ...]:
    return tuple(_source(e) for e in entries)


def _part_shape(entry: ConventionPart) -> PartShape:
    return PartShape(
        entry.kind,
        frozenset(entry.types),
        entry.key,
        text=tuple(entry.text),
        name=tuple(entry.name),
        title=tuple(entry.title),
        id=tuple(entry.id),
        data=tuple(entry.data),
        mime_type=tuple(entry.mime_type),
        uri=tuple(entry.uri),
        file_id=tuple(entry.file_id),
        modality=entry.modality,
    )


def _rag_prompt(entry: ConventionRagPrompt) -> RagPrompt:
    return RagPrompt(entry.header, entry.line, entry.delimiter, entry.question)


def from_config(entries: Sequence[UserConvention]) -> tuple[Convention, ...]:
    """The user's conventions (`extraction.conventions`) as table entries. `input` is a
    request's question, a model call's messages and a retrieval's query; `output` a
    request's or a model call's answer and a tool's result."""
    out = []
    for entry in entries:
        kinds: tuple[Kind, ...] = ()
        if entry.kind is not None:
            roles = {value: _USER_ROLES[role] for value, role in entry.kind.values.items()}
            kinds = (Kind(entry.kind.attribute, roles, unlisted=None),)
        match = entry.match
        # A JSON answer may be a chat completion or messages: read as messages are.
        answer = tuple(
            _source(e, MESSAGES if e.encoding == JSON else e.encoding) for e in entry.output
        )
        # The events it reads are taken as log records too, joined to their span.
        named = (*entry.input, *entry.output, *entry.documents)
        events = frozenset(s.event for s in named if s.event is not None)
        out.append(
            Convention(
                entry.name,
                log_events=events,
                kinds=kinds,
                span_names=frozenset(match.span_names) if match is not None else frozenset(),
                span_attributes=frozenset(match.attributes) if match is not None else frozenset(),
                span_role=_USER_ROLES[match.role] if match is not None else None,
                model_input=_sources(entry.input),
                model_output=answer,
                model=_sources(entry.model),
                input_tokens=_sources(entry.input_tokens),
                output_tokens=_sources(entry.output_tokens),
                request_input=_sources(entry.input),
                request_output=_sources(entry.output),
                query=_sources(entry.input),
                documents=_sources(entry.documents),
                tool_result=_sources(entry.output),
                conversation=_sources(entry.conversation),
                event_bodies=tuple(entry.event_bodies),
                part_shapes=tuple(_part_shape(p) for p in entry.parts),
                placeholders=tuple(entry.placeholders),
                marks=tuple(entry.marks),
                marked_names=tuple(entry.marked_names),
                switch=entry.switch,
                joins_messages=entry.joins_messages,
                rag_prompts=tuple(_rag_prompt(p) for p in entry.rag_prompts),
            )
        )
    return tuple(out)


class Table:
    """The conventions one extraction reads, in order, and what follows from them (the
    kind attributes to look at, each reading order and where each part is in it), worked
    out once per set of conventions (`table_of`)."""

    def __init__(self, conventions: tuple[Convention, ...]) -> None:
        self.conventions = conventions
        self.kinds = tuple((kind, c) for c in conventions for kind in c.kinds)
        self.matching = tuple(c for c in conventions if c.span_role is not None)
        self.standard = tuple(c for c in conventions if c.standard)
        self._orders: dict[str | None, tuple[Convention, ...]] = {}
        self._sources: dict[tuple[str | None, str, bool], tuple[Source, ...]] = {}
        self._events: dict[
            tuple[str | None, str, bool], dict[str, tuple[tuple[Source, str], ...]]
        ] = {}
        self.event_bodies = tuple(dict.fromkeys(b for c in conventions for b in c.event_bodies))
        self.detail_events = frozenset(e for c in conventions for e in c.detail_events)
        # With the events that carry an app's own verdicts (`monitor.conventions.VERDICT_EVENTS`).
        self.log_events = log_events_of(conventions) | VERDICT_EVENTS
        self.placeholders = frozenset(m for c in conventions for m in c.model_placeholders)
        # Native message parts by their type value and by the key of a keyed block, each
        # with its shapes in table order (the user's first).
        self.part_types: dict[str, tuple[PartShape, ...]] = {}
        self.part_keys: dict[str, tuple[PartShape, ...]] = {}
        for shape in (s for c in conventions for s in c.part_shapes):
            for value in shape.types:
                self.part_types[value] = (*self.part_types.get(value, ()), shape)
            if shape.key is not None:
                self.part_keys[shape.key] = (*self.part_keys.get(shape.key, ()), shape)
        # The type values every shape of which is a text part: read at once.
        self.text_types = frozenset(
            t for t, of in self.part_types.items() if all(s.kind == TEXT_PART for s in of)
        )
        # What a raw value holds when it may hold a tool's response part.
        self.response_marks = tuple(
            name
            for shapes in (self.part_types, self.part_keys)
            for name, of in shapes.items()
            if any(s.kind == TOOL_CALL_RESPONSE for s in of)
        )
        # What stands where content was withheld: exact values and prefixes (ending `:`).
        marks = [p.casefold() for c in conventions for p in c.placeholders]
        self.content_placeholders = frozenset(m for m in marks if not m.endswith(":"))
        self.placeholder_prefixes = tuple(m for m in marks if m.endswith(":"))
        # The conversation's sources in table order: the user's first, whatever declared
        # a span's role.
        self.conversation = tuple(s for c in conventions for s in c.conversation)
        self.conversation_keys = frozenset(s.key for s in self.conversation)
        # Frameworks' default RAG prompts, read in any trace, in table order.
        self.rag_prompts = tuple(p for c in conventions for p in c.rag_prompts)

    def order(self, first: Convention | None) -> tuple[Convention, ...]:
        """The order to read a span's content in when `first` declared its role: the
        standard conventions, `first`, then every other in table order."""
        name = first.name if first is not None else None
        found = self._orders.get(name)
        if found is None:
            lead = (first,) if first is not None and not first.standard else ()
            rest = (c for c in self.conventions if c not in lead and not c.standard)
            found = self._orders[name] = (*self.standard, *lead, *rest)
        return found

    def sources(
        self, first: Convention | None, part: str, undeclared_only: bool
    ) -> tuple[Source, ...]:
        """Where `part` is in the span's attributes, in `order(first)`; `undeclared_only`:
        the sources read on a span that declares no role."""
        key = (first.name if first is not None else None, part, undeclared_only)
        found = self._sources.get(key)
        if found is None:
            found = self._sources[key] = tuple(
                source
                for convention in self.order(first)
                for source in getattr(convention, part)
                if source.event is None and (not undeclared_only or source.undeclared)
            )
        return found

    def event_sources(
        self, first: Convention | None, part: str, undeclared_only: bool
    ) -> dict[str, tuple[tuple[Source, str], ...]]:
        """Where `part` is in the span's events: by event name, its sources in
        `order(first)`, each with the name of the convention that declares it."""
        key = (first.name if first is not None else None, part, undeclared_only)
        found = self._events.get(key)
        if found is None:
            by_event: dict[str, list[tuple[Source, str]]] = {}
            for convention in self.order(first):
                for source in getattr(convention, part):
                    if source.event is not None and (not undeclared_only or source.undeclared):
                        by_event.setdefault(source.event, []).append((source, convention.name))
            found = self._events[key] = {k: tuple(v) for k, v in by_event.items()}
        return found


@functools.lru_cache(maxsize=16)
def table_of(user: tuple[Convention, ...]) -> Table:
    """The table of the user's conventions before the shipped ones (conventions compare by
    identity: a worker's settings give the same objects to every extraction)."""
    return Table((*user, *SHIPPED))


def log_events_taken(
    user: Sequence[Convention], verdict_events: frozenset[str] = frozenset()
) -> frozenset[str]:
    """The events the receivers take log records as: the shipped conventions' and those
    the user's (`extraction.conventions`) name, and the events of the user's verdict
    vocabularies (`external_verdicts.vocabularies`: `verdict_events`)."""
    return table_of(tuple(user)).log_events | verdict_events


@dataclass(frozen=True, slots=True)
class Reading:
    """What one extraction reads by (`table`), and what it worked out of each of its spans,
    by the span object's id (the spans live as long as the extraction): `roles`, the
    declared role; `event_content`, the content of its events (`_model_call_spans`), which
    the request and model-call readers each ask for."""

    table: Table
    roles: dict[int, tuple[str, Convention] | None] | None
    event_content: dict[int, Any] | None = None


# Outside an extraction (the trace stage's questions, a log line's switch): the shipped
# conventions, nothing remembered.
_SHIPPED_READING = Reading(table_of(()), None)
_ACTIVE: ContextVar[Reading | None] = ContextVar("conventions", default=None)


def active() -> tuple[Convention, ...]:
    """The conventions the extraction in progress reads, in order."""
    return current().table.conventions


def current() -> Reading:
    """What the extraction in progress reads by."""
    return _ACTIVE.get() or _SHIPPED_READING


@contextmanager
def reading(conventions: Sequence[Convention]) -> Iterator[None]:
    """Extraction within reads `conventions` before the shipped ones, and remembers each
    span's declared role until it ends."""
    token = _ACTIVE.set(Reading(table_of(tuple(conventions)), {}, {}))
    try:
        yield
    finally:
        _ACTIVE.reset(token)
