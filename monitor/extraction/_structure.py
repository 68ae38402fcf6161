"""What a trace is made of, read where no convention names it.

- **Documents**: a span (or one of its events, log records joined to it among them) that
  starts before the answering model call and whose attribute values hold a list of texts
  (JSON strings, or objects with a text field such as `content`, `page_content`, `text`,
  whatever wraps the list: `{"documents": [...]}`, `{"replies": [...]}`, `{"args": [...]}`)
  is the retrieval when those texts appear in the call's prompt. The containment is the
  evidence; the record names the span and the value. The span's question (a value under a
  question key that the prompt holds) is what the retriever was asked.
- **A model call**: a span that declares no kind and whose values hold a chat, role-tagged
  messages ending in a user turn in one value and assistant messages in another
  (`{"messages": [...]}` in, `{"replies": [...]}` out; events with `messages` of `blocks`
  in, `response.message.role` and `.blocks` out), in its attributes or its events.

Both run only where the conventions found none, so traces they read never pay."""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.extraction._message_parts import message_documents
from monitor.extraction._prompt_documents import INSTRUCTION
from monitor.extraction._span_roles import span_role
from monitor.extraction._span_values import (
    QUERY_KEYS,
    Doc,
    Generation,
    as_doc,
    chat_messages,
    find_text,
    normalized,
)
from monitor.extraction._tool_results import parsed_value
from monitor.spans import Span

# How deep a value is walked for lists, and the fewest characters a text must have to
# count as found in the prompt (a word or two appears anywhere).
_MAX_DEPTH = 6
_MIN_CHARS = 12
# How much of a long text's opening the prompt must hold (a template may cut documents).
_OPENING_CHARS = 200
# Listed texts looked for in the prompt, at most, in one trace.
_MAX_TEXTS = 2000
# A text field in an object's repr: `page_content='...'`, `text="..."` (escapes kept).
_REPR_TEXT = re.compile(
    r"\b(?:page_content|content|text)=('(?:[^'\\\n]|\\.){0,100000}'|\"(?:[^\"\\\n]|\\.){0,100000}\")"
)
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
    query: str | None = None  # the span's question, when the prompt holds it

    @property
    def evidence(self) -> str:
        return (
            f"{len(self.docs)} of {self.listed} texts in {self.where} of span "
            f"{self.span.name!r} appear in the model call's prompt"
        )


def found_by_structure(
    spans: Sequence[Span], answer: Generation, question: str | None
) -> Found | None:
    """The value, among the spans that start before `answer`'s call, whose listed texts
    appear in its prompt (the `question` itself is no document): the one with most such
    texts, the latest span on a tie."""
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
    asked = normalized(question)
    best = _most_in_prompt(spans, answer.span, prompt, whole, asked)
    if best is None:
        return None
    for value in best.span.attributes.values():
        asked_there = find_text(value, QUERY_KEYS)
        bare = normalized(asked_there)
        if asked_there and len(bare) >= _MIN_CHARS and bare not in whole and bare in prompt:
            return Found(best.span, best.where, best.docs, best.listed, asked_there)
    return best


def _most_in_prompt(
    spans: Sequence[Span], call: Span, prompt: str, whole: frozenset[str], asked: str
) -> Found | None:
    best: Found | None = None
    budget = _MAX_TEXTS  # a trace listing more texts than are worth looking for
    for span in spans:
        if span is call or span.start_unix_nano >= call.start_unix_nano:
            continue
        for where, value in _values(span):
            for listed in _lists(parsed_value(value), 0):
                budget -= len(listed)
                if budget < 0:
                    return best
                inside = [d for d in listed if _in_prompt(d.content, prompt, whole, asked)]
                if inside and (best is None or len(inside) >= len(best.docs)):
                    best = Found(span, where, inside, len(listed))
    return best


def call_by_structure(span: Span) -> Generation | None:
    """The model call a span that declares no kind holds by its values' shape: the
    messages sent (role-tagged, the last a user's or a tool's) in one value, the assistant
    messages returned in another."""
    if span_role(span) is not None:
        return None
    sent: list[tuple[str, str]] = []
    returned: list[tuple[str, str]] = []
    sent_in = ""
    sent_value: Any = None
    for where, value in (*_values(span), *_flattened_messages(span)):
        parsed = parsed_value(value)
        for messages in _message_lists(parsed, 0):
            if not sent and messages[-1][0] in ("user", "tool"):
                sent, sent_in, sent_value = messages, where, parsed
            elif not returned and {role for role, _ in messages} == {"assistant"}:
                if where != sent_in:
                    returned = messages
    if not sent or not returned:
        return None
    output = "\n".join(text for _, text in returned)
    documents = message_documents(sent_value)
    return Generation(span, sent, output, structured=True, documents=documents)


def _flattened_messages(span: Span) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A message whose fields were flattened into attributes of the span or of one of its
    events (`<prefix>.role` beside `<prefix>.blocks`, `.content` or `.parts`: a reply
    written as `response.message.*`), as a list
    of that one message."""
    groups = [("", span.attributes), *((f"{e.name}: ", e.attributes) for e in span.events)]
    for label, attributes in groups:
        for key, role in attributes.items():
            if not key.endswith(".role") or not isinstance(role, str):
                continue
            prefix = key[: -len("role")]
            for body in ("blocks", "content", "parts"):
                if prefix + body in attributes:
                    message = {"role": role, body: attributes[prefix + body]}
                    yield f"{label}{prefix[:-1]}", [message]
                    break


def _message_lists(value: Any, depth: int) -> Iterator[list[tuple[str, str]]]:
    if depth > _MAX_DEPTH:
        return
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and _ROLE_FIELDS & v.keys() for v in value)
    ):
        messages = chat_messages([{**v, "role": v.get("role", v.get("_role"))} for v in value])
        if messages:
            yield messages
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _message_lists(parsed_value(inner), depth + 1)


def _in_prompt(text: str | None, prompt: str, whole: frozenset[str], asked: str) -> bool:
    if not text:
        return False
    found = normalized(text)
    if (
        len(found) < _MIN_CHARS
        or found in whole
        or (found in asked and 2 * len(found) > len(asked))
    ):
        return False  # too short to tell, a whole message (a prompt), or the question
    if _a_name(found):
        return False  # an identifier (a tool's name, a file path, a URL): no text to ground on
    # A long document the prompt cut short is found by its opening.
    return found in prompt or (len(found) > _OPENING_CHARS and found[:_OPENING_CHARS] in prompt)


_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_-.:/#@")


def _a_name(text: str) -> bool:
    """One token of ASCII identifier characters: a name, not a text (a document without
    spaces in a script that uses none, Chinese, is text)."""
    return _NAME_CHARS.issuperset(text)


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
    elif isinstance(value, str) and value.lstrip()[:1] == "[":
        docs = [Doc(text) for text in _repr_texts(value)]
        if docs:
            yield docs


def _repr_texts(value: str) -> list[str]:
    """The text fields of a list of objects written as their reprs (`str()` of a list of
    `Document`s: `[Document(page_content='...', metadata={...}), ...]`)."""
    texts = []
    for match in _REPR_TEXT.finditer(value):
        try:
            text = ast.literal_eval(match.group(1))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(text, str):
            texts.append(text)
    return texts


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
