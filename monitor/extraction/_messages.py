"""One typed model of a model call's messages, written from the OpenTelemetry GenAI input and
output message schemas: a `Message` has a role (`system`, `user`, `assistant`, `tool`), its
parts and, for an output message, its finish reason; a part is one of the schema's kinds
(`Text`, `ToolCall`, `ToolCallResponse`, `ServerToolCall`, `ServerToolCallResponse`,
`Blob`, `File`, `Uri`, `Reasoning`, `Generic`). Media parts (`Blob`, `File`, `Uri`) and
`Generic` ones have a modality; those whose modality is `document` and that carry text are
the record's documents (`documents_of`).

Every native shape is read onto this model by the conventions table's part shapes
(`monitor/conventions/_parts.py`: which type value or key of a keyed block means which
kind, and where its text, name, id, bytes are), the user's first; nothing here knows a
provider. A part whose type no shape names is read by its structure: one with a text and a
name, id, source or title is a candidate document; any other is read for the texts under
`_TEXT_KEYS`, part inside part. Bytes (base64, hex, a list of byte values, a data URL) that
decode as UTF-8 text are read as text; others are media, with no text. What the table says
stands where content was withheld (`HIDDEN:non-empty`, `<redacted>`) is never content
(`is_placeholder`).

Reading is bounded as every structured value is: `PART_DEPTH` parts deep, `MAX_ITEMS` parts
a value (`monitor/shared/nesting.py`), linear in the value's size."""

from __future__ import annotations

import base64
import binascii
import functools
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from monitor.conventions import (
    BLOB,
    DOCUMENT,
    FILE,
    GENERIC,
    PART_TYPE_MEMBERS,
    REASONING,
    SERVER_TOOL_CALL,
    SERVER_TOOL_CALL_RESPONSE,
    TEXT_PART,
    TOOL_CALL,
    TOOL_CALL_RESPONSE,
    URI,
    PartShape,
)
from monitor.extraction._decoding import as_float, loads
from monitor.extraction._table import current
from monitor.shared.nesting import MAX_ITEMS

# How deep the parts of a message (and a tool's result) are read: blocks inside blocks
# inside a message; deeper is not read.
PART_DEPTH = 6
# Where a part of no known shape keeps its texts (a part of parts, a block of blocks, a
# `{"text": {"value": ...}}`).
_TEXT_KEYS = ("text", "content", "parts", "blocks", "value")
_ENCODED_LISTS = frozenset({"parts", "blocks"})
# What names a part of no known shape that holds a text: it is a candidate document.
_NAMING_KEYS = ("source", "title", "name", "id", "uri", "url", "filename", "file_id")
# Where a message keeps its role and its parts.
_ROLE_KEYS = ("role", "type")
_BODIES = ("parts", "content", "blocks")
_ROLES = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}
_HEX = frozenset(string.hexdigits)
# Media subtypes that are text whatever their top type (`application/json`).
_TEXT_SUBTYPES = ("json", "xml", "csv", "markdown", "yaml", "javascript")
_BASE64 = frozenset(string.ascii_letters + string.digits + "+/=-_")
# Placeholders are short: a longer text is never one (and pays no folding).
_LONGEST_PLACEHOLDER = 64


@dataclass(slots=True)
class Doc:
    """A document of a record: its text, its name (`doc_uri`), score and metadata."""

    content: str | None
    doc_uri: str | None = None
    score: float | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Text:
    content: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str | None
    name: str | None
    arguments: Any = None


@dataclass(frozen=True, slots=True)
class ToolCallResponse:
    id: str | None
    response: Any = None
    name: str | None = None  # the tool's, where the shape carries it beside the id


@dataclass(frozen=True, slots=True)
class ServerToolCall:
    id: str | None
    name: str | None
    server_tool_call: Any = None


@dataclass(frozen=True, slots=True)
class ServerToolCallResponse:
    id: str | None
    server_tool_call_response: Any = None
    # what a hosted search returned, read as documents (`PartShape.items`)
    results: tuple[Doc, ...] = ()


@dataclass(frozen=True, slots=True)
class Blob:
    """Inline data: `content` the bytes; `text` what they (or a text field beside them)
    read as, when they are text."""

    mime_type: str | None
    modality: str | None
    content: bytes | None
    text: str | None = None
    name: str | None = None
    title: str | None = None


@dataclass(frozen=True, slots=True)
class File:
    mime_type: str | None
    modality: str | None
    file_id: str | None
    text: str | None = None
    name: str | None = None
    title: str | None = None


@dataclass(frozen=True, slots=True)
class Uri:
    mime_type: str | None
    modality: str | None
    uri: str | None
    text: str | None = None
    name: str | None = None
    title: str | None = None


@dataclass(frozen=True, slots=True)
class Reasoning:
    content: str | None


@dataclass(frozen=True, slots=True)
class Generic:
    """A part of another kind: `generic_type` what it says it is, `fields` its members;
    `text`, `name`, `title`, `modality` as its shape or its structure says."""

    generic_type: str | None
    fields: Mapping[str, Any] = field(default_factory=dict)
    text: str | None = None
    name: str | None = None
    title: str | None = None
    modality: str | None = None


Part = (
    Text
    | ToolCall
    | ToolCallResponse
    | ServerToolCall
    | ServerToolCallResponse
    | Blob
    | File
    | Uri
    | Reasoning
    | Generic
)
_MEDIA = (Blob, File, Uri, Generic)


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    parts: tuple[Part, ...]
    finish_reason: str | None = None

    @property
    def text(self) -> str | None:
        """The message's words: its text parts (and those of parts of no known shape that
        are no document), joined by newlines."""
        texts = [t for t in (text_of(p) for p in self.parts) if t]
        return "\n".join(texts) if texts else None


def role_of(value: Any) -> str | None:
    return _ROLES.get(str(value).lower()) if value is not None else None


# -- values at a shape's paths --------------------------------------------------------------


@functools.lru_cache(maxsize=512)
def _steps(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def _at(body: Any, path: str) -> Any:
    for step in _steps(path):
        if not isinstance(body, dict):
            return None
        body = body.get(step)
    return body


def _first(body: Any, paths: tuple[str, ...]) -> Any:
    for path in paths:
        found = _at(body, path)
        if found is not None:
            return found
    return None


def _name(body: Any, paths: tuple[str, ...]) -> str | None:
    for path in paths:
        found = _at(body, path)
        if isinstance(found, str) and found:
            return found
        if isinstance(found, int) and not isinstance(found, bool):
            return str(found)
    return None


# -- bytes ----------------------------------------------------------------------------------


def decoded_text(data: Any) -> tuple[bytes | None, str | None]:
    """Bytes as a part carries them, and their text when they are UTF-8 text: base64 (a
    data URL's too), hex, a list of byte values; a string that is no encoding (words with
    spaces, letters no encoding uses) is the text itself (a document sent as text where
    bytes may go). A data field is bytes first: a lone word that decodes is taken so."""
    raw: bytes | None = None
    if isinstance(data, list) and data and all(isinstance(b, int) and 0 <= b < 256 for b in data):
        raw = bytes(data)
    elif isinstance(data, str):
        text = data
        if text.startswith("data:"):
            _, comma, text = text.partition(",")
            if not comma:
                return None, None
        compact = "".join(text.split())
        if not compact or " " in text.strip():
            return None, data if compact else None  # words, not an encoding
        if len(compact) % 2 == 0 and _HEX.issuperset(compact):
            raw = bytes.fromhex(compact)
        elif len(compact) % 4 == 0 and _BASE64.issuperset(compact):
            try:
                raw = base64.b64decode(compact.replace("-", "+").replace("_", "/"), validate=True)
            except (binascii.Error, ValueError):
                raw = None
        if raw is None:
            return None, data if not data.startswith("data:") else None
    if raw is None:
        return None, None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw, None  # media or a binary document (a PDF): no text to read
    readable = all(c.isprintable() or c in "\t\n\r" for c in text)
    return raw, text if readable and text.strip() else None


def _binary(mime: str | None) -> bool:
    """Whether a media type names bytes that are no text (an image, a PDF); a format
    without a type (`txt`, `pdf`) leaves it to the bytes."""
    if not mime or "/" not in mime:
        return False
    top, _, sub = mime.lower().partition("/")
    sub = sub.partition(";")[0]
    return top != "text" and not sub.endswith(_TEXT_SUBTYPES)


def _modality(mime: str | None) -> str | None:
    """A modality from a media type: `image/*`, `audio/*`, `video/*` are theirs; any
    other named type (text, a PDF, a table) is a document."""
    if not mime:
        return None
    top = mime.partition("/")[0].lower()
    return top if top in ("image", "audio", "video") else DOCUMENT


# -- parts ----------------------------------------------------------------------------------


def _texts(value: Any, depth: int, budget: list[int]) -> str | None:
    """The text at a shape's text path: a string, or the texts of the parts it holds."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, list):
        found = [t for t in (_part_text(p, depth + 1, budget) for p in value) if t]
        return "\n".join(found) if found else None
    return None


def _build(
    shape: PartShape, body: Any, type_value: str | None, depth: int, budget: list[int]
) -> Part | None:
    """A part of `shape` from its body, or None when the body holds none of its fields."""
    kind = shape.kind
    if isinstance(body, str):  # a keyed block whose value is its text
        return Text(body) if kind == TEXT_PART else None
    if not isinstance(body, dict):
        return None
    text = _texts(_first(body, shape.text), depth, budget) if shape.text else None
    if kind == TEXT_PART:
        return Text(text) if text is not None else None
    if kind == REASONING:
        return Reasoning(text) if text is not None else None
    if kind == TOOL_CALL:
        return ToolCall(
            _name(body, shape.id), _name(body, shape.name), _first(body, shape.arguments)
        )
    if kind == TOOL_CALL_RESPONSE:
        return ToolCallResponse(
            _name(body, shape.id), _first(body, shape.response), _name(body, shape.name)
        )
    if kind == SERVER_TOOL_CALL:
        return ServerToolCall(
            _name(body, shape.id), _name(body, shape.name), _first(body, shape.arguments)
        )
    if kind == SERVER_TOOL_CALL_RESPONSE:
        return ServerToolCallResponse(
            _name(body, shape.id), _first(body, shape.response), _results(shape, body)
        )
    name = _name(body, shape.name)
    title = _name(body, shape.title)
    modality_at = _name(body, shape.modality_at)
    if kind == GENERIC:
        generic = _name(body, shape.generic_type) or type_value
        modality = shape.modality or modality_at
        if modality is None and text and (name or title):
            modality = DOCUMENT  # a text with a name: a candidate document
        return Generic(generic, body, text, name, title, modality)
    # a media part: bytes, else a URI, else a file id; its text when it has one
    mime = _name(body, shape.mime_type)
    data = _first(body, shape.data) if shape.data else None
    if mime is None and isinstance(data, str) and data.startswith("data:"):
        mime = data[5:].partition(",")[0].partition(";")[0] or None  # a data URL's type
    modality = shape.modality or modality_at or _modality(mime)
    raw, decoded = decoded_text(data) if data is not None else (None, None)
    if _binary(mime):
        decoded = None  # a PDF's or an image's bytes, whatever they happen to decode as
    text = text if text is not None else decoded
    if raw is not None or (text is not None and kind == BLOB):
        content = raw if raw is not None else (text or "").encode()
        return Blob(mime, modality, content, text, name, title)
    uri = _name(body, shape.uri)
    if uri is not None:
        return Uri(mime, modality, uri, text, name, title)
    file_id = _name(body, shape.file_id)
    if file_id is not None or text is not None:
        return File(mime, modality, file_id, text, name, title)
    if data is None and mime is None:
        return None  # none of this shape's fields: another shape's part
    if kind == FILE:
        return File(mime, modality, None, None, name, title)
    if kind == URI:
        return Uri(mime, modality, None, None, name, title)
    return Blob(mime, modality, None, None, name, title)


def _results(shape: PartShape, body: dict[str, Any]) -> tuple[Doc, ...]:
    """The documents a hosted search's part holds (`PartShape.items`), in order."""
    if shape.items is None:
        return ()
    items = loads(body.get(shape.items))
    docs = []
    for item in items[:MAX_ITEMS] if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        text = _texts(_first(item, shape.text), 0, [MAX_ITEMS])
        if not (text and text.strip()):
            continue
        attributes = item.get("attributes")
        docs.append(
            Doc(
                text,
                _name(item, shape.name),
                score=as_float(_first(item, shape.score)),
                metadata=dict(attributes) if isinstance(attributes, dict) and attributes else None,
            )
        )
    return tuple(docs)


def type_of(part: dict[str, Any]) -> str | None:
    """What a part says it is (its `PART_TYPE_MEMBERS` value)."""
    for member in PART_TYPE_MEMBERS:
        kind = part.get(member)
        if kind is not None:
            return kind if isinstance(kind, str) else None
    return None


def read_part(value: Any, depth: int = 0, budget: list[int] | None = None) -> Part | None:
    """One part on the model: by the shapes of its type value (a GenAI generic part's
    `generic_type` first), or of the key of a keyed block, in table order, the first that
    finds its fields; else by its structure."""
    if isinstance(value, str):
        return Text(value)
    if not isinstance(value, dict):
        return None
    budget = [MAX_ITEMS] if budget is None else budget
    table = current().table
    kind = type_of(value)
    if kind is not None:
        shapes = table.part_types.get(kind, ())
        for shape in shapes:
            if shape.kind == GENERIC and shape.generic_type:
                named = _name(value, shape.generic_type)
                for own in table.part_types.get(named, ()) if named else ():
                    part = _build(own, value, named, depth, budget)
                    if part is not None:
                        return part
            part = _build(shape, value, kind, depth, budget)
            if part is not None:
                return part
        if shapes:
            return None
        return _by_structure(value, kind, depth, budget)
    for key in value:
        keyed = table.part_keys.get(key)
        for shape in keyed or ():
            part = _build(shape, value[key], None, depth, budget)
            if part is not None:
                return part
    return _by_structure(value, None, depth, budget)


def _by_structure(
    value: dict[str, Any], kind: str | None, depth: int, budget: list[int]
) -> Part | None:
    """A part of no known shape: its text at once (`content`, `text`), else the texts of
    the parts it holds; with a name, id, source or title beside its text, a candidate
    document; bytes beside a media type, media."""
    text: str | None = None
    for key in ("content", "text"):
        inner = value.get(key)
        if isinstance(inner, str):
            text = inner
            break
    if kind is None and text is not None and not _named(value, ("source", "title")):
        return Text(text)
    if text is None:
        budget[0] -= 1
        if depth >= PART_DEPTH or budget[0] < 0:
            return None
        text = _wrapped_text(value, depth, budget)
    names = _NAMING_KEYS if kind is not None else ("source", "title")
    name = _named(value, names)
    title = value.get("title") if isinstance(value.get("title"), str) else None
    modality = DOCUMENT if text and text.strip() and name else None
    return Generic(kind, value, text, name, title, modality)


def _named(value: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        found = value.get(key)
        if isinstance(found, str) and found:
            return found
    return None


def _wrapped_text(part: dict[str, Any], depth: int, budget: list[int]) -> str | None:
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


def text_of(part: Part | None) -> str | None:
    """A part's words as part of its message: a text part's; a part of no known shape
    that is no document, the texts it wraps. Media, documents, tool calls and their
    results, reasoning: none (a document is the record's; a tool's result is context of
    its own: `_tool_results.py`)."""
    if isinstance(part, Text):
        return None if is_placeholder(part.content) else part.content
    if isinstance(part, Generic) and part.modality is None and part.text:
        return None if is_placeholder(part.text) else part.text
    return None


def _part_text(part: Any, depth: int, budget: list[int]) -> str | None:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return None
    # The common case, a plain text part, pays one table look-up.
    kind = type_of(part)
    if kind is None:
        plain = not _named(part, ("source", "title"))  # else a candidate document
    else:
        plain = kind in current().table.text_types
    if plain:
        for key in ("content", "text"):
            inner = part.get(key)
            if isinstance(inner, str):
                return None if is_placeholder(inner) else inner
    return text_of(read_part(part, depth, budget))


def parts_text(parts: list[Any]) -> str | None:
    """The words of a message's parts, joined by newlines."""
    budget = [MAX_ITEMS]
    texts = [t for t in (_part_text(p, 0, budget) for p in parts) if t]
    return "\n".join(texts) if texts else None


def part_text(part: Any) -> str | None:
    """The words one part adds to its message (`text_of`)."""
    return _part_text(part, 0, [MAX_ITEMS])


def documents_of(part: Part | None) -> list[Doc]:
    """The record's documents one part gives: a document-modality part with text (named by
    its name, else its title), or a hosted search's results."""
    if isinstance(part, ServerToolCallResponse):
        return list(part.results)
    if not isinstance(part, _MEDIA) or part.modality != DOCUMENT:
        return []
    text = part.text
    if not (text and text.strip()) or is_placeholder(text):
        return []
    name = part.name or part.title
    title = part.title
    metadata = {"title": title} if title is not None and title != name else None
    return [Doc(text, name, metadata=metadata)]


def read_messages(value: Any) -> list[Message]:
    """Chat messages (`[{role, parts|content|blocks}]`, JSON or structured, a GenAI output
    message's `finish_reason` kept) on the model; a value that is no list of messages
    gives none. Bounded by `MAX_ITEMS` messages and parts."""
    value = loads(value)
    if isinstance(value, dict):
        inner = value.get("messages") if "role" not in value else None
        value = inner if isinstance(inner, list) else [value]
    if not isinstance(value, list):
        return []
    budget = [MAX_ITEMS]
    out = []
    for message in value[:MAX_ITEMS]:
        if not isinstance(message, dict):
            continue
        role = role_of(next((message[k] for k in _ROLE_KEYS if message.get(k) is not None), None))
        if role is None:
            continue
        body = loads(next((message[k] for k in _BODIES if message.get(k) is not None), None))
        items = body if isinstance(body, list) else [body] if body is not None else []
        parts = tuple(p for p in (read_part(i, 1, budget) for i in items[:MAX_ITEMS]) if p)
        reason = message.get("finish_reason")
        out.append(Message(role, parts, reason if isinstance(reason, str) else None))
    return out


def is_placeholder(text: str | None) -> bool:
    """Whether a text is what an instrumentation writes where it withheld the content
    (the table's `placeholders`)."""
    if not text or len(text) > _LONGEST_PLACEHOLDER:
        return False
    table = current().table
    if not (table.content_placeholders or table.placeholder_prefixes):
        return False
    folded = text.strip().casefold()
    return folded in table.content_placeholders or folded.startswith(table.placeholder_prefixes)
