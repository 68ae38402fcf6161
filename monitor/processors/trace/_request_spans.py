"""Request spans: which chain, agent or workflow span is a request a user made, and the
question it carries."""

from __future__ import annotations

from typing import Any

from monitor.processors.trace._model_call_spans import LLM_OPERATIONS
from monitor.processors.trace._retrieval_spans import RETRIEVAL_OPERATIONS
from monitor.processors.trace._span_values import QUERY_KEYS, chat_messages, find_text, loads
from monitor.spans import Span

# Spans whose input/output is a model call or a search, never the request's own.
NOT_CHAIN_OPERATIONS = LLM_OPERATIONS | RETRIEVAL_OPERATIONS | {"embeddings", "execute_tool"}


def _is_prompt(value: Any, depth: int = 0) -> bool:
    """A list of chat messages that includes a system message: a model's prompt."""
    value = loads(value)
    if isinstance(value, dict) and depth < 3:
        for key in ("inputs", "input", "messages"):
            if key in value:
                return _is_prompt(value[key], depth + 1)
        return False
    if isinstance(value, list):
        if value and isinstance(value[0], list):  # LangChain batches: [[messages]]
            value = value[0]
        return any(role == "system" for role, _ in chat_messages(value))
    return False


def request_question(span: Span) -> str | None:
    """The user's question, if this span is a request a user made: a chain, agent or
    workflow span (not a model call, retrieval, embedding or tool) whose input reads as
    text: a string or a JSON value with a question field or user messages, not an
    object's repr (a prompt template) and not a model prompt (messages with a system
    message)."""
    a = span.attributes
    kind = a.get("openinference.span.kind")
    if kind not in (None, "CHAIN", "AGENT"):
        return None
    op = a.get("gen_ai.operation.name")
    if (isinstance(op, str) and op in NOT_CHAIN_OPERATIONS) or a.get(
        "traceloop.span.kind"
    ) == "tool":
        return None
    raw = a.get("input.value", a.get("traceloop.entity.input"))
    if raw is None or _is_prompt(raw):
        return None
    return find_text(raw, QUERY_KEYS)


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
