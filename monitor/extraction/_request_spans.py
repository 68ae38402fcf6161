"""Request spans: which container span (agent, workflow, chain) is a request a user made,
the question it carries and the answer it handed back."""

from __future__ import annotations

from typing import Any

from monitor.extraction._model_call_spans import event_messages
from monitor.extraction._span_roles import CONTAINER, span_role
from monitor.extraction._span_values import (
    ANSWER_KEYS,
    QUERY_KEYS,
    chat_messages,
    find_text,
    loads,
)
from monitor.spans import Span

# Where a container's input and output are written: OpenInference, OpenLLMetry, LangSmith's
# OTel mode (its run inputs and outputs on every span; on a span that declares no kind,
# `gen_ai.prompt` / `gen_ai.completion` are a model call's), the Vercel AI SDK
# (`ai.prompt`: `{system, prompt, messages}`; `ai.response.text`), OpenInference's CrewAI
# crew span (`crew_inputs`: the kickoff inputs), Genkit's flows (`genkit:input` /
# `genkit:output`) and Mastra (`mastra.<its span type>.input`
# / `.output`, `_mastra_key`).
_INPUT_KEYS = ("input.value", "traceloop.entity.input")
_OUTPUT_KEYS = ("output.value", "traceloop.entity.output")
_DECLARED_INPUT_KEYS = (*_INPUT_KEYS, "gen_ai.prompt", "ai.prompt", "crew_inputs", "genkit:input")
_DECLARED_OUTPUT_KEYS = (*_OUTPUT_KEYS, "gen_ai.completion", "ai.response.text", "genkit:output")


def is_container(span: Span) -> bool:
    """A span that may be a request: declared a container, or declaring nothing."""
    return span_role(span) in (None, CONTAINER)


def _mastra_key(attributes: dict[str, Any], side: str) -> str | None:
    """Mastra's own input or output attribute of a span: `mastra.<mastra.span.type>.<side>`
    (`mastra.agent_run.input`, `mastra.workflow_run.output`)."""
    kind = attributes.get("mastra.span.type")
    return f"mastra.{kind}.{side}" if isinstance(kind, str) else None


def container_input(span: Span) -> Any:
    a = span.attributes
    declared = span_role(span) == CONTAINER
    keys = _DECLARED_INPUT_KEYS if declared else _INPUT_KEYS
    found = next((a[k] for k in keys if k in a), None)
    mastra = _mastra_key(a, "input") if declared and found is None else None
    return a.get(mastra) if mastra else found


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
    """A GenAI container's messages in and text out (`gen_ai.input.messages` /
    `gen_ai.output.messages`, else the message and choice events)."""
    a = span.attributes
    messages = chat_messages(a.get("gen_ai.input.messages"))
    outs = [t for r, t in chat_messages(a.get("gen_ai.output.messages")) if r == "assistant"]
    output = "\n".join(outs) if outs else None
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
    a = span.attributes
    declared = span_role(span) == CONTAINER
    keys = _DECLARED_OUTPUT_KEYS if declared else _OUTPUT_KEYS
    raw = next((a[k] for k in keys if k in a), None)
    mastra = _mastra_key(a, "output") if declared and raw is None else None
    if mastra:
        raw = a.get(mastra)
    if raw is not None:
        return find_text(raw, ANSWER_KEYS)
    return _genai_messages(span)[1] if declared else None


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
