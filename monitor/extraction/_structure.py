"""Documents found by structure, when no convention names them: a span (or one of its events,
log records joined to it among them) that starts before the answering model call and whose
attribute values hold a list of texts (JSON strings, or objects with a text field such as
`content`, `page_content`, `text`, whatever wraps the list: `{"documents": [...]}`,
`{"replies": [...]}`, `{"args": [...]}`) is the retrieval when those texts appear in the
call's prompt. The containment is the evidence; the record names the span and the value.

It runs only where the conventions found no documents, so traces they read never pay."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.extraction._prompt_documents import INSTRUCTION
from monitor.extraction._span_values import Doc, Generation, as_doc, normalized
from monitor.extraction._tool_results import parsed_value
from monitor.spans import Span

# How deep a value is walked for lists, and the fewest characters a text must have to
# count as found in the prompt (a word or two appears anywhere).
_MAX_DEPTH = 6
_MIN_CHARS = 12
# Fields whose value is a text, beyond those `as_doc` reads.
_TEXT_FIELDS = ("body", "chunk", "passage", "snippet", "value", "_content")
# A message (`role`: a prompt, not documents).
_ROLE_FIELDS = frozenset({"role", "_role"})


@dataclass(frozen=True, slots=True)
class Found:
    """The documents a span's value holds that appear in the prompt, and where."""

    span: Span
    where: str  # the attribute (or `event name: attribute`)
    docs: list[Doc]
    listed: int  # how many texts the list held

    @property
    def evidence(self) -> str:
        return (
            f"{len(self.docs)} of {self.listed} texts in {self.where} of span "
            f"{self.span.name!r} appear in the model call's prompt"
        )


def found_by_structure(spans: Sequence[Span], answer: Generation) -> Found | None:
    """The value, among the spans that start before `answer`'s call, whose listed texts
    appear in its prompt: the one with most such texts, the latest span on a tie."""
    prompt = "\n".join(normalized(text) for _, text in answer.messages)
    if not prompt:
        return None
    # A whole message is a prompt handed on (a traced function's argument), not a
    # document: a user message, or a system message that instructs. (An app may send each
    # document as a system message of its own.)
    whole = frozenset(
        normalized(text)
        for role, text in answer.messages
        if role != "system" or INSTRUCTION.search(text)
    )
    asked = normalized(answer.user_query)
    start = answer.span.start_unix_nano
    best: Found | None = None
    for span in spans:
        if span is answer.span or span.start_unix_nano >= start:
            continue
        for where, value in _values(span):
            for listed in _lists(parsed_value(value), 0):
                inside = [d for d in listed if _in_prompt(d.content, prompt, whole, asked)]
                if inside and (best is None or len(inside) >= len(best.docs)):
                    best = Found(span, where, inside, len(listed))
    return best


def _in_prompt(text: str | None, prompt: str, whole: frozenset[str], asked: str) -> bool:
    if not text:
        return False
    found = normalized(text)
    if len(found) < _MIN_CHARS or found in whole or found in asked:
        return False  # too short to tell, a whole message (a prompt), or the question
    return found in prompt


def _values(span: Span) -> Iterator[tuple[str, Any]]:
    for key, value in span.attributes.items():
        if _may_hold_list(value):
            yield key, value
    for event in span.events:
        for key, value in event.attributes.items():
            if _may_hold_list(value):
                yield f"{event.name}: {key}", value


def _may_hold_list(value: Any) -> bool:
    if isinstance(value, str):
        return value.lstrip()[:1] in ("[", "{")
    return isinstance(value, list | tuple | dict)


def _lists(value: Any, depth: int) -> Iterator[list[Doc]]:
    """Every list of texts in `value`, outermost first."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, list | tuple):
        docs = [d for d in (_item(parsed_value(v)) for v in value) if d is not None]
        if docs:
            yield docs
        for item in value:
            if isinstance(item, dict | list | tuple):
                yield from _lists(item, depth + 1)
    elif isinstance(value, dict) and not _ROLE_FIELDS & value.keys():
        for inner in value.values():
            yield from _lists(parsed_value(inner), depth + 1)


def _item(item: Any) -> Doc | None:
    """One listed text: a string, or an object with a text field (not a message)."""
    if isinstance(item, str):
        return Doc(item) if item.strip() else None
    if not isinstance(item, dict) or _ROLE_FIELDS & item.keys():
        return None
    doc = as_doc(item)
    if doc is not None and doc.content:
        return doc
    for key in _TEXT_FIELDS:
        text = item.get(key)
        if isinstance(text, str) and text.strip():
            uri = doc.doc_uri if doc is not None else None
            return Doc(text, uri, doc.score if doc is not None else None)
    return None
