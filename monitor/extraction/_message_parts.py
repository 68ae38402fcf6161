"""Parts of a model call's messages that are documents by kind: Anthropic's `document` and
`search_result` content blocks, hosted retrieval results (an OpenAI Responses
`file_search_call` item's `results`), wherever they sit in the messages (a part of a part,
a block of a block). They are the record's documents (`context_source =
message_documents`); the message's own text leaves them out (`_span_values.content_text`).

Read where a convention reads the call's messages (`gen_ai.input.messages`, ...), in the
span's events, or in the chat a model call found by structure holds; only when one of the
call's values names such a kind, so that a call without any pays a few substring
searches."""

from __future__ import annotations

from typing import Any

from monitor.extraction._sources import is_absent, raw
from monitor.extraction._span_roles import content_events, sources
from monitor.extraction._span_values import (
    DOCUMENT_KINDS,
    NOT_MESSAGE_TEXT,
    PART_DEPTH,
    Doc,
    as_float,
    content_text,
    loads,
    part_kind,
)
from monitor.shared.nesting import MAX_ITEMS
from monitor.spans import Span

# What a raw value holds when it may hold a document part (JSON with or without spaces).
_MARKS = tuple(f'"{kind}"' for kind in DOCUMENT_KINDS)
# Where a document part names its source, in order: a search result's `source` (its URI),
# a document's `title`, then the ids other parts carry.
_NAMES = ("source", "title", "filename", "file_id", "uri", "url", "id", "name")


def may_hold_documents(value: Any) -> bool:
    """Whether a raw messages value may hold a document part (a string that names no
    document kind holds none: the fast path)."""
    if isinstance(value, str):
        return any(mark in value for mark in _MARKS)
    return value is not None


def message_documents(value: Any) -> list[Doc]:
    """The documents by kind in a messages value (JSON or structured), in order: each
    `document` or `search_result` part one document, each result of a `file_search_call`
    one; bounded by `PART_DEPTH` and `MAX_ITEMS` parts."""
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
    kind = part_kind(value)
    if kind == "file_search_call":
        results = loads(value.get("results"))
        for result in results if isinstance(results, list) else ():
            doc = _result_doc(result)
            if doc is not None:
                docs.append(doc)
        return
    if kind in DOCUMENT_KINDS:
        doc = _part_doc(value)
        if doc is not None:
            docs.append(doc)
        return
    if kind in NOT_MESSAGE_TEXT:
        return  # media, a tool call, a tool's result (read as one: `_tool_results.py`)
    for inner in value.values():
        if isinstance(inner, list | dict) or (isinstance(inner, str) and _holds_mark(inner)):
            _walk(inner, depth + 1, budget, docs)


def _holds_mark(text: str) -> bool:
    return any(mark in text for mark in _MARKS)


def _names_a_kind(attributes: dict[str, Any]) -> bool:
    """Whether a value of these attributes may hold a document part: a string that names a
    document kind, or a structured value (walked when read). Runs on every model call, so
    it is a plain loop of substring searches."""
    for value in attributes.values():
        if isinstance(value, str):
            for mark in _MARKS:
                if mark in value:
                    return True
        elif isinstance(value, dict) or (
            isinstance(value, list | tuple)
            and any(isinstance(v, dict | str) and _holds(v) for v in value)
        ):
            return True
    return False


def _holds(value: dict[str, Any] | str) -> bool:
    return isinstance(value, dict) or _holds_mark(value)


def _part_doc(part: dict[str, Any]) -> Doc | None:
    """A `document` or `search_result` part: its text (a search result's `content`
    blocks; a document's `source`: `{"type": "text", "data"}` or `{"type": "content",
    "content": [...]}`, never a base64 or URL source), named by its source or title."""
    source = part.get("source")
    text = None
    if isinstance(source, dict):
        if source.get("type") == "content":
            text = content_text(source.get("content"))
        elif source.get("type") == "text" and isinstance(source.get("data"), str):
            text = source["data"]
    if text is None:
        text = content_text(part.get("content", part.get("text")))
    if not (isinstance(text, str) and text.strip()):
        return None  # a PDF, an image, a URL: nothing a text evaluator can read
    name = next((str(part[k]) for k in _NAMES if isinstance(part.get(k), str | int)), None)
    title = part.get("title")
    metadata = {"title": title} if isinstance(title, str) and title != name else None
    return Doc(text, name, metadata=metadata)


def _result_doc(result: Any) -> Doc | None:
    """One result of a hosted file search (`{file_id, filename, score, text,
    attributes}`)."""
    if not isinstance(result, dict):
        return None
    text = content_text(result.get("text", result.get("content")))
    if not (isinstance(text, str) and text.strip()):
        return None
    name = next((str(result[k]) for k in _NAMES if isinstance(result.get(k), str)), None)
    attributes = result.get("attributes")
    return Doc(
        text,
        name,
        score=as_float(result.get("score")),
        metadata=dict(attributes) if isinstance(attributes, dict) and attributes else None,
    )


def span_documents(span: Span) -> list[Doc]:
    """The documents by kind a model call span's messages hold: in the first of the
    conventions' `model_input` sources the span carries a value of, and in its output (a
    hosted search's results are part of the response): the first `model_output` source's
    value, else the request output a framework wrote on it (OpenInference's `output.value`
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
