"""Request spans: which container span (agent, workflow, chain) is a request a user made,
the question it carries and the answer it handed back."""

from __future__ import annotations

from typing import Any

from monitor.extraction._model_call_spans import event_messages
from monitor.extraction._sources import is_absent, messages_of, output_of, raw
from monitor.extraction._span_roles import CONTAINER, sources, span_role
from monitor.extraction._span_values import (
    ANSWER_KEYS,
    QUERY_KEYS,
    chat_messages,
    find_text,
    loads,
)
from monitor.spans import Span


def is_container(span: Span) -> bool:
    """A span that may be a request: declared a container, or declaring nothing."""
    return span_role(span) in (None, CONTAINER)


def _written(span: Span, part: str) -> Any:
    """The first request input or output (`part`) the span carries where a convention
    writes it: any convention's on a declared container, else only those read on spans
    that declare nothing (`input.value`, ...); None when none."""
    a = span.attributes
    declared = span_role(span) == CONTAINER
    for source in sources(span, part, undeclared_only=not declared):
        value = raw(source, a)
        if not is_absent(value):
            return value
    return None


def container_input(span: Span) -> Any:
    return _written(span, "request_input")


def writes_request(span: Span) -> bool:
    """A container that carries a request input or output where a convention writes it."""
    return is_container(span) and (
        _written(span, "request_input") is not None or _written(span, "request_output") is not None
    )


def _is_prompt(value: Any, depth: int = 0) -> bool:
    """A list of chat messages that includes a system message: a model's prompt."""
    value = loads(value)
    if isinstance(value, dict) and depth < 3:
        for key in ("inputs", "input", "messages"):
            if key in value:
                return _is_prompt(value[key], depth + 1)
        return False
    if isinstance(value, list):
        return any(role == "system" for role, _ in chat_messages(value))
    return False


def _genai_messages(span: Span) -> tuple[list[tuple[str, str]], str | None]:
    """A container's messages in and text out where a convention writes a model call's
    (a GenAI agent or workflow span's `gen_ai.input.messages` / `gen_ai.output.messages`),
    else the message and choice events."""
    a = span.attributes
    messages = next((m for s in sources(span, "model_input") if (m := messages_of(s, a))), [])
    output = next(
        (t for s in sources(span, "model_output") if (t := output_of(s, a)) is not None), None
    )
    if span.events and (not messages or output is None):
        from_events, event_output = event_messages(span)
        messages = messages or from_events
        output = output if output is not None else event_output
    return messages, output


def request_question(span: Span) -> str | None:
    """The user's question, if this span is a request a user made: a container span (or
    an undeclared one; never a model call, retrieval, embedding or tool) whose input reads
    as text: a string or a JSON value with a question field or user messages, not an
    object's repr (a prompt template) and not a model prompt (messages with a system
    message). A GenAI agent or workflow span's question is its last user message."""
    if not is_container(span):
        return None
    raw = container_input(span)
    if raw is None:
        if span_role(span) != CONTAINER:
            return None
        messages, _ = _genai_messages(span)
        return next((t for r, t in reversed(messages) if r == "user" and t.strip()), None)
    if _is_prompt(raw):
        return None
    return find_text(raw, QUERY_KEYS)


def container_output(span: Span) -> str | None:
    """The text a container span handed back: its output value, or a GenAI container's
    assistant output."""
    value = _written(span, "request_output")
    if value is not None:
        return find_text(value, ANSWER_KEYS)
    return _genai_messages(span)[1] if span_role(span) == CONTAINER else None


class Requests:
    """Which request span each span belongs to: its outermost ancestor that is a request
    a user made (`_request_spans.request_question`), memoised per span."""

    def __init__(self, by_id: dict[str, Span]) -> None:
        self._by_id = by_id
        self._questions: dict[str, str | None] = {}

    def question(self, span: Span) -> str | None:
        if span.span_id not in self._questions:
            self._questions[span.span_id] = request_question(span)
        return self._questions[span.span_id]

    def of(self, span: Span) -> Span | None:
        found = None
        hops = 0
        while span.parent_span_id in self._by_id and hops < 1000:
            span = self._by_id[span.parent_span_id]
            if self.question(span):
                found = span
            hops += 1
        return found
