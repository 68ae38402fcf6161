"""Model-call (LLM) spans: the messages sent, the text returned, the model and the token
counts, in each convention (GenAI messages and the older events and attributes,
OpenInference `llm.*_messages`, OpenLLMetry `gen_ai.prompt.N` / `gen_ai.completion.N`,
the Vercel AI SDK's `ai.prompt.messages` / `ai.response.text`); and whether a span that
declares nothing shows a model call was made (`shows_model_call`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from monitor.extraction._span_roles import MODEL, span_role
from monitor.extraction._span_values import (
    ANSWER_KEYS,
    QUERY_KEYS,
    Generation,
    chat_messages,
    content_text,
    find_text,
    indexed,
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
_GENERATION_KEYS = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.prompt.0.content",
        "gen_ai.completion.0.content",
        "gen_ai.prompt",
        "gen_ai.completion",
    }
)
# The repr of an object (`SelectorPromptTemplate(metadata=...`, `ChatMessage(_role=...`,


def _as_tokens(*values: Any) -> int | None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
    return None


def is_generation(span: Span) -> bool:
    """A model call: so declared (`_span_roles`), or, when the span declares nothing,
    carrying a model call's messages."""
    role = span_role(span)
    if role is not None:
        return role == MODEL
    a = span.attributes
    if not _GENERATION_KEYS.isdisjoint(a):
        return True
    return bool(span.events) and any(
        e.name in _MESSAGE_EVENTS or e.name == "gen_ai.choice" for e in span.events
    )


# What a model call leaves on its span even with content capture off: the GenAI request,
# response and usage attributes (`gen_ai.request.model`, `gen_ai.usage.input_tokens`, ...).
_MODEL_CALL_PREFIXES = ("gen_ai.request.", "gen_ai.response.", "gen_ai.usage.")


def shows_model_call(span: Span) -> bool:
    """A model call by its declared kind; a span that declares nothing but carries the
    GenAI request, response or usage attributes only a model call writes; or a GenAI agent
    invocation (`invoke_agent`: an agent calls a model, even when only the agent is
    traced, as AutoGen's own spans are)."""
    role = span_role(span)
    if role is not None:
        return role == MODEL or span.attributes.get("gen_ai.operation.name") == "invoke_agent"
    return any(key.startswith(_MODEL_CALL_PREFIXES) for key in span.attributes)


def read_generation(span: Span, shown: bool = False) -> Generation | None:
    """Messages in, text out, model and tokens of an LLM span, or None if it is not one;
    `shown`: the span is known to be a model call (`shows_model_call`) whatever it
    carries."""
    if not (shown or is_generation(span)):
        return None
    a = span.attributes
    conventions: set[str] = set()
    messages: list[tuple[str, str]] = []
    output: str | None = None
    if "gen_ai.input.messages" in a or "gen_ai.output.messages" in a:
        conventions.add("genai")
        system = content_text(a.get("gen_ai.system_instructions"))
        if system:
            messages.append(("system", system))
        messages += chat_messages(a.get("gen_ai.input.messages"))
        outs = [t for r, t in chat_messages(a.get("gen_ai.output.messages")) if r == "assistant"]
        output = "\n".join(outs) if outs else None
    if not messages and "llm.input_messages.0.message.role" in a:
        conventions.add("openinference")
        messages = _indexed_messages(a, "llm.input_messages.")
    if output is None and "llm.output_messages.0.message.role" in a:
        conventions.add("openinference")
        outs = [t for r, t in _indexed_messages(a, "llm.output_messages.") if r == "assistant"]
        output = "\n".join(outs) if outs else None
    if not messages and "gen_ai.prompt.0.content" in a:
        conventions.add("openllmetry")
        messages = [
            (role_of(g.get("role")) or "user", content_text(g.get("content")) or "")
            for g in indexed(a, "gen_ai.prompt.")
        ]
    if output is None and "gen_ai.completion.0.content" in a:
        conventions.add("openllmetry")
        outs = [
            t for g in indexed(a, "gen_ai.completion.") if (t := content_text(g.get("content")))
        ]
        output = "\n".join(outs) or None
    if not messages and isinstance(loads(a.get("genkit:input")), dict):
        conventions.add("genkit")  # a ModelRequest in, a ModelResponse out
        messages = chat_messages(loads(a["genkit:input"]).get("messages"))
        response = loads(a.get("genkit:output"))
        message = response.get("message") if isinstance(response, dict) else None
        outs = [t for r, t in chat_messages([message]) if r == "assistant"]
        output = "\n".join(outs) if outs else output
    for convention, prompt_key, output_key, read_output in _PROMPT_COMPLETION:
        if not messages and prompt_key in a:
            conventions.add(convention)
            messages = chat_messages(a[prompt_key])
        if output is None and output_key in a:
            conventions.add(convention)
            output = read_output(a[output_key])
    if span.events and (not messages or output is None):
        from_events, event_output = event_messages(span)
        if from_events or event_output:
            conventions.add("genai")
        messages = messages or from_events
        output = output if output is not None else event_output
    structured = bool(messages)
    if not messages and "input.value" in a:
        text = find_text(a["input.value"], QUERY_KEYS)
        messages = [("user", text)] if text else []
    if output is None and "output.value" in a:
        output = find_text(a["output.value"], ANSWER_KEYS)
    model = next(
        (
            m
            for m in (
                a.get("gen_ai.response.model"),
                a.get("gen_ai.request.model"),
                a.get("llm.model_name"),
                a.get("ai.model.id"),
            )
            if m and m not in ("unknown", "None")  # OpenLLMetry's placeholders when it cannot tell
        ),
        None,
    )
    return Generation(
        span=span,
        messages=messages,
        output=output,
        model=str(model) if model else None,
        input_tokens=_as_tokens(
            a.get("gen_ai.usage.input_tokens"),
            a.get("gen_ai.usage.prompt_tokens"),
            a.get("llm.token_count.prompt"),
            a.get("ai.usage.inputTokens"),
        ),
        output_tokens=_as_tokens(
            a.get("gen_ai.usage.output_tokens"),
            a.get("gen_ai.usage.completion_tokens"),
            a.get("llm.token_count.completion"),
            a.get("ai.usage.outputTokens"),
        ),
        conventions=conventions,
        structured=structured,
        tool_results=tool_results(span),
    )


def completion_text(value: Any) -> str | None:
    """A `gen_ai.completion` value's text: assistant messages, LangChain's
    `{"generations": [[{"text", "message"}]]}` (LangSmith's OTel mode), or plain text."""
    completion = loads(value)
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


# Conventions that put the messages sent in one attribute and the answer in another:
# (convention, messages attribute, answer attribute, how the answer is read).
_PROMPT_COMPLETION: tuple[tuple[str, str, str, Callable[[Any], str | None]], ...] = (
    ("vercel-ai", "ai.prompt.messages", "ai.response.text", content_text),
    ("genai", "gen_ai.prompt", "gen_ai.completion", completion_text),
)


def _indexed_messages(attrs: dict[str, Any], prefix: str) -> list[tuple[str, str]]:
    out = []
    for group in indexed(attrs, prefix):
        role = role_of(group.get("message.role"))
        text = group.get("message.content")
        if text is None:
            parts = indexed({k: v for k, v in group.items()}, "message.contents.")
            texts = [p.get("message_content.text") for p in parts if p.get("message_content.text")]
            text = "\n".join(str(t) for t in texts) if texts else None
        if role and text is not None:
            out.append((role, content_text(text) or ""))
    return out


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
