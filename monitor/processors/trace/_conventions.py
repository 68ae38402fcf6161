"""Per-span readers for the instrumentation conventions (DESIGN.md, "Receivers").

Each reader looks at one `Span` and returns what it says in convention-neutral form:
`Retrieval` (query + documents in retrieval order) or `Generation` (chat messages in,
text out, model, tokens). `_extract.py` then joins the spans of a trace into records.

Understood:
- OpenInference: `openinference.span.kind` RETRIEVER / RERANKER / LLM, `input.value`,
  `output.value`, `retrieval.documents.N.document.{content,id,score,metadata}`,
  `reranker.output_documents.N.document.*`, `llm.input_messages.N.message.*`,
  `llm.output_messages.N.message.*` (also `message.contents.M.message_content.text`).
- OpenTelemetry GenAI: `gen_ai.input.messages` / `gen_ai.output.messages` /
  `gen_ai.system_instructions` (JSON strings or structured values, messages made of
  `parts`), `gen_ai.operation.name = retrieval` with `gen_ai.retrieval.query.text` and
  `gen_ai.retrieval.documents`; the older `gen_ai.{system,user,assistant,tool}.message` and
  `gen_ai.choice` span events and `gen_ai.prompt` / `gen_ai.completion` attributes.
- OpenLLMetry: `gen_ai.prompt.N.{role,content}`, `gen_ai.completion.N.{role,content}`,
  `traceloop.entity.input` / `traceloop.entity.output` JSON (including 0.62's LangChain
  retriever spans with `gen_ai.operation.name = vector_db_retrieve` whose output holds
  `{"page_content", "metadata"}` documents, and its LlamaIndex retriever tasks whose
  output is a list of scored nodes), and vector-DB spans with `db.query.result` events.
- Framework spans in any of them: `request_question` tells whether a chain / agent /
  workflow span is a request a user made (its input reads as a question; an object's
  repr, such as LlamaIndex's prompt templates, never does).
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from monitor.spans import Span

_ROLES = {
    "system": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
    "developer": "developer",
}
_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_RETRIEVAL_OPERATIONS = frozenset({"retrieval", "retrieve", "vector_db_retrieve"})
# Spans whose input/output is a model call or a search, never the request's own.
NOT_CHAIN_OPERATIONS = _LLM_OPERATIONS | _RETRIEVAL_OPERATIONS | {"embeddings", "execute_tool"}
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
# `<NodeWithScore(node=...`, `<dspy.clients.lm.LM object at 0x...>`): frameworks put these where text is expected (LlamaIndex's
# `predict` input is its prompt template, Haystack's messages are `ChatMessage(...)`).
# Never a question or an answer.
_REPR = re.compile(r"\s*(?:[A-Z][\w.]*\([A-Za-z_]\w*=|<[A-Za-z_][\w.]*(?:\(| object at ))")
QUERY_KEYS = (
    "query",
    "question",
    "input",
    "user_input",
    "q",
    "prompt",
    "message",
    "text",
    "task",  # an agent's run(task) (smolagents)
    "query_str",  # LlamaIndex's QueryBundle
)
ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content", "generation")


@dataclass(slots=True)
class Doc:
    content: str | None
    doc_uri: str | None = None
    score: float | None = None
    metadata: dict[str, Any] | None = None


@dataclass(slots=True)
class Retrieval:
    span: Span
    query: str | None
    docs: list[Doc]
    reranked: bool = False
    tool: str | None = None  # a tool call's result (its tool's name), not a retriever's


@dataclass(slots=True)
class Generation:
    span: Span
    messages: list[tuple[str, str]]  # (role, text) sent to the model, system included
    output: str | None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    conventions: set[str] = field(default_factory=set)
    # messages read from role-tagged message attributes, not guessed from `input.value`
    structured: bool = False
    # what tools returned, as tool messages in this call's input, in message order
    tool_results: list[Doc] = field(default_factory=list)

    @property
    def user_query(self) -> str | None:
        for role, text in reversed(self.messages):
            if role == "user":
                return text
        return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def is_repr(text: str) -> bool:
    """Whether a string is an object's repr rather than text (see `_REPR`)."""
    return _REPR.match(text) is not None


def loads(value: Any) -> Any:
    """Parse a JSON-looking string; anything else comes back unchanged."""
    if isinstance(value, str):
        stripped = value.lstrip()
        if stripped[:1] in ("{", "["):
            try:
                return orjson.loads(stripped)
            except orjson.JSONDecodeError:
                pass
            try:
                # What orjson refuses and Python's json reads: NaN, Infinity, lone
                # surrogates. (orjson reads integers beyond 64 bits as floats.)
                return json.loads(stripped)
            except ValueError:
                return value
    return value


def indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`prefix.N.rest = v` attributes → one dict per N (ascending), keyed by `rest`."""
    size = len(prefix)
    groups: dict[str, dict[str, Any]] = {}
    for key in attrs:
        if key.startswith(prefix):
            index, _, rest = key[size:].partition(".")
            group = groups.get(index)
            if group is None:
                if not index.isdigit():
                    continue
                group = groups[index] = {}
            group[rest] = attrs[key]
    return [groups[i] for i in sorted(groups, key=int)]


def _text(value: Any) -> str | None:
    """Text of a message content: a string, a list of parts, or a `{text|content}` object."""
    value = loads(value)
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [t for t in (_part_text(p) for p in value) if t]
        return "\n".join(texts) if texts else None
    if isinstance(value, dict):
        return _part_text(value)
    return str(value)


def _part_text(part: Any) -> str | None:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind not in (None, "text", "input_text", "output_text"):
        return None
    for key in ("content", "text"):
        if isinstance(part.get(key), str):
            return str(part[key])
    return None


def _role(value: Any) -> str | None:
    return _ROLES.get(str(value).lower()) if value is not None else None


def _chat_messages(value: Any) -> list[tuple[str, str]]:
    """GenAI / OpenAI style messages: `[{role, parts|content}]` (JSON or structured)."""
    value = loads(value)
    if isinstance(value, str):
        return [("user", value)]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return []
    out = []
    for msg in value:
        if isinstance(msg, dict):
            if "lc" in msg and isinstance(msg.get("kwargs"), dict):  # serialized LangChain
                msg = msg["kwargs"]
            elif isinstance(msg.get("data"), dict) and "content" not in msg:
                msg = {**msg["data"], "type": msg.get("type")}  # LangChain's `dumpd` form
            role = _role(msg.get("role") or msg.get("type"))
            text = _text(msg["parts"] if "parts" in msg else msg.get("content"))
            if role and text is not None:
                out.append((role, text))
    return out


def as_float(value: Any) -> float | None:
    """A finite number from a number or numeric string; anything else is None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _as_tokens(*values: Any) -> int | None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
    return None


def find_text(value: Any, keys: tuple[str, ...], depth: int = 0) -> str | None:
    """The first meaningful string in a chain input/output (JSON, wrappers, messages);
    never an object's repr."""
    value = loads(value)
    if isinstance(value, str):
        return None if is_repr(value) else value.strip() or None
    if depth > 4:
        return None
    if isinstance(value, list):
        messages = _chat_messages(value)
        want = "user" if keys is QUERY_KEYS else "assistant"
        for role, text in reversed(messages):
            if role == want:
                return text
        return None
    if not isinstance(value, dict):
        return None
    if "lc" in value and isinstance(value.get("kwargs"), dict):  # serialized LangChain object
        return find_text(value["kwargs"], keys, depth + 1)
    for wrapper in ("inputs", "outputs"):
        if wrapper in value:
            return find_text(value[wrapper], keys, depth + 1)
    if isinstance(value.get("args"), list) and value["args"]:  # a traced function's arguments
        return find_text(value["args"][0], keys, depth + 1)
    for key in keys:
        if key in value:
            found = find_text(value[key], keys, depth + 1)
            if found:
                return found
    if "messages" in value:
        return find_text(value["messages"], keys, depth + 1)
    if len(value) == 1:  # a traced function's only argument, whatever its name
        return find_text(next(iter(value.values())), keys, depth + 1)
    return None


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
        return any(role == "system" for role, _ in _chat_messages(value))
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


def _doc(item: Any) -> Doc | None:
    if isinstance(item, str):
        return Doc(item)
    if not isinstance(item, dict):
        return None
    if "lc" in item and isinstance(item.get("kwargs"), dict):
        item = item["kwargs"]
    if isinstance(item.get("document"), dict):
        item = {**item, **item["document"]}
    if isinstance(item.get("node"), dict):  # LlamaIndex's NodeWithScore
        item = {**item["node"], "score": item.get("score")}
    content = item.get("page_content", item.get("content", item.get("text", item.get("document"))))
    metadata = loads(item.get("metadata"))
    metadata = metadata if isinstance(metadata, dict) else None
    uri = item.get("doc_uri", item.get("id", item.get("uri", item.get("url"))))
    if uri is None and metadata is not None:
        uri = metadata.get("source")
    if content is None and uri is None:
        return None
    return Doc(
        content=_text(content),
        doc_uri=None if uri is None else str(uri),
        score=as_float(item.get("score", item.get("relevance_score"))),
        metadata=metadata,
    )


def json_docs(value: Any, depth: int = 0) -> list[Doc] | None:
    """Find the list of documents in a JSON value (retriever output, `rag.context`)."""
    value = loads(value)
    if depth > 4:
        return None
    if isinstance(value, list):
        docs = [d for d in (_doc(v) for v in value) if d is not None]
        return docs if docs or not value else None
    if isinstance(value, dict):
        for key in ("outputs", "documents", "docs", "context", "result", "output", "kwargs"):
            if key in value:
                found = json_docs(value[key], depth + 1)
                if found is not None:
                    return found
    return None


def _indexed_docs(attrs: dict[str, Any], prefix: str) -> list[Doc]:
    """OpenInference `<prefix>.N.document.{content,id,score,metadata}`."""
    docs = []
    for group in indexed(attrs, prefix):
        content = group.get("document.content")
        uri = group.get("document.id")
        metadata = loads(group.get("document.metadata"))
        metadata = metadata if isinstance(metadata, dict) else None
        if uri is None and metadata is not None:
            uri = metadata.get("source")
        if content is None and uri is None:
            continue
        docs.append(
            Doc(
                content=_text(content),
                doc_uri=None if uri is None else str(uri),
                score=as_float(group.get("document.score")),
                metadata=metadata,
            )
        )
    return docs


def read_retrieval(span: Span) -> Retrieval | None:
    """The query and documents of a retrieval span, or None if it is not one."""
    a = span.attributes
    kind = _str(a.get("openinference.span.kind"))
    op = _str(a.get("gen_ai.operation.name"))
    if kind == "RERANKER":
        return Retrieval(
            span, a.get("reranker.query"), _indexed_docs(a, "reranker.output_documents."), True
        )
    if kind == "RETRIEVER" or "retrieval.documents.0.document.content" in a:
        query = find_text(a.get("input.value"), QUERY_KEYS)
        return Retrieval(span, query, _indexed_docs(a, "retrieval.documents."))
    if op in _RETRIEVAL_OPERATIONS or "gen_ai.retrieval.documents" in a:
        query = a.get("gen_ai.retrieval.query.text")
        docs = json_docs(a.get("gen_ai.retrieval.documents")) or []
        if "traceloop.entity.input" in a or "traceloop.entity.output" in a:  # OpenLLMetry 0.62
            query = query or find_text(a.get("traceloop.entity.input"), QUERY_KEYS)
            docs = docs or json_docs(a.get("traceloop.entity.output")) or []
        return Retrieval(span, query if isinstance(query, str) else None, docs)
    output = a.get("traceloop.entity.output")
    if isinstance(output, str) and '"node' in output and "score" in output:
        nodes = _scored_nodes(output)
        if nodes is not None:  # OpenLLMetry's LlamaIndex retriever: a task returning nodes
            return Retrieval(span, find_text(a.get("traceloop.entity.input"), QUERY_KEYS), nodes)
    results = [e for e in span.events if e.name.endswith("query.result")] if span.events else []
    if results:
        return Retrieval(
            span, a.get("db.query.text") or None, [_event_doc(e.attributes) for e in results]
        )
    return None


def _scored_nodes(value: Any) -> list[Doc] | None:
    """A list of scored nodes (`{"node": {"text", "metadata", ...}, "score"}`, each maybe a
    JSON string: LlamaIndex's NodeWithScore as OpenLLMetry serializes it), else None."""
    value = loads(value)
    if not isinstance(value, list) or not value:
        return None
    docs = []
    for item in value:
        item = loads(item)
        if not (isinstance(item, dict) and isinstance(item.get("node"), dict)):
            return None
        doc = _doc(item)
        if doc is None or doc.content is None:
            return None
        docs.append(doc)
    return docs


def _event_doc(attrs: dict[str, Any]) -> Doc:
    """An OpenLLMetry `db.query.result` event: `<prefix>.{document,id,score,distance,metadata}`."""
    fields: dict[str, Any] = {}
    for key, value in attrs.items():
        fields[key.rpartition(".")[2]] = value
    metadata = loads(fields.get("metadata"))
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    if "distance" in fields:
        metadata["distance"] = fields["distance"]
    uri = fields.get("id")
    return Doc(
        content=_text(fields.get("document")),
        doc_uri=None if uri is None else str(uri),
        score=as_float(fields.get("score")),
        metadata=metadata or None,
    )


def is_generation(span: Span) -> bool:
    a = span.attributes
    kind = a.get("openinference.span.kind")
    if kind is not None:
        return bool(kind == "LLM")
    if (
        _str(a.get("gen_ai.operation.name")) in _LLM_OPERATIONS
        or _str(a.get("llm.request.type")) in _LLM_OPERATIONS
    ):
        return True
    if not _GENERATION_KEYS.isdisjoint(a):
        return True
    return bool(span.events) and any(
        e.name in _MESSAGE_EVENTS or e.name == "gen_ai.choice" for e in span.events
    )


def read_generation(span: Span) -> Generation | None:
    """Messages in, text out, model and tokens of an LLM span, or None if it is not one."""
    if not is_generation(span):
        return None
    a = span.attributes
    conventions: set[str] = set()
    messages: list[tuple[str, str]] = []
    output: str | None = None
    if "gen_ai.input.messages" in a or "gen_ai.output.messages" in a:
        conventions.add("genai")
        system = _text(a.get("gen_ai.system_instructions"))
        if system:
            messages.append(("system", system))
        messages += _chat_messages(a.get("gen_ai.input.messages"))
        outs = [t for r, t in _chat_messages(a.get("gen_ai.output.messages")) if r == "assistant"]
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
            (_role(g.get("role")) or "user", _text(g.get("content")) or "")
            for g in indexed(a, "gen_ai.prompt.")
        ]
    if output is None and "gen_ai.completion.0.content" in a:
        conventions.add("openllmetry")
        outs = [t for g in indexed(a, "gen_ai.completion.") if (t := _text(g.get("content")))]
        output = "\n".join(outs) or None
    if not messages and "gen_ai.prompt" in a:
        conventions.add("genai")
        messages = _chat_messages(a["gen_ai.prompt"])
    if output is None and "gen_ai.completion" in a:
        conventions.add("genai")
        completion = loads(a["gen_ai.completion"])
        outs = (
            [t for r, t in _chat_messages(completion) if r == "assistant"]
            if isinstance(completion, list)
            else []
        )
        output = "\n".join(outs) if outs else _text(completion)
    if span.events and (not messages or output is None):
        event_messages, event_output = _event_messages(span)
        if event_messages or event_output:
            conventions.add("genai")
        messages = messages or event_messages
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
        ),
        output_tokens=_as_tokens(
            a.get("gen_ai.usage.output_tokens"),
            a.get("gen_ai.usage.completion_tokens"),
            a.get("llm.token_count.completion"),
        ),
        conventions=conventions,
        structured=structured,
        tool_results=tool_results(span),
    )


def _indexed_messages(attrs: dict[str, Any], prefix: str) -> list[tuple[str, str]]:
    out = []
    for group in indexed(attrs, prefix):
        role = _role(group.get("message.role"))
        text = group.get("message.content")
        if text is None:
            parts = indexed({k: v for k, v in group.items()}, "message.contents.")
            texts = [p.get("message_content.text") for p in parts if p.get("message_content.text")]
            text = "\n".join(str(t) for t in texts) if texts else None
        if role and text is not None:
            out.append((role, _text(text) or ""))
    return out


def _event_messages(span: Span) -> tuple[list[tuple[str, str]], str | None]:
    """Older GenAI span events: `gen_ai.*.message`, `gen_ai.choice`, `gen_ai.content.*`."""
    messages: list[tuple[str, str]] = []
    outputs: list[str] = []
    for event in span.events:
        attrs = event.attributes
        if event.name in _MESSAGE_EVENTS:
            body = loads(attrs.get("gen_ai.event.content", attrs.get("body")))
            content = attrs.get("content", body.get("content") if isinstance(body, dict) else body)
            text = _text(content)
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
            text = _text(content)
            if text is not None:
                outputs.append(text)
        elif event.name == "gen_ai.content.prompt" and "gen_ai.prompt" in attrs:
            messages += _chat_messages(attrs["gen_ai.prompt"])
        elif event.name == "gen_ai.content.completion" and "gen_ai.completion" in attrs:
            completion = loads(attrs["gen_ai.completion"])
            found = [t for r, t in _chat_messages(completion) if r == "assistant"]
            text = "\n".join(found) if found else _text(completion)
            if text:
                outputs.append(text)
    return messages, "\n".join(outputs) if outputs else None


# -- tool results: what a tool returned to the model is context ------------------------------

_NO_TEXT_TYPES = frozenset(
    {"image", "image_url", "input_image", "audio", "input_audio", "file", "blob", "binary"}
)
_AT_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+>\s*\Z")
_RESULT_KEYS = ("documents", "docs", "results", "result", "output", "outputs", "context", "data")


def _literal(value: Any) -> Any:
    """A Python literal (`['a', 'b']`, `{'text': ...}`) that is not JSON: what frameworks that
    `str()` a tool's return value send. Anything else comes back unchanged."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{") and len(value) < 1 << 20:
        try:
            return ast.literal_eval(value.strip())
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return value
    return value


def _tool_items(value: Any, depth: int) -> list[Doc]:
    if value is None or depth > 4:
        return []
    if isinstance(value, bool | int | float):
        return [Doc(json.dumps(value))]  # a calculator's or a clock's value is evidence too
    if isinstance(value, str):
        text = value.strip()
        if not text or (text.startswith("<") and (is_repr(text) or _AT_ADDRESS.search(text))):
            return []  # an object's repr (`<PIL.Image.Image ... at 0x7f...>`), not its content
        return [Doc(text)]
    if isinstance(value, list):
        return [doc for item in value for doc in _tool_items(_literal(loads(item)), depth + 1)]
    if not isinstance(value, dict):
        return []
    if value.get("type") in _NO_TEXT_TYPES or (
        "data" in value and ({"mime_type", "mimeType", "media_type"} & value.keys())
    ):
        return []  # an image, audio or file: nothing a text evaluator can read
    for key in (*_RESULT_KEYS, "content"):
        if isinstance(value.get(key), list):  # `{"documents": [...]}`, MCP's `{"content": [...]}`
            return _tool_items(value[key], depth + 1)
    doc = _doc(value)
    if doc is not None and doc.content:
        return [doc]
    for key in _RESULT_KEYS:
        if value.get(key) is not None:
            return _tool_items(_literal(loads(value[key])), depth + 1)
    # An object with no text field (`{"city": "Oslo", "temp_c": 4}`): its JSON is what the
    # answer states.
    return [Doc(json.dumps(value, ensure_ascii=False, default=str))] if value else []


def tool_docs(value: Any, tool: str | None) -> list[Doc]:
    """A tool's result as documents: a JSON (or Python-literal) list of documents or
    strings, an object with a text/content field or a list of them under a result key, a
    plain string; numbers and objects without text as their JSON text; images, audio,
    files and empty results as nothing. Each document's source (`doc_uri`, unless it names
    its own) is the tool's name, also kept in `metadata.tool`."""
    docs = _tool_items(_literal(loads(value)), 0)
    for doc in docs:
        if tool:
            doc.metadata = {**(doc.metadata or {}), "tool": tool}
            if doc.doc_uri is None:
                doc.doc_uri = tool
    return docs


def read_tool(span: Span) -> Retrieval | None:
    """The result of a tool call span (GenAI `execute_tool` with `gen_ai.tool.call.result`,
    OpenInference `TOOL` with `output.value`, OpenLLMetry `tool` tasks), or None if the
    span is not a tool call or carries no result (content capture off)."""
    a = span.attributes
    if a.get("openinference.span.kind") == "TOOL":
        name, result = a.get("tool.name"), a.get("output.value")
    elif a.get("gen_ai.operation.name") == "execute_tool":
        name = a.get("gen_ai.tool.name")
        result = next(
            (a[k] for k in ("gen_ai.tool.call.result", "tool_response", "output.value") if k in a),
            None,
        )
    elif a.get("traceloop.span.kind") == "tool":
        name, result = a.get("traceloop.entity.name"), a.get("traceloop.entity.output")
    else:
        return None
    if result is None:
        return None
    tool = str(name) if name else span.name
    return Retrieval(span, None, tool_docs(result, tool), tool=tool)


def _call_names(calls: Any, names: dict[str, str]) -> None:
    """Tool call ids → tool names from an assistant message's OpenAI-style `tool_calls`."""
    for call in loads(calls) if isinstance(loads(calls), list) else []:
        if isinstance(call, dict) and call.get("id") is not None:
            function = call.get("function")
            name = function.get("name") if isinstance(function, dict) else call.get("name")
            if name:
                names[str(call["id"])] = str(name)


def _message_tool_results(value: Any) -> list[Doc]:
    """Tool results in GenAI / OpenAI-style messages: `tool_call_response` parts (named by
    the earlier `tool_call` part with the same id) and `role: tool` messages."""
    value = loads(value)
    if not isinstance(value, list):
        return []
    names: dict[str, str] = {}
    docs: list[Doc] = []
    for msg in value:
        if not isinstance(msg, dict):
            continue
        _call_names(msg.get("tool_calls"), names)
        parts = loads(msg.get("parts"))
        if isinstance(parts, list):
            for part in parts:
                if not isinstance(part, dict):
                    continue
                call_id = None if part.get("id") is None else str(part["id"])
                if part.get("type") == "tool_call" and call_id and part.get("name"):
                    names[call_id] = str(part["name"])
                elif part.get("type") == "tool_call_response":
                    result = part.get("response", part.get("result"))
                    name = part.get("name") or (names.get(call_id) if call_id else None)
                    docs += tool_docs(result, None if name is None else str(name))
        elif _role(msg.get("role")) == "tool" and "content" in msg:
            call_id = msg.get("tool_call_id")
            name = msg.get("name") or (names.get(str(call_id)) if call_id is not None else None)
            docs += tool_docs(msg["content"], None if name is None else str(name))
    return docs


def _indexed_tool_results(attrs: dict[str, Any], prefix: str) -> list[Doc]:
    """OpenInference `llm.input_messages.N.message.role = tool` messages, named by the
    assistant's `message.tool_calls.M.tool_call.{id,function.name}`."""
    names: dict[str, str] = {}
    docs: list[Doc] = []
    for group in indexed(attrs, prefix):
        for call in indexed(group, "message.tool_calls."):
            if call.get("tool_call.id") is not None and call.get("tool_call.function.name"):
                names[str(call["tool_call.id"])] = str(call["tool_call.function.name"])
        if _role(group.get("message.role")) != "tool":
            continue
        content = group.get("message.content")
        if content is None:
            parts = indexed(group, "message.contents.")
            content = [
                p.get("message_content.text") for p in parts if p.get("message_content.text")
            ]
        call_id = group.get("message.tool_call_id")
        name = group.get("message.name") or (
            names.get(str(call_id)) if call_id is not None else None
        )
        docs += tool_docs(content, None if name is None else str(name))
    return docs


def _event_tool_results(span: Span) -> list[Doc]:
    """Older GenAI span events (and log events joined to the span): `gen_ai.tool.message`
    with `content` and `id`, named by the `gen_ai.assistant.message`'s `tool_calls`."""
    names: dict[str, str] = {}
    docs: list[Doc] = []
    for event in span.events:
        attrs = event.attributes
        body = loads(attrs.get("gen_ai.event.content", attrs.get("body")))
        fields = body if isinstance(body, dict) else {}
        if event.name == "gen_ai.assistant.message":
            _call_names(attrs.get("tool_calls", fields.get("tool_calls")), names)
        elif event.name == "gen_ai.tool.message":
            content = attrs.get("content", fields.get("content"))
            call_id = attrs.get("id", fields.get("id"))
            name = attrs.get("name", fields.get("name")) or (
                names.get(str(call_id)) if call_id is not None else None
            )
            docs += tool_docs(content, None if name is None else str(name))
    return docs


def tool_results(span: Span) -> list[Doc]:
    """What tools returned, as tool messages in a model call's input (GenAI
    `gen_ai.input.messages`, OpenInference `llm.input_messages`, `gen_ai.tool.message`
    events), in message order."""
    a = span.attributes
    if "gen_ai.input.messages" in a:
        value = a["gen_ai.input.messages"]
        if isinstance(value, str) and "tool" not in value:
            return []  # no tool message: skip parsing the prompt a second time
        return _message_tool_results(value)
    if "llm.input_messages.0.message.role" in a:
        return _indexed_tool_results(a, "llm.input_messages.")
    if "gen_ai.prompt.0.content" in a:  # OpenLLMetry
        return [
            doc
            for g in indexed(a, "gen_ai.prompt.")
            if _role(g.get("role")) == "tool"
            for doc in tool_docs(g.get("content"), _str(g.get("name")))
        ]
    if span.events:
        return _event_tool_results(span)
    return []
