"""Model-call (LLM) spans: the messages sent, the text returned, the model and the token
counts, where the conventions table says each convention writes them, and in the older
GenAI events and Spring AI's content log lines carried as span events; and whether a span
that declares nothing shows a model call was made (`shows_model_call`)."""

from __future__ import annotations

from typing import Any

from monitor.extraction._conventions import active
from monitor.extraction._sources import (
    completion_text,
    is_absent,
    messages_of,
    number_of,
    output_of,
    present,
    raw,
    text_of,
)
from monitor.extraction._span_roles import MODEL, reading_order, shows_call, sources, span_role
from monitor.extraction._span_values import (
    ANSWER_KEYS,
    QUERY_KEYS,
    Generation,
    chat_messages,
    content_text,
    find_text,
    loads,
    role_of,
)
from monitor.extraction._tool_results import tool_results
from monitor.spans import Span

_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_PLACEHOLDERS = frozenset({"unknown", "None"})  # OpenLLMetry's models when it cannot tell


def is_generation(span: Span) -> bool:
    """A model call: so declared (`_span_roles`), or, when the span declares nothing,
    carrying a model call's messages (a source the table reads on such spans)."""
    role = span_role(span)
    if role is not None:
        return role == MODEL
    a = span.attributes
    for part in ("model_input", "model_output"):
        if any(present(s, a) for s in sources(span, part, undeclared_only=True)):
            return True
    return bool(span.events) and any(
        e.name in _MESSAGE_EVENTS or e.name == "gen_ai.choice" for e in span.events
    )


def shows_model_call(span: Span) -> bool:
    """A model call by its declared role; a span whose declared kind shows one was made
    (`_span_roles.shows_call`: a GenAI agent invocation, as AutoGen's own spans are); or
    a span that declares nothing but carries attributes only a model call writes (a
    convention's `signs`: GenAI's request, response and usage attributes, ...)."""
    role = span_role(span)
    if role is not None:
        return role == MODEL or shows_call(span)
    signs = tuple(sign for c in active() for sign in c.signs)
    return any(key.startswith(signs) for key in span.attributes)


def _first_text(span: Span, part: str, keys: tuple[str, ...]) -> str | None:
    """The first question (`QUERY_KEYS`) or answer (`ANSWER_KEYS`) in the request input
    or output a framework wrote on a span that declares nothing of it."""
    a = span.attributes
    for source in sources(span, part, undeclared_only=True):
        value = raw(source, a)
        if not is_absent(value):
            text = find_text(value, keys)
            if text:
                return text
    return None


def read_generation(span: Span, shown: bool = False) -> Generation | None:
    """Messages in, text out, model and tokens of an LLM span, or None if it is not one;
    `shown`: the span is known to be a model call (`shows_model_call`) whatever it
    carries. Each part from the first convention (`_span_roles.reading_order`) whose
    source holds it; then the older GenAI events; then the request input and output a
    framework wrote on it."""
    if not (shown or is_generation(span)):
        return None
    a = span.attributes
    used: set[str] = set()
    messages: list[tuple[str, str]] = []
    output: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    for convention in reading_order(span):
        for source in convention.model_input if not messages else ():
            messages = messages_of(source, a)
            if messages or present(source, a):
                used.add(convention.name)
            if messages:
                system = next((t for s in convention.system if (t := text_of(s, a))), None)
                if system:
                    messages = [("system", system), *messages]
                break
        for source in convention.model_output if output is None else ():
            output = output_of(source, a)
            if output is not None or present(source, a):
                used.add(convention.name)
            if output is not None:
                break
        if model is None:
            names = (text_of(s, a) for s in convention.model)
            model = next((m for m in names if m and m not in _PLACEHOLDERS), None)
        if input_tokens is None:
            counts = (number_of(s, a) for s in convention.input_tokens)
            input_tokens = next((n for n in counts if n is not None), None)
        if output_tokens is None:
            counts = (number_of(s, a) for s in convention.output_tokens)
            output_tokens = next((n for n in counts if n is not None), None)
    if span.events and (not messages or output is None):
        from_events, event_output = event_messages(span)
        if from_events or event_output:
            used.add("genai")
        messages = messages or from_events
        output = output if output is not None else event_output
    structured = bool(messages)
    if not messages:
        text = _first_text(span, "request_input", QUERY_KEYS)
        messages = [("user", text)] if text else []
    if output is None:
        output = _first_text(span, "request_output", ANSWER_KEYS)
    return Generation(
        span=span,
        messages=messages,
        output=output,
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        conventions=used,
        structured=structured,
        tool_results=tool_results(span),
    )


def spring_ai_texts(body: Any) -> list[str]:
    """The texts of a Spring AI content log line: `HEADER:\n["text", "text"]`, each text
    quoted as it is (not escaped), or `["role":"text", ...]` for a chat client's prompt."""
    if not isinstance(body, str):
        return []
    _, _, listed = body.partition("\n")
    listed = listed.strip()
    if not (listed.startswith('["') and listed.endswith('"]')):
        return []
    return listed[2:-2].split('", "')


def _spring_ai_messages(event: str, body: Any) -> list[tuple[str, str]]:
    """A Spring AI prompt: the chat client's `"role":"text"` entries, or the chat model's
    instructions (no roles: the last is the user's message, those before it system and
    history)."""
    texts = spring_ai_texts(body)
    if event == "spring_ai.chat_client.prompt":
        entries = [t.partition('":"') for t in texts]
        return [(role_of(r) or "user", text) for r, sep, text in entries if sep]
    return [("system", t) for t in texts[:-1]] + [("user", t) for t in texts[-1:]]


def event_messages(span: Span) -> tuple[list[tuple[str, str]], str | None]:
    """Older GenAI span events: `gen_ai.*.message`, `gen_ai.choice`, `gen_ai.content.*`;
    and Spring AI's content log lines joined to their span."""
    messages: list[tuple[str, str]] = []
    outputs: list[str] = []
    for event in span.events:
        attrs = event.attributes
        if event.name.startswith("spring_ai."):
            if event.name.endswith(".prompt"):
                messages += _spring_ai_messages(event.name, attrs.get("body"))
            elif event.name.endswith(".completion"):
                outputs += spring_ai_texts(attrs.get("body"))
            continue
        if event.name in _MESSAGE_EVENTS:
            body = loads(attrs.get("gen_ai.event.content", attrs.get("body")))
            content = attrs.get("content", body.get("content") if isinstance(body, dict) else body)
            text = content_text(content)
            if text is not None:
                messages.append((_MESSAGE_EVENTS[event.name], text))
        elif event.name == "gen_ai.choice":
            body = loads(attrs.get("gen_ai.event.content", attrs.get("body")))
            message = loads(
                attrs.get("message", body.get("message") if isinstance(body, dict) else None)
            )
            content = (
                message.get("content")
                if isinstance(message, dict)
                else attrs.get("content", message)
            )
            text = content_text(content)
            if text is not None:
                outputs.append(text)
        elif event.name == "gen_ai.content.prompt" and "gen_ai.prompt" in attrs:
            messages += chat_messages(attrs["gen_ai.prompt"])
        elif event.name == "gen_ai.content.completion" and "gen_ai.completion" in attrs:
            text = completion_text(attrs["gen_ai.completion"])
            if text:
                outputs.append(text)
    return messages, "\n".join(outputs) if outputs else None
