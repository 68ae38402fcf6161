"""What the span readers share: the convention-neutral forms a span is read into (`Doc`,
`Retrieval`, `Generation`) and the decoding of attribute values every convention uses
(JSON strings, `prefix.N.key` attributes, chat messages, documents, a question or an
answer inside a chain's input or output).

The readers (`_retrieval_spans.py`, `_model_call_spans.py`, `_tool_results.py`,
`_request_spans.py`) each look at one `Span` and return what it says in these forms;
`_extraction_rule.py` then joins the spans of a trace into records.

Where each convention writes each part is the conventions table
(`monitor/conventions/_shipped.py`, read through `_sources.py`); here are the shapes those
values take, whatever writes them: JSON text, chat messages (GenAI `parts`, OpenAI-style
`content`, LlamaIndex's `blocks`, LangChain's serialized and `dumpd` forms; a message's text
is every text its parts hold, at any depth: `content_text`), documents (`page_content`, `content`,
`text`; LlamaIndex's `NodeWithScore`), and a question or an answer inside a chain's input or
output (a question field, a traced function's arguments, user messages; never an object's
repr, such as LlamaIndex's prompt templates).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from monitor.shared.nesting import MAX_DEPTH, MAX_ITEMS, note_unread, within_depth
from monitor.spans import Span

_ROLES = {
    "system": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
    "developer": "developer",
}
# `<NodeWithScore(node=...`, `<dspy.clients.lm.LM object at 0x...>`): frameworks put these where text is expected (LlamaIndex's
# `predict` input is its prompt template, Haystack's messages are `ChatMessage(...)`).
# Never a question or an answer.
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
    "query_str",  # LlamaIndex's QueryBundle
)
ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content", "generation")
# How deep the parts of a message (and a tool's result) are read: blocks inside blocks
# inside a message; deeper is not read.
PART_DEPTH = 6
# Part kinds that hold no words of the message: media and files (their data is no text),
# tool calls and their results (a tool's result is context: `_tool_results.py`), a model's
# reasoning; documents by kind are the record's documents (`_message_parts.py`).
DOCUMENT_KINDS = frozenset({"document", "search_result", "file_search_call"})
NOT_MESSAGE_TEXT = DOCUMENT_KINDS | frozenset(
    {
        *("image", "image_url", "input_image", "audio", "input_audio", "video"),
        *("file", "input_file", "blob", "binary", "uri"),
        *("tool_call", "tool_use", "function_call", "server_tool_call", "server_tool_use"),
        *("tool-call", "tool-result", "mcp_tool_use", "mcp_call", "computer_call"),
        *("tool_result", "tool_call_response", "function_call_output", "server_tool_call_response"),
        *("mcp_tool_result", "web_search_tool_result", "web_search_call"),
        *("reasoning", "thinking", "redacted_thinking"),
    }
)
# A part that carries media data whatever its kind says (`{"data", "mime_type"}`).
_MEDIA_KEYS = frozenset(
    {"mime_type", "mimeType", "media_type", "mediaType", "image_url", "input_audio"}
)
# Where a part that is not plain text keeps its texts (a part of parts, a block of blocks,
# OpenAI's `{"text": {"value": ...}}`).
_TEXT_KEYS = ("text", "content", "parts", "blocks", "value")
_ENCODED_LISTS = frozenset({"parts", "blocks"})


@dataclass(slots=True)
class Doc:
    content: str | None
    doc_uri: str | None = None
    score: float | None = None
    metadata: dict[str, Any] | None = None


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


def loads(value: Any) -> Any:
    """A JSON-looking string parsed; anything else comes back unchanged. Every reader of
    an attribute's JSON goes through here: JSON nested deeper than `MAX_DEPTH` stays the
    text it came as (noted `too_deep`), so no reader or serialiser ever walks it."""
    if not isinstance(value, str):
        return value
    stripped = value.lstrip()
    if stripped[:1] == '"' and stripped.rstrip().endswith('"') and len(stripped) > 1:
        try:  # a JSON string (Genkit's genkit:input of a flow called with text)
            text = json.loads(stripped)
        except ValueError:
            return value
        return text if isinstance(text, str) else value
    if stripped[:1] not in ("{", "["):
        return value
    try:
        parsed = orjson.loads(stripped)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit"):
            note_unread("too_deep")
            return value
        try:
            # What orjson refuses and Python's json reads: NaN, Infinity, lone
            # surrogates. (orjson reads integers beyond 64 bits as floats.)
            parsed = json.loads(stripped)
        except RecursionError:
            note_unread("too_deep")
            return value
        except ValueError:
            return value  # not JSON: text
    return parsed if bounded(parsed, stripped) else value


def bounded(parsed: Any, text: str) -> bool:
    """Whether a value parsed from `text` is nested within `MAX_DEPTH` (else noted
    `too_deep`); text with few brackets needs no walk."""
    if text.count("[") + text.count("{") + text.count("(") <= MAX_DEPTH or within_depth(parsed):
        return True
    note_unread("too_deep")
    return False


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
    every text its parts hold, at any depth (`_part_text`)."""
    value = loads(value)
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        budget = [MAX_ITEMS]
        texts = [t for t in (_part_text(p, 0, budget) for p in value) if t]
        return "\n".join(texts) if texts else None
    if isinstance(value, dict):
        return _part_text(value, 0, [MAX_ITEMS])
    return str(value)


def part_kind(part: dict[str, Any]) -> str | None:
    """What a message part says it is: its `type` (GenAI, OpenAI, Anthropic, the Vercel AI
    SDK) or `block_type` (LlamaIndex)."""
    kind = part.get("type", part.get("block_type"))
    return kind if isinstance(kind, str) else None


def _part_text(part: Any, depth: int, budget: list[int]) -> str | None:
    """The text of one part: a plain text part at once (the common case pays nothing
    more); any other part's texts under whatever it calls them (`_TEXT_KEYS`), at any
    depth, bounded by `PART_DEPTH` and, over the whole content, `MAX_ITEMS` parts. Parts
    whose kind holds no words of the message are left out (`NOT_MESSAGE_TEXT`)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return None
    kind = part.get("type")  # `part_kind`, inline: every message part comes here
    if kind is None:
        kind = part.get("block_type")
    if kind is None or kind == "text" or kind == "input_text" or kind == "output_text":
        text = part.get("content")
        if isinstance(text, str):
            return text
        text = part.get("text")
        if isinstance(text, str):
            return text
    if not isinstance(kind, str | None):
        kind = None
    if (kind is not None and kind in NOT_MESSAGE_TEXT) or _MEDIA_KEYS & part.keys():
        return None
    budget[0] -= 1
    if depth >= PART_DEPTH or budget[0] < 0:
        return None
    for key in _TEXT_KEYS:
        inner = part.get(key)
        if key in _ENCODED_LISTS and isinstance(inner, str):
            inner = loads(inner)  # a list of parts written as JSON text
        if isinstance(inner, str):
            return inner if inner.strip() else None
        if isinstance(inner, dict):
            inner = [inner]
        if isinstance(inner, list):
            texts = [t for t in (_part_text(p, depth + 1, budget) for p in inner) if t]
            if texts:
                return "\n".join(texts)
    return None


def role_of(value: Any) -> str | None:
    return _ROLES.get(str(value).lower()) if value is not None else None


# Where a message keeps its content: GenAI's `parts`, OpenAI's `content`, LlamaIndex's
# `blocks`.
_BODIES = ("parts", "content", "blocks")


def chat_messages(value: Any) -> list[tuple[str, str]]:
    """GenAI / OpenAI / LlamaIndex style messages: `[{role, parts|content|blocks}]` (JSON or
    structured)."""
    value = loads(value)
    if isinstance(value, str):
        return [("user", value)]
    if isinstance(value, dict):
        # LangChain's `{"messages": [...]}` (a graph's state, a chat model's input)
        inner = value.get("messages") if "role" not in value else None
        value = inner if isinstance(inner, list) else [value]
    if not isinstance(value, list):
        return []
    if value and isinstance(value[0], list):  # LangChain batches: [[messages]]
        value = value[0]
    out = []
    for msg in value:
        if isinstance(msg, dict):
            kind = None
            if "lc" in msg and isinstance(msg.get("kwargs"), dict):  # serialized LangChain
                kind = _lc_message_type(msg.get("id"))
                msg = msg["kwargs"]
            elif isinstance(msg.get("data"), dict) and "content" not in msg:
                msg = {**msg["data"], "type": msg.get("type")}  # LangChain's `dumpd` form
            role = role_of(msg.get("role") or msg.get("type") or kind)
            text = content_text(next((msg[k] for k in _BODIES if msg.get(k) is not None), None))
            if role and text is not None:
                out.append((role, text))
    return out


def _lc_message_type(path: Any) -> str | None:
    """`human` from a serialized LangChain constructor's `id`
    (`["langchain", "schema", "messages", "HumanMessage"]`)."""
    if isinstance(path, list) and path and isinstance(path[-1], str):
        name = path[-1].removesuffix("Chunk")
        return name.removesuffix("Message").lower() if name.endswith("Message") else None
    return None


def as_float(value: Any) -> float | None:
    """A finite number from a number or numeric string; anything else is None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


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
    if "lc" in value and isinstance(value.get("kwargs"), dict):  # serialized LangChain object
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
    if isinstance(item.get("node"), dict):  # LlamaIndex's NodeWithScore
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
