"""How a provider's or framework's native message parts map onto the OpenTelemetry GenAI
message model (`monitor/extraction/_messages.py`), as data: which `type` value, or which
key of a keyed block, means which part kind, and where such a part keeps its text, name,
id, arguments, response, bytes, media type and URI. A convention entry carries the shapes
of the messages it writes (`Convention.part_shapes`); a user's `extraction.conventions`
entry adds its own (`parts:`), read before the shipped ones. A shape no entry names is read
by its structure (`_messages.py`).

Paths are dotted member names (`source.data`); the first path that holds a value wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# The GenAI part kinds (its input and output messages' JSON schemas).
TEXT_PART: Final = "text"
TOOL_CALL: Final = "tool_call"
TOOL_CALL_RESPONSE: Final = "tool_call_response"
SERVER_TOOL_CALL: Final = "server_tool_call"
SERVER_TOOL_CALL_RESPONSE: Final = "server_tool_call_response"
BLOB: Final = "blob"
FILE: Final = "file"
URI: Final = "uri"
REASONING: Final = "reasoning"
GENERIC: Final = "generic"
PART_KINDS = frozenset(
    {
        TEXT_PART,
        TOOL_CALL,
        TOOL_CALL_RESPONSE,
        SERVER_TOOL_CALL,
        SERVER_TOOL_CALL_RESPONSE,
        BLOB,
        FILE,
        URI,
        REASONING,
        GENERIC,
    }
)
# The members that say a part's type: the GenAI schema's, LlamaIndex's blocks'.
PART_TYPE_MEMBERS = ("type", "block_type")
# The modality of a part that is a document: its text is one of the record's documents.
DOCUMENT: Final = "document"


@dataclass(frozen=True, slots=True)
class PartShape:
    """One native part shape. `types`: values of the part's type member (`type`,
    `block_type`) that mean it; or `key`: the one member of a keyed block that names it
    (`{"document": {...}}`), whose value is the part's body (a string: its text). `kind`:
    the GenAI part kind (`PART_KINDS`); a media kind (`blob`, `file`, `uri`) is the one
    its fields show (bytes, else a URI, else a file id). `modality`: the part's modality
    when the shape says it (`document`: its text is a document of the record), else
    `modality_at` says where. `items`: a list of documents the part holds (a hosted
    search's results), each read for `text` and `name`."""

    kind: str
    types: frozenset[str] = frozenset()
    key: str | None = None
    text: tuple[str, ...] = ()
    name: tuple[str, ...] = ()
    title: tuple[str, ...] = ()
    id: tuple[str, ...] = ()
    arguments: tuple[str, ...] = ()
    response: tuple[str, ...] = ()
    data: tuple[str, ...] = ()  # bytes: base64, hex, a list of byte values, or text
    mime_type: tuple[str, ...] = ()
    uri: tuple[str, ...] = ()
    file_id: tuple[str, ...] = ()
    modality: str | None = None
    modality_at: tuple[str, ...] = ()
    generic_type: tuple[str, ...] = ()
    items: str | None = None
    score: tuple[str, ...] = ()


def shape(kind: str, *types: str, **where: object) -> PartShape:
    """A shape known by its type values (`PartShape`'s other fields by name)."""
    return PartShape(kind, frozenset(types), **where)  # type: ignore[arg-type]


def keyed(kind: str, key: str, **where: object) -> PartShape:
    """A shape known by the one key of a keyed block."""
    return PartShape(kind, key=key, **where)  # type: ignore[arg-type]
