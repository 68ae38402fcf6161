"""A `Source` of the conventions table read from a span's attributes, or from an event's
fields (`event_fields`), by its encoding (`monitor/conventions/_entry.py` lists them): the
raw value (`raw`), and read as messages sent to a model (`messages_of`), the text a model
returned (`output_of`), documents (`docs_of`) or one piece of text (`text_of`)."""

from __future__ import annotations

from typing import Any

from monitor.conventions import (
    FIELDS,
    INDEXED,
    JSON,
    LISTED,
    LISTED_ROLES,
    MESSAGES,
    SCORED_NODES,
    TOOL_MESSAGES,
    WRAPPED,
    Source,
)
from monitor.extraction._span_values import (
    Doc,
    as_doc,
    as_float,
    chat_messages,
    content_text,
    indexed,
    json_docs,
    loads,
    role_of,
)
from monitor.shared.nesting import note_unread
from monitor.shared.placeholders import BadValue, fill
from monitor.spans import SpanEvent

_ABSENT: Any = object()


def event_fields(event: SpanEvent, bodies: tuple[str, ...]) -> dict[str, Any]:
    """An event's fields: its attributes, and the members of its body when that is a JSON
    object (the first of `bodies` it carries; the attributes win). A body that is no object
    stays the attribute it came as."""
    attributes = event.attributes
    for key in bodies:
        if key in attributes:
            body = loads(attributes[key])
            if isinstance(body, dict):
                return {**body, **{k: v for k, v in attributes.items() if k != key}}
            break
    return attributes


def listed_texts(value: Any) -> list[str]:
    """The texts of a `listed` value: `HEADER:\n["text", "text"]`, each text quoted as it is
    (not escaped)."""
    if not isinstance(value, str):
        return []
    _, _, listed = value.partition("\n")
    listed = listed.strip()
    if not (listed.startswith('["') and listed.endswith('"]')):
        return []
    return listed[2:-2].split('", "')


def _listed_messages(encoding: str, value: Any) -> list[tuple[str, str]]:
    """A `listed_roles` prompt's `"role":"text"` entries; a `listed` prompt's texts (no
    roles: the last is the user's message, those before it system and history)."""
    texts = listed_texts(value)
    if encoding == LISTED_ROLES:
        entries = [t.partition('":"') for t in texts]
        return [(role_of(r) or "user", text) for r, sep, text in entries if sep]
    return [("system", t) for t in texts[:-1]] + [("user", t) for t in texts[-1:]]


def fields_doc(fields: dict[str, Any], prefix: str) -> Doc | None:
    """One document in the fields `<prefix>.{document,content,id,score,distance,metadata}`
    (a distance kept in its metadata); None when there are none."""
    size = len(prefix) + 1
    found = {k[size:]: v for k, v in fields.items() if k.startswith(prefix + ".")}
    if not found:
        return None
    metadata = loads(found.get("metadata"))
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    if "distance" in found:
        metadata["distance"] = found["distance"]
    uri = found.get("id")
    return Doc(
        content=content_text(found.get("document", found.get("content"))),
        doc_uri=None if uri is None else str(uri),
        score=as_float(found.get("score")),
        metadata=metadata or None,
    )


def key_of(source: Source, attributes: dict[str, Any]) -> str | None:
    """The attribute a source names, its `{attribute}` placeholders filled in once from
    the span's own attributes (`app.{app.span.type}.input`,
    `monitor/shared/placeholders.py`); None when one is missing, or its value holds a
    placeholder itself (a bad value of that attribute, noted `placeholder`)."""
    try:
        return fill(source.key, attributes)
    except BadValue:
        note_unread("placeholder")
        return None


def present(source: Source, attributes: dict[str, Any]) -> bool:
    """Whether the span carries the source's attribute (for `indexed`, its first item)."""
    key = key_of(source, attributes)
    if key is None:
        return False
    if source.encoding == INDEXED:
        first = f"{key}.0"
        return any(k == first or k.startswith(first + ".") for k in attributes)
    if source.encoding == FIELDS:
        return any(k.startswith(key + ".") for k in attributes)
    return key in attributes


def raw(source: Source, attributes: dict[str, Any]) -> Any:
    """The source's value as the span carries it (its `field` taken out of a JSON object),
    or `_ABSENT`; an `indexed` source is never raw."""
    key = key_of(source, attributes)
    value = _ABSENT if key is None else attributes.get(key, _ABSENT)
    if value is _ABSENT or source.encoding in (INDEXED, FIELDS):
        return _ABSENT
    if source.field is not None:
        value = loads(value)
        value = value.get(source.field, _ABSENT) if isinstance(value, dict) else _ABSENT
    return value


def is_absent(value: Any) -> bool:
    return value is _ABSENT


def text_of(source: Source, attributes: dict[str, Any]) -> str | None:
    """One piece of text (a model's name, a conversation id, a query, a token count):
    a string (JSON string literals decoded) or a number's digits."""
    value = raw(source, attributes)
    if value is _ABSENT or value is None:
        return None
    value = loads(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return str(value)
    if source.encoding == WRAPPED and isinstance(value, dict):
        asked = value.get("query")  # a retriever's request object
        return content_text(asked.get("content")) if isinstance(asked, dict) else None
    return content_text(value) if isinstance(value, str | list) else None


def indexed_messages(
    attributes: dict[str, Any], prefix: str, default_role: str = "user"
) -> list[tuple[str, str]]:
    """`<prefix>.N.{role,content}` messages (`default_role` when one names none), or
    `<prefix>.N.message.{role,content}` and
    `message.contents.M.message_content.text`."""
    out = []
    for group in indexed(attributes, prefix + "."):
        role = role_of(group.get("message.role", group.get("role")))
        text = group.get("message.content", group.get("content"))
        if text is None:
            parts = indexed(group, "message.contents.")
            texts = [p.get("message_content.text") for p in parts if p.get("message_content.text")]
            text = "\n".join(str(t) for t in texts) if texts else None
        if role is None and "content" in group:
            role = default_role
        if role and text is not None:
            out.append((role, content_text(text) or ""))
    return out


def messages_of(source: Source, attributes: dict[str, Any]) -> list[tuple[str, str]]:
    """The (role, text) messages a model call was sent; a source with a `role` holds the
    text of one message."""
    if source.encoding == INDEXED:
        return indexed_messages(attributes, source.key)
    value = raw(source, attributes)
    if value is _ABSENT:
        return []
    if source.role is not None:
        text = content_text(value)
        return [] if text is None else [(source.role, text)]
    if source.encoding in (LISTED, LISTED_ROLES):
        return _listed_messages(source.encoding, value)
    if source.encoding == WRAPPED:  # a request object
        request = loads(value)
        return chat_messages(request.get("messages")) if isinstance(request, dict) else []
    return chat_messages(value)


def output_of(source: Source, attributes: dict[str, Any]) -> str | None:
    """The text a model call returned."""
    if source.encoding == INDEXED:
        messages = indexed_messages(attributes, source.key, default_role="assistant")
        texts = [t for r, t in messages if r == "assistant" and t]
        return "\n".join(texts) or None
    value = raw(source, attributes)
    if value is _ABSENT:
        return None
    if source.encoding == WRAPPED:  # a response object
        response = loads(value)
        message = response.get("message") if isinstance(response, dict) else None
        texts = [t for r, t in chat_messages([message]) if r == "assistant"]
        return "\n".join(texts) if texts else None
    if source.encoding == MESSAGES:
        return completion_text(value)
    if source.encoding == LISTED:
        return "\n".join(listed_texts(value)) or None
    return content_text(value)


def completion_text(value: Any) -> str | None:
    """A model's answer: assistant messages, a chat completion's `choices`, a chain's
    `{"generations": [[{"text", "message"}]]}`, or plain text."""
    completion = loads(value)
    if isinstance(completion, dict) and isinstance(completion.get("choices"), list):
        messages = [c.get("message") for c in completion["choices"] if isinstance(c, dict)]
        texts = [t for r, t in chat_messages(messages) if r == "assistant" and t]
        return "\n".join(texts) or None
    if isinstance(completion, dict) and isinstance(completion.get("generations"), list):
        batch = completion["generations"][:1]
        gens = batch[0] if batch and isinstance(batch[0], list) else batch
        texts = []
        for gen in gens:
            if not isinstance(gen, dict):
                continue
            text = gen.get("text")
            if not (isinstance(text, str) and text.strip()):
                message = chat_messages([gen.get("message")])
                text = next((t for r, t in message if r == "assistant"), None)
            if isinstance(text, str) and text.strip():
                texts.append(text)
        return "\n".join(texts) or None
    found = [t for r, t in chat_messages(completion) if r == "assistant"]
    if found:
        return "\n".join(found)
    return content_text(completion)


def indexed_docs(attributes: dict[str, Any], prefix: str) -> list[Doc]:
    """`<prefix>.N.document.{content,id,score,metadata}` or
    `<prefix>.N.{content,doc_uri,score}` documents; `<prefix>.N` alone is one text."""
    docs = []
    for group in indexed(attributes, prefix + "."):
        if "" in group:
            docs.append(Doc(str(group[""])))
            continue
        fields = {k.removeprefix("document."): v for k, v in group.items()}
        doc = as_doc(fields)
        if doc is not None:
            docs.append(doc)
    return docs


def scored_nodes(value: Any) -> list[Doc] | None:
    """A list of scored nodes (`{"node": {"text", "metadata", ...}, "score"}`, each maybe a
    JSON string), else None."""
    if isinstance(value, str) and not ('"node' in value and "score" in value):
        return None
    value = loads(value)
    if not isinstance(value, list) or not value:
        return None
    docs = []
    for item in value:
        item = loads(item)
        if not (isinstance(item, dict) and isinstance(item.get("node"), dict)):
            return None
        doc = as_doc(item)
        if doc is None or doc.content is None:
            return None
        docs.append(doc)
    return docs


def docs_of(source: Source, attributes: dict[str, Any]) -> list[Doc] | None:
    """The documents a source holds, in order; None when it holds none."""
    if source.encoding == INDEXED:
        return indexed_docs(attributes, source.key) or None
    if source.encoding == FIELDS:
        doc = fields_doc(attributes, source.key)
        return None if doc is None else [doc]
    value = raw(source, attributes)
    if value is _ABSENT:
        return None
    if source.encoding == SCORED_NODES:
        return scored_nodes(value)
    if source.encoding == LISTED:
        return [Doc(text) for text in listed_texts(value)] or None
    docs = json_docs(value)
    if docs is None and source.event is not None and source.encoding == JSON:
        doc = as_doc(loads(value))  # an event's one document
        return None if doc is None else [doc]
    if docs is None and source.encoding not in (JSON, WRAPPED):
        text = content_text(value)
        return [Doc(text)] if text else None
    return docs


def tool_messages_result(value: Any) -> Any:
    """The tool's result in a tool span's `gen_ai.output.messages`: its
    `tool_call_response` parts, else the messages' text."""
    messages = loads(value)
    if not isinstance(messages, list):
        return messages
    responses = [
        part.get("response", part.get("result"))
        for msg in messages
        if isinstance(msg, dict) and isinstance(loads(msg.get("parts")), list)
        for part in loads(msg.get("parts"))
        if isinstance(part, dict) and part.get("type") == "tool_call_response"
    ]
    if responses:
        return responses[0] if len(responses) == 1 else responses
    return [content for _, content in chat_messages(messages)] or None


def result_of(source: Source, attributes: dict[str, Any]) -> Any:
    """A tool call's result as its span carries it, or `_ABSENT`."""
    value = raw(source, attributes)
    if value is _ABSENT or source.encoding != TOOL_MESSAGES:
        return value
    result = tool_messages_result(value)
    return _ABSENT if result is None else result


def number_of(source: Source, attributes: dict[str, Any]) -> int | None:
    """A token count: a non-negative integer or its digits."""
    value = raw(source, attributes)
    if value is _ABSENT:
        return None
    value = loads(value) if isinstance(value, str) and value[:1] == '"' else value
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)  # not `²`, nor more digits than `int` reads
    number = as_float(value) if isinstance(value, float) else None
    return int(number) if number is not None and number >= 0 and number.is_integer() else None
