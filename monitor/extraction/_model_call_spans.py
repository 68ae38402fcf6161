"""Model-call (LLM) spans: the messages sent, the text returned, the model and the token
counts, where the conventions table says each convention writes them, in the span's
attributes or in its events (the older GenAI message events, content log lines joined to
the span); and whether a span that declares nothing shows a model call was made
(`shows_model_call`)."""

from __future__ import annotations

from monitor.extraction._message_parts import span_documents
from monitor.extraction._sources import (
    event_fields,
    is_absent,
    messages_of,
    number_of,
    output_of,
    present,
    raw,
    text_of,
)
from monitor.extraction._span_roles import (
    MODEL,
    event_sources,
    reading_order,
    shows_call,
    sources,
    span_role,
)
from monitor.extraction._span_values import ANSWER_KEYS, QUERY_KEYS, Generation, find_text
from monitor.extraction._table import active, current
from monitor.extraction._tool_results import tool_results
from monitor.spans import Span


def is_generation(span: Span) -> bool:
    """A model call: so declared (`_span_roles`), or, when the span declares nothing,
    carrying a model call's messages (a source the table reads on such spans, in its
    attributes or its events)."""
    role = span_role(span)
    if role is not None:
        return role == MODEL
    a = span.attributes
    for part in ("model_input", "model_output"):
        if any(present(s, a) for s in sources(span, part, undeclared_only=True)):
            return True
    if not span.events:
        return False
    inputs, answers = event_sources(span, "model_input", "model_output", undeclared_only=True)
    return any(e.name in inputs or e.name in answers for e in span.events)


def shows_model_call(span: Span) -> bool:
    """A model call by its declared role; a span whose declared kind shows one was made
    (`_span_roles.shows_call`: a GenAI agent invocation, the table's `calls`); or
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
    source holds it; then the span's events; then the request input and output a
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
    placeholders = current().table.placeholders
    for convention in reading_order(span):
        for source in convention.model_input if not messages else ():
            if source.event is not None:
                continue
            messages = messages_of(source, a)
            if messages or present(source, a):
                used.add(convention.name)
            if messages:
                system = next((t for s in convention.system if (t := text_of(s, a))), None)
                if system:
                    messages = [("system", system), *messages]
                break
        for source in convention.model_output if output is None else ():
            if source.event is not None:
                continue
            output = output_of(source, a)
            if output is not None or present(source, a):
                used.add(convention.name)
            if output is not None:
                break
        if model is None:
            names = (text_of(s, a) for s in convention.model)
            model = next((m for m in names if m and m not in placeholders), None)
        if input_tokens is None:
            counts = (number_of(s, a) for s in convention.input_tokens)
            input_tokens = next((n for n in counts if n is not None), None)
        if output_tokens is None:
            counts = (number_of(s, a) for s in convention.output_tokens)
            output_tokens = next((n for n in counts if n is not None), None)
    if span.events and (not messages or output is None):
        from_events, event_output, event_conventions = _event_messages(span)
        used |= event_conventions
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
        documents=span_documents(span),
    )


def _event_messages(span: Span) -> tuple[list[tuple[str, str]], str | None, set[str]]:
    """The messages in and the text out in the span's events (each event one message, or a
    prompt's messages, or one answer; answers joined), and the conventions that said so;
    worked out once per span in an extraction."""
    remembered = current().event_content
    if remembered is None:
        return _read_event_messages(span)
    found = remembered.get(id(span))
    if found is None:
        found = remembered[id(span)] = _read_event_messages(span)
    messages, output, used = found
    return list(messages), output, set(used)


def _read_event_messages(span: Span) -> tuple[list[tuple[str, str]], str | None, set[str]]:
    messages: list[tuple[str, str]] = []
    outputs: list[str] = []
    used: set[str] = set()
    inputs, answers = event_sources(span, "model_input", "model_output")
    bodies = current().table.event_bodies
    for event in span.events:
        input_sources = inputs.get(event.name)
        answer_sources = answers.get(event.name)
        if not (input_sources or answer_sources):
            continue
        fields = event_fields(event, bodies)
        for source, convention in input_sources or ():
            found = messages_of(source, fields)
            if found:
                messages += found
                used.add(convention)
                break
        for source, convention in answer_sources or ():
            text = output_of(source, fields)
            if text is not None:
                outputs.append(text)
                used.add(convention)
                break
    return messages, "\n".join(outputs) if outputs else None, used


def event_messages(span: Span) -> tuple[list[tuple[str, str]], str | None]:
    """The messages in and the text out a span's events carry, where a convention says."""
    messages, output, _ = _event_messages(span)
    return messages, output
