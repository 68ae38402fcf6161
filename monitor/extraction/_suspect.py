"""Signs that an extracted record's parts are not what they claim to be: the context only
repeats the question or a tool's arguments, the answer repeats the question or a
document, or a model call was traced without its question or its answer. Such a record
measures the extraction, not the app: it is marked (`metadata.extraction_suspect` = the
reason), counted, shown in `/debug/records` and, unless
`pipeline.evaluate_suspect_records`, not evaluated. For a missing question or answer the
log line names the switch of the stack that wrote the trace (`_instrumentations.py`)."""

from __future__ import annotations

import json
from typing import Any

from monitor.extraction._instrumentations import content_switch
from monitor.extraction._sources import is_absent, raw
from monitor.extraction._span_roles import TOOL, content_events, sources, span_role
from monitor.extraction._span_values import Doc, normalized
from monitor.extraction._tool_results import parsed_value
from monitor.spans import Span

# The reasons that mean content capture is off (the fix is the stack's switch), and the
# record metadata naming the stack.
CONTENT_REASONS = frozenset({"no_query", "no_response"})
INSTRUMENTATION = "instrumentation"
# What fixes each reason, said in the log line.
GUIDANCE: dict[str, str] = {
    "no_query": (
        "a model call was traced but no span carries the user's question: turn on the "
        "instrumentation's content capture, or set rag.query"
    ),
    "no_response": (
        "a model call was traced but no span carries its answer: turn on the "
        "instrumentation's content capture, or set rag.response"
    ),
    "context_repeats_query": (
        "the context read only repeats the question: the tool or retriever span carries "
        "no result (turn on content capture for tool spans), or set rag.context"
    ),
    "context_is_tool_arguments": (
        "the context read is a tool's arguments, not its result: turn on content capture "
        "for tool spans (gen_ai.tool.call.result), or set rag.context"
    ),
    "answer_repeats_query": (
        "the response read is the question: the model span carries no output "
        "(turn on content capture), or set rag.response"
    ),
    "answer_is_context": (
        "the response read is a document of the context: the answering span carries no "
        "output (turn on content capture), or set rag.response"
    ),
}
REASONS = tuple(GUIDANCE)


def guidance(reason: str, instrumentation: str | None) -> str:
    """What fixes a suspect record: for a missing question or answer, what was missing
    and the switch of the stack that wrote it; else the reason's own advice."""
    advice = GUIDANCE.get(reason, "see the README's 'Tracing your app'")
    if reason not in CONTENT_REASONS:
        return advice
    return f"{advice} ({instrumentation or 'unknown'}: {content_switch(instrumentation)})"


_MIN_ANSWER_WORDS = 8  # shorter answers may fairly quote a tool's value word for word


def _canonical(text: str) -> str:
    """JSON and Python-literal values compared by value, text by its words."""
    value = parsed_value(text)
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return normalized(text)


def _leaves(value: Any, depth: int = 0) -> list[str]:
    if isinstance(value, str):
        return [value]
    if depth > 4:
        return []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _leaves(v, depth + 1)]
    if isinstance(value, list):
        return [s for v in value for s in _leaves(v, depth + 1)]
    return []


def _repeats_query(text: str, query: str) -> bool:
    """`text` is the question, or a JSON value whose only text is the question."""
    if normalized(text) == query:
        return True
    value = parsed_value(text)
    if not isinstance(value, dict | list):
        return False
    leaves = _leaves(value)
    return bool(leaves) and all(normalized(s) == query for s in leaves)


def tool_arguments(span: Span) -> list[str]:
    """The arguments a tool span was called with, as its convention writes them."""
    if span_role(span) != TOOL:
        return []
    a = span.attributes
    found = [str(v) for s in sources(span, "tool_arguments") if not is_absent(v := raw(s, a))]
    for event_sources, fields in content_events(span, "tool_arguments"):
        value = next((v for s, _ in event_sources if not is_absent(v := raw(s, fields))), None)
        if value is not None:
            found.append(str(value))
    return found


def suspect_reason(
    query: str | None,
    docs: list[Doc],
    response: str | None,
    model_call_seen: bool,
    arguments: list[str],
    model_output: str | None = None,
) -> str | None:
    """Why the record's parts look wrong, or None when nothing does. An answer that is
    the answering model call's own output is what the model said, never a misread part:
    a faithful answer may quote a document, or the question, word for word."""
    if model_call_seen and not (query and query.strip()):
        return "no_query"
    if model_call_seen and not (response and response.strip()):
        return "no_response"
    question = normalized(query)
    texts = [d.content for d in docs if d.content]
    if texts and arguments:
        given = {_canonical(a) for a in arguments}
        if all(_canonical(t) in given for t in texts):
            return "context_is_tool_arguments"
    if texts and question and all(_repeats_query(t, question) for t in texts):
        return "context_repeats_query"
    if response is None or (model_output and normalized(model_output) == normalized(response)):
        return None
    if question and normalized(response) == question:
        return "answer_repeats_query"
    if len(response.split()) >= _MIN_ANSWER_WORDS:
        answer = normalized(response)
        if any(normalized(t) == answer for t in texts):
            return "answer_is_context"
    return None
