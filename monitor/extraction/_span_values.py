"""What the span readers share: the convention-neutral forms a span is read into (`Doc`,
`Retrieval`, `Generation`) and the decoding of attribute values every convention uses
(JSON strings, `prefix.N.key` attributes, chat messages, documents, a question or an
answer inside a chain's input or output).

The readers (`_retrieval_spans.py`, `_model_call_spans.py`, `_tool_results.py`,
`_request_spans.py`) each look at one `Span` and return what it says in these forms;
`_extraction_rule.py` then joins the spans of a trace into records.

Where each convention writes each part is the conventions table
(`monitor/conventions/_shipped.py`, read through `_sources.py`); here are the shapes those
values take, whatever writes them: JSON text, chat messages (GenAI `parts`, a chat
completion's `content`, `blocks`, a chain's serialized and `dumpd` forms; a message's text
is every text its parts hold, at any depth: `content_text`), documents (`page_content`,
`content`, `text`; a scored node), and a question or an answer inside a chain's input or
output (a question field, a traced function's arguments, user messages; never an object's
repr, such as a prompt template object's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from monitor.extraction._decoding import as_float, bounded, loads
from monitor.extraction._messages import (
    PART_DEPTH,
    Doc,
    is_placeholder,
    part_text,
    parts_text,
    role_of,
)
from monitor.shared.nesting import note_unread
from monitor.spans import Span

__all__ = [
    "ANSWER_KEYS",
    "PART_DEPTH",
    "QUERY_KEYS",
    "Doc",
    "Generation",
    "Retrieval",
    "as_doc",
    "as_float",
    "as_str",
    "bounded",
    "chat_messages",
    "content_text",
    "find_text",
    "indexed",
    "is_repr",
    "json_docs",
    "loads",
    "normalized",
    "role_of",
]
# `<ScoredNode(node=...`, `<app.clients.LM object at 0x...>`: frameworks put an object's
# repr where text is expected (a prompt template as a call's input, `ChatMessage(...)` as
# messages). Never a question or an answer.
_REPR = re.compile(r"\s*(?:[A-Z][\w.]*\([A-Za-z_]\w*=|<[A-Za-z_][\w.]*(?:\(| object at ))")
QUERY_KEYS = (
    "query",
    "question",
    "input",
    "user_input",
    "q",
    "prompt",
    "message",
    "text",
    "task",  # an agent's run(task) (smolagents)
    "query_str",  # a query bundle's
)
ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content", "generation")


@dataclass(slots=True)
class Retrieval:
    span: Span
    query: str | None
    docs: list[Doc]
    reranked: bool = False
    tool: str | None = None  # a tool call's result (its tool's name), not a retriever's


@dataclass(slots=True)
class Generation:
    span: Span
    messages: list[tuple[str, str]]  # (role, text) sent to the model, system included
    output: str | None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    conventions: set[str] = field(default_factory=set)
    # messages read from role-tagged message attributes, not guessed from `input.value`
    structured: bool = False
    # what tools returned, as tool messages in this call's input, in message order
    tool_results: list[Doc] = field(default_factory=list)
    # the parts of its messages that are documents by kind (`_message_parts.py`)
    documents: list[Doc] = field(default_factory=list)

    @property
    def user_query(self) -> str | None:
        for role, text in reversed(self.messages):
            if role == "user":
                return text
        return None


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def is_repr(text: str) -> bool:
    """Whether a string is an object's repr rather than text (see `_REPR`)."""
    return _REPR.match(text) is not None


_INDEX_DIGITS = 9  # no instrumentation writes a billion items to one span


def indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`prefix.N.rest = v` attributes → one dict per N (ascending), keyed by `rest`."""
    size = len(prefix)
    groups: dict[str, dict[str, Any]] = {}
    for key in attrs:
        if key.startswith(prefix):
            index, _, rest = key[size:].partition(".")
            group = groups.get(index)
            if group is None:
                if not _is_index(index):
                    if index.isdigit():  # digits `int` refuses, or too many: that value only
                        note_unread("bad_index")
                    continue
                group = groups[index] = {}
            group[rest] = attrs[key]
    return [groups[i] for i in sorted(groups, key=int)]


def _is_index(index: str) -> bool:
    """An index of an indexed attribute: ASCII digits (`str.isdigit` also takes `²`, which
    `int` refuses), few enough for `int` (which refuses more than 4,300)."""
    return index.isascii() and index.isdigit() and len(index) <= _INDEX_DIGITS


def content_text(value: Any) -> str | None:
    """Text of a message content: a string, a list of parts, or a `{text|content}` object;
    every text its parts hold, at any depth, read on the message model
    (`_messages.part_text`): documents, media, tool calls and placeholders are no words of
    the message."""
    value = loads(value)
    if value is None:
        return None
    if isinstance(value, str):
        return None if is_placeholder(value) else value
    if isinstance(value, list):
        return parts_text(value)
    if isinstance(value, dict):
        return part_text(value)
    return str(value)


# Where a message keeps its content: GenAI's `parts`, a chat completion's `content`, a
# message of `blocks`.
_BODIES = ("parts", "content", "blocks")


def chat_messages(value: Any) -> list[tuple[str, str]]:
    """Chat messages: `[{role, parts|content|blocks}]` (JSON or structured)."""
    value = loads(value)
    if isinstance(value, str):
        return [("user", value)]
    if isinstance(value, dict):
        # `{"messages": [...]}` (a graph's state, a chat model's input)
        inner = value.get("messages") if "role" not in value else None
        value = inner if isinstance(inner, list) else [value]
    if not isinstance(value, list):
        return []
    if value and isinstance(value[0], list):  # batches: [[messages]]
        value = value[0]
    out = []
    for msg in value:
        if isinstance(msg, dict):
            kind = None
            if "lc" in msg and isinstance(msg.get("kwargs"), dict):  # a serialized message object
                kind = _lc_message_type(msg.get("id"))
                msg = msg["kwargs"]
            elif isinstance(msg.get("data"), dict) and "content" not in msg:
                msg = {**msg["data"], "type": msg.get("type")}  # its `dumpd` form
            role = role_of(msg.get("role") or msg.get("type") or kind)
            text = content_text(next((msg[k] for k in _BODIES if msg.get(k) is not None), None))
            if role and text is not None:
                out.append((role, text))
    return out


def _lc_message_type(path: Any) -> str | None:
    """`human` from a serialized message constructor's `id` (its path, ending in
    `HumanMessage`)."""
    if isinstance(path, list) and path and isinstance(path[-1], str):
        name = path[-1].removesuffix("Chunk")
        return name.removesuffix("Message").lower() if name.endswith("Message") else None
    return None


def find_text(value: Any, keys: tuple[str, ...], depth: int = 0) -> str | None:
    """The first meaningful string in a chain input/output (JSON, wrappers, messages);
    never an object's repr."""
    value = loads(value)
    if isinstance(value, str):
        return None if is_repr(value) else value.strip() or None
    if depth > 4:
        return None
    if isinstance(value, list):
        messages = chat_messages(value)
        want = "user" if keys is QUERY_KEYS else "assistant"
        for role, text in reversed(messages):
            if role == want:
                return text
        return None
    if not isinstance(value, dict):
        return None
    if "lc" in value and isinstance(value.get("kwargs"), dict):  # a serialized object
        return find_text(value["kwargs"], keys, depth + 1)
    for wrapper in ("inputs", "outputs"):
        if wrapper in value:
            return find_text(value[wrapper], keys, depth + 1)
    if isinstance(value.get("args"), list) and value["args"]:  # a traced function's arguments
        return find_text(value["args"][0], keys, depth + 1)
    for key in keys:
        if key in value:
            found = find_text(value[key], keys, depth + 1)
            if found:
                return found
    if "messages" in value:
        return find_text(value["messages"], keys, depth + 1)
    if len(value) == 1:  # a traced function's only argument, whatever its name
        return find_text(next(iter(value.values())), keys, depth + 1)
    return None


def as_doc(item: Any) -> Doc | None:
    if isinstance(item, str):
        return Doc(item)
    if not isinstance(item, dict):
        return None
    if "lc" in item and isinstance(item.get("kwargs"), dict):
        item = item["kwargs"]
    if isinstance(item.get("document"), dict):
        item = {**item, **item["document"]}
    if isinstance(item.get("node"), dict):  # a scored node
        item = {**item["node"], "score": item.get("score")}
    content = item.get("page_content", item.get("content", item.get("text", item.get("document"))))
    metadata = loads(item.get("metadata"))
    metadata = metadata if isinstance(metadata, dict) else None
    uri = item.get("doc_uri", item.get("id", item.get("uri", item.get("url"))))
    if uri is None and metadata is not None:
        uri = metadata.get("source")
    if content is None and uri is None:
        return None
    return Doc(
        content=content_text(content),
        doc_uri=None if uri is None else str(uri),
        score=as_float(item.get("score", item.get("relevance_score"))),
        metadata=metadata,
    )


def json_docs(value: Any, depth: int = 0) -> list[Doc] | None:
    """Find the list of documents in a JSON value (retriever output, `rag.context`)."""
    value = loads(value)
    if depth > 4:
        return None
    if isinstance(value, list):
        docs = [d for d in (as_doc(v) for v in value) if d is not None]
        return docs if docs or not value else None
    if isinstance(value, dict):
        for key in ("outputs", "documents", "docs", "context", "result", "output", "kwargs"):
            if key in value:
                found = json_docs(value[key], depth + 1)
                if found is not None:
                    return found
    return None


def normalized(text: str | None) -> str:
    return " ".join((text or "").split()).casefold()
