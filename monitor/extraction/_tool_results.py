"""Tool results: what a tool returned to the model is context. Read from tool call spans
(a span each convention declares a tool: GenAI's `execute_tool`, ...) or, when none
carries a result, from the tool messages in a model call's input."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from monitor.conventions import INDEXED, MESSAGES
from monitor.extraction._messages import ToolCall, ToolCallResponse, read_messages
from monitor.extraction._sources import is_absent, present, raw, result_of, text_of
from monitor.extraction._span_roles import TOOL, content_events, sources, span_role
from monitor.extraction._span_values import (
    Doc,
    Retrieval,
    as_doc,
    bounded,
    indexed,
    is_repr,
    loads,
    role_of,
)
from monitor.extraction._table import current
from monitor.spans import Span

_NO_TEXT_TYPES = frozenset(
    {"image", "image_url", "input_image", "audio", "input_audio", "file", "blob", "binary"}
)
_AT_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+>\s*\Z")
_RESULT_KEYS = (
    "raw_output",  # a tool output object's own return value, before its text
    "blocks",  # ... and its content blocks
    "documents",
    "docs",
    "results",
    "result",
    "output",
    "outputs",
    "context",
    "data",
)
# Fields whose text may hold the tool's structured return value.
_TEXT_ENVELOPES = frozenset({"raw_output", "content", "text"})
_DOC_IDS = frozenset({"id", "doc_uri", "uri", "url"})
# Tool results are nested at most this deep (envelopes, then documents); deeper is not read.
_MAX_DEPTH = 6


def parsed_value(value: Any) -> Any:
    """A JSON value or a Python literal held in a string; anything else unchanged. Tool
    messages, MCP text parts and content blocks carry a tool's return value as text."""
    return _literal(loads(value))


def _literal(value: Any) -> Any:
    """A Python literal (`['a', 'b']`, `{'text': ...}`) that is not JSON: what frameworks that
    `str()` a tool's return value send. Anything else comes back unchanged."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{") and len(value) < 1 << 20:
        text = value.strip()
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return value
        return parsed if bounded(parsed, text) else value
    return value


def _tool_items(value: Any, depth: int) -> list[Doc]:
    if value is None or depth > _MAX_DEPTH:
        return []
    if isinstance(value, bool | int | float):
        return [Doc(json.dumps(value))]  # a calculator's or a clock's value is evidence too
    if isinstance(value, str):
        text = value.strip()
        if not text or (text.startswith("<") and (is_repr(text) or _AT_ADDRESS.search(text))):
            return []  # an object's repr (`<PIL.Image.Image ... at 0x7f...>`), not its content
        return [Doc(text)]
    if isinstance(value, list):
        return [doc for item in value for doc in _tool_items(parsed_value(item), depth + 1)]
    if not isinstance(value, dict):
        return []
    kind = value.get("type")  # any JSON value: a list is no type
    if (isinstance(kind, str) and kind in _NO_TEXT_TYPES) or (
        "data" in value and ({"mime_type", "mimeType", "media_type"} & value.keys())
    ):
        return []  # an image, audio or file: nothing a text evaluator can read
    if "lc" in value and isinstance(value.get("kwargs"), dict):  # a serialized ToolMessage
        return _tool_items(value["kwargs"], depth + 1)
    for key in (*_RESULT_KEYS, "content", "text"):
        # `{"documents": [...]}`, MCP's `{"content": [...]}`, a ToolOutput's `raw_output`,
        # a tool message or content block whose text is a JSON list of documents
        inner = parsed_value(value.get(key)) if key in _TEXT_ENVELOPES else value.get(key)
        if isinstance(inner, list):
            return _tool_items(inner, depth + 1)
        if isinstance(inner, dict) and key in _TEXT_ENVELOPES and not _DOC_IDS & value.keys():
            return _tool_items(inner, depth + 1)  # an MCP text part holding one JSON object
    doc = as_doc(value)
    if doc is not None and doc.content:
        return [doc]
    for key in _RESULT_KEYS:
        if value.get(key) is not None:
            return _tool_items(parsed_value(value[key]), depth + 1)
    # An object with no text field (`{"city": "Oslo", "temp_c": 4}`): its JSON is what the
    # answer states.
    return [Doc(json.dumps(value, ensure_ascii=False, default=str))] if value else []


def tool_docs(value: Any, tool: str | None) -> list[Doc]:
    """A tool's result as documents: a JSON (or Python-literal) list of documents or
    strings, an object with a text/content field or a list of them under a result key, a
    plain string; numbers and objects without text as their JSON text; images, audio,
    files and empty results as nothing. Each document's source (`doc_uri`, unless it names
    its own) is the tool's name, also kept in `metadata.tool`."""
    docs = _tool_items(parsed_value(value), 0)
    for doc in docs:
        if tool:
            doc.metadata = {**(doc.metadata or {}), "tool": tool}
            if doc.doc_uri is None:
                doc.doc_uri = tool
    return docs


def _event_result(span: Span) -> Any:
    """What the tool returned, in the last of the span's events that carries it where a
    convention says (a tool span's `gen_ai.choice`)."""
    for event_sources, fields in reversed(list(content_events(span, "tool_result"))):
        for source, _ in event_sources:
            value = raw(source, fields)
            if not is_absent(value):
                return value
    return None


def read_tool(span: Span) -> Retrieval | None:
    """The result of a tool call span, or None if the span is not one or carries no
    result (content capture off). Its own result, where its convention writes it
    (`tool_result` in the conventions table: `gen_ai.tool.call.result`, `output.value`,
    `gen_ai.output.messages`, ...), else in its events (a `gen_ai.choice`). Never
    its arguments (`gen_ai.tool.message` events, `gen_ai.input.messages`)."""
    if span_role(span) != TOOL:
        return None
    a = span.attributes
    name = next((n for s in sources(span, "tool_name") if (n := text_of(s, a))), None)
    result = next(
        (r for s in sources(span, "tool_result") if not is_absent(r := result_of(s, a))), None
    )
    if result is None and span.events:
        result = _event_result(span)
    if result is None:
        return None
    tool = name or span.name
    return Retrieval(span, None, tool_docs(result, tool), tool=tool)


def _call_names(calls: Any, names: dict[str, str]) -> None:
    """Tool call ids → tool names from an assistant message's `tool_calls`."""
    for call in loads(calls) if isinstance(loads(calls), list) else []:
        if isinstance(call, dict) and call.get("id") is not None:
            function = call.get("function")
            name = function.get("name") if isinstance(function, dict) else call.get("name")
            if name:
                names[str(call["id"])] = str(name)


def _message_tool_results(value: Any) -> list[Doc]:
    """Tool results in chat messages (or a request's `messages`), read on the message model
    (`_messages.py`): every tool call response part, whatever its native shape (named by
    its own tool name, else by the tool call part or `tool_calls` entry with
    the same id), and `role: tool` messages whose content is the result itself."""
    value = loads(value)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if not isinstance(value, list):
        return []
    names: dict[str, str] = {}
    docs: list[Doc] = []
    for msg in value:
        if not isinstance(msg, dict):
            continue
        _call_names(msg.get("tool_calls"), names)
        read = read_messages([msg])
        parts = read[0].parts if read else ()
        responses = [p for p in parts if isinstance(p, ToolCallResponse)]
        for part in parts:
            if isinstance(part, ToolCall) and part.id and part.name:
                names[part.id] = part.name
        for response in responses:
            name = response.name or (names.get(response.id) if response.id else None)
            docs += tool_docs(response.response, name)
        if not responses and role_of(msg.get("role")) == "tool" and "content" in msg:
            call_id = msg.get("tool_call_id")
            name = msg.get("name") or (names.get(str(call_id)) if call_id is not None else None)
            docs += tool_docs(msg["content"], None if name is None else str(name))
    return docs


def _indexed_tool_results(attrs: dict[str, Any], prefix: str) -> list[Doc]:
    """Indexed `role = tool` messages: `<prefix>.N.message.{role,content,tool_call_id,name}`
    (named by the assistant's `message.tool_calls.M.tool_call.{id,function.name}`), or
    `<prefix>.N.{role,content,name}`."""
    names: dict[str, str] = {}
    docs: list[Doc] = []
    for group in indexed(attrs, prefix):
        for call in indexed(group, "message.tool_calls."):
            if call.get("tool_call.id") is not None and call.get("tool_call.function.name"):
                names[str(call["tool_call.id"])] = str(call["tool_call.function.name"])
        if role_of(group.get("message.role", group.get("role"))) != "tool":
            continue
        content = group.get("message.content", group.get("content"))
        if content is None:
            parts = indexed(group, "message.contents.")
            content = [
                p.get("message_content.text") for p in parts if p.get("message_content.text")
            ]
        call_id = group.get("message.tool_call_id", group.get("tool_call_id"))
        name = group.get("message.name", group.get("name")) or (
            names.get(str(call_id)) if call_id is not None else None
        )
        docs += tool_docs(content, None if name is None else str(name))
    return docs


def _event_tool_results(span: Span) -> list[Doc]:
    """Tool messages in the span's events that carry a model call's input (each event one
    message: the older GenAI `gen_ai.tool.message`, with `content` and `id`), named by the
    `tool_calls` of the assistant messages before them."""
    names: dict[str, str] = {}
    docs: list[Doc] = []
    for event_sources, fields in content_events(span, "model_input"):
        role = event_sources[0][0].role
        if role == "assistant":
            _call_names(fields.get("tool_calls"), names)
        elif role == "tool":
            content = next(
                (v for s, _ in event_sources if not is_absent(v := raw(s, fields))), None
            )
            call_id = fields.get("id", fields.get("tool_call_id"))
            name = fields.get("name") or (names.get(str(call_id)) if call_id is not None else None)
            docs += tool_docs(content, None if name is None else str(name))
    return docs


def _may_hold_results(value: str) -> bool:
    """Whether a raw messages value may hold a tool's result: a tool message, or a part a
    shape of the table calls a tool call response."""
    return '"tool"' in value or any(m in value for m in current().table.response_marks)


def tool_results(span: Span) -> list[Doc]:
    """What tools returned, as tool messages in a model call's input, in message order:
    in the first of the conventions' `model_input` sources the span carries (GenAI
    `gen_ai.input.messages`, `ai.prompt.messages`, `llm.input_messages`,
    `gen_ai.prompt.N`, ...), else in the tool
    messages of its events."""
    a = span.attributes
    for source in sources(span, "model_input"):
        if not present(source, a):
            continue
        if source.encoding == INDEXED:
            return _indexed_tool_results(a, source.key + ".")
        value = raw(source, a)
        if source.encoding != MESSAGES or (isinstance(value, str) and not _may_hold_results(value)):
            return []  # no tool message: skip parsing the prompt a second time
        return _message_tool_results(value)
    if span.events:
        return _event_tool_results(span)
    return []
