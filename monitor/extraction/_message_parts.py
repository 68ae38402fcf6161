"""Parts of a model call's messages that are documents: a part whose modality is
`document` and that carries text (a provider's document block, a search result, a GenAI
`generic` or media part so marked, bytes that decode as text, a part of no known shape
with a text and a name), and a hosted search's results; in every message the call was
given or returned (system, user, assistant, tool), wherever they sit (a part of a part, a
block of a block). They are read on the message model (`_messages.py`) by the conventions
table's part shapes; they are the record's documents (`context_source =
message_documents`), and the message's own text leaves them out.

Read where a convention reads the call's messages (`gen_ai.input.messages`, ...), in the
span's events, or in the chat a model call found by structure holds; only when one of the
call's values may hold such a part (`may_hold_documents`), so that a call without any pays
a few substring searches."""

from __future__ import annotations

from typing import Any, Literal, overload

from monitor.conventions import DOCUMENT
from monitor.extraction._decoding import loads
from monitor.extraction._messages import (
    PART_DEPTH,
    Doc,
    Generic,
    Part,
    documents_of,
    read_messages,
    read_part,
    type_of,
)
from monitor.extraction._sources import is_absent, raw
from monitor.extraction._span_roles import content_events, sources
from monitor.extraction._table import Table, current
from monitor.shared.nesting import MAX_ITEMS
from monitor.spans import Span

# What a raw value holds when a part of no known shape in it may be a document.
_NAMING_MARKS = ('"title"', '"source"', '"generic_type"', '"modality"')


def _marks(table: Table) -> tuple[str, ...]:
    """The substrings a raw value holds when it may hold a document part: the type values
    and keys of the table's document shapes, and the members that name a part."""
    found = _MARKED.get(id(table))
    if found is None:
        named = [
            name
            for shapes in (table.part_types, table.part_keys)
            for name, of in shapes.items()
            if any(s.modality == DOCUMENT or s.items is not None for s in of)
        ]
        found = _MARKED[id(table)] = (*(f'"{n}"' for n in sorted(named)), *_NAMING_MARKS)
    return found


_MARKED: dict[int, tuple[str, ...]] = {}


def may_hold_documents(value: Any) -> bool:
    """Whether a raw messages value may hold a document part (a string that names no
    document kind and no part's name holds none: the fast path)."""
    if isinstance(value, str):
        return any(mark in value for mark in _marks(current().table))
    return value is not None


def message_documents(value: Any) -> list[Doc]:
    """The documents in a messages value (JSON or structured), in message order, every
    message's; bounded by `PART_DEPTH` and `MAX_ITEMS` parts."""
    if not may_hold_documents(value):
        return []
    docs: list[Doc] = []
    budget = [MAX_ITEMS]
    _walk(loads(value), 0, budget, docs)
    return docs


def _walk(value: Any, depth: int, budget: list[int], docs: list[Doc]) -> None:
    budget[0] -= 1
    if depth > PART_DEPTH + 2 or budget[0] < 0:  # messages, then their parts
        return
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        value = loads(value)  # parts written as JSON text inside a message
    if isinstance(value, list):
        for item in value:
            _walk(item, depth + 1, budget, docs)
        return
    if not isinstance(value, dict):
        return
    if "role" not in value and (type_of(value) is not None or _keyed(value)):
        part = read_part(value, depth, budget)
        found = documents_of(part)
        if found:
            docs += found
            return
        if not (isinstance(part, Generic) and part.modality is None):
            return  # text, media, a tool call, a tool's result (read as one)
    for inner in value.values():
        if isinstance(inner, list | dict) or (
            isinstance(inner, str) and inner.lstrip()[:1] in ("[", "{")
        ):
            _walk(inner, depth + 1, budget, docs)


def _keyed(value: dict[str, Any]) -> bool:
    keys = current().table.part_keys
    return any(key in keys for key in value)


def _json_like(value: str) -> bool:
    first = value[:1]
    return first in ("[", "{") or (first.isspace() and value.lstrip()[:1] in ("[", "{"))


def _names_a_kind(attributes: dict[str, Any]) -> bool:
    """Whether a value of these attributes may hold a document part: JSON text that holds
    a mark, or a structured value (walked when read). Runs on every model call, so it is
    a plain loop of substring searches."""
    marks = _marks(current().table)
    for value in attributes.values():
        if isinstance(value, str):
            if not _json_like(value):
                continue  # plain text holds no part
            for mark in marks:
                if mark in value:
                    return True
        elif isinstance(value, dict) or (
            isinstance(value, list | tuple) and any(isinstance(v, dict | str) for v in value)
        ):
            return True
    return False


def span_documents(span: Span) -> list[Doc]:
    """The documents by kind a model call span's messages hold: in the first of the
    conventions' `model_input` sources the span carries a value of, and in its output (a
    hosted search's results are part of the response): the first `model_output` source's
    value, else the request output a framework wrote on it (a request output
    holding a Responses API response); else in the messages of its events."""
    a = span.attributes
    docs: list[Doc] = []
    if not _names_a_kind(a) and not any(_names_a_kind(e.attributes) for e in span.events):
        return docs  # the fast path: no value names a document kind
    for parts in (("model_input",), ("model_output", "request_output")):
        for part in parts:
            found = next((v for s in sources(span, part) if not is_absent(v := raw(s, a))), None)
            if found is not None:
                docs += message_documents(found)
            if found is not None and (docs or part == "model_output"):
                break
    if docs or not span.events:
        return docs
    for event_sources, fields in content_events(span, "model_input"):
        for source, _ in event_sources:
            value = raw(source, fields)
            if not is_absent(value):
                docs += message_documents(value)
    return docs


def _values(span: Span, where: str) -> list[Any]:
    """The raw values of a call's messages (`model_input` or `model_output`): the first of
    the span's attributes a convention names that it carries, and its events'."""
    a = span.attributes
    values = [v for s in sources(span, where) if not is_absent(v := raw(s, a))][:1]
    for event_sources, fields in content_events(span, where):
        for source, _ in event_sources:
            value = raw(source, fields)
            if not is_absent(value):
                values.append(value)
    return values


@overload
def span_parts(span: Span, where: str, raw_values: Literal[True]) -> list[Any]: ...
@overload
def span_parts(span: Span, where: str, raw_values: Literal[False] = False) -> list[Part]: ...
def span_parts(span: Span, where: str, raw_values: bool = False) -> list[Any]:
    """For the diagnosis: the parts of a call's messages on the model (or, `raw_values`,
    the values they are read from)."""
    values = _values(span, where)
    if raw_values:
        return values
    return [part for value in values for m in read_messages(value) for part in m.parts]
