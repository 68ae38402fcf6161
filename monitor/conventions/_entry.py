"""The conventions table's entries: for each tracing convention the extraction reads, which
attribute names a span's role and which values mean a request, a retrieval, a model call, a
tool or an agent; where the question, the documents, the answer, the model, the token counts
and the conversation are, and how each is encoded; and which OTLP log records it sends,
which the receivers take as events of their span. The shipped entries are data
(`_shipped.py`); a user's come from `extraction.conventions`; `monitor/extraction/_table.py`
puts them in reading order. The span readers (`monitor/extraction/`) and the log-record
decoders (`monitor/spans/_logs.py`, through `_log_records.py`) read the table and nothing
else to know a convention: a new SDK is an entry (or a user's `extraction.conventions`) and
a test.

Order matters: a span's role is the first convention's that says something (so LangSmith's
own kind wins over the `gen_ai.operation.name` it also writes, Spring AI's over its
`framework` operation), and a trace's stack is the first whose marks any span carries; a
span's content is read from the standard (GenAI) first, then from the convention that
declared its role, then from every other in table order. A user's conventions come before
the shipped ones.

A `Source` is an attribute of the span, or (`event` set) a field of the span's events so
named: the older GenAI message events, `db.query.result`, and the log records an OTLP log
exporter sends in the span's scope (Spring AI's content log lines), which arrive as events
of the span. An event's fields are its attributes and the members of its body (a JSON
object in one of the conventions' `event_bodies`). Each event gives one message (`role`),
one answer or one set of documents; a span's events are read in time order.

Encodings (`Source.encoding`), the closed set of decoders the table names:
- `text`: the value as text (a JSON string literal decoded: MLflow writes every value so);
- `json`: a JSON value: the question or answer is found inside it (a question field, a
  traced function's arguments, user messages), documents are its list of documents;
- `messages`: chat messages (`[{role, content|parts}]`, an OpenAI request or response,
  LangChain's generations, one `{role, content}` message);
- `indexed`: attributes `<key>.N.<field>` (`retrieval.documents.0.document.content`,
  `llm.input_messages.0.message.role`, `gen_ai.prompt.0.content`);
- `genkit`: Genkit's ModelRequest / ModelResponse / RetrieverRequest / RetrieverResponse;
- `scored_nodes`: a list of LlamaIndex `NodeWithScore`, as OpenLLMetry serializes it;
- `tool_messages`: a tool span's `gen_ai.output.messages` (its `tool_call_response` parts);
- `listed`: a log line `HEADER:\n["text", "text"]`, each text quoted as it is (not
  escaped): documents, an answer, or a prompt (the last text the user's, those before it
  system instructions);
- `listed_roles`: the same with `"role":"text"` entries: a prompt's messages;
- `fields`: one document in the fields `<key>.{document,content,id,score,distance,metadata}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from monitor.conventions._parts import PartShape

MODEL: Final = "model"
TOOL: Final = "tool"
CONTAINER: Final = "container"  # a request, an agent, a workflow, a chain
RETRIEVAL: Final = "retrieval"
EMBEDDINGS: Final = "embeddings"
INDEXING: Final = "indexing"  # documents written to a store (an indexer)
PROMPT: Final = "prompt"  # a prompt template rendered, traced like a call (LangSmith)
OTHER: Final = "other"  # named, but none of the above (guardrails, evaluators)

TEXT: Final = "text"
JSON: Final = "json"
MESSAGES: Final = "messages"
INDEXED: Final = "indexed"
GENKIT: Final = "genkit"
# The encoding above by its structure, as the readers name it: a request object holding
# `messages` (or a `query` object), a response holding one `message`.
WRAPPED: Final = GENKIT
SCORED_NODES: Final = "scored_nodes"
TOOL_MESSAGES: Final = "tool_messages"
LISTED: Final = "listed"
LISTED_ROLES: Final = "listed_roles"
FIELDS: Final = "fields"
ENCODINGS = frozenset(
    {
        TEXT,
        JSON,
        MESSAGES,
        INDEXED,
        GENKIT,
        SCORED_NODES,
        TOOL_MESSAGES,
        LISTED,
        LISTED_ROLES,
        FIELDS,
    }
)


@dataclass(frozen=True, slots=True)
class Source:
    """Where a value is: attribute `key` (a prefix for `indexed`), decoded by `encoding`;
    `field`: the member of a JSON object that holds it (`mlflow.chat.tokenUsage` →
    `input_tokens`); `undeclared`: read on a span that declares no role too (only for
    attributes no other convention writes); `event`: read from the span's events so named
    (`key` a field of each), not its attributes; `role`: the role of the message such an
    event holds (a prompt's source without one holds messages of their own roles)."""

    key: str
    encoding: str = TEXT
    field: str | None = None
    undeclared: bool = False
    event: str | None = None
    role: str | None = None


# Where a default RAG prompt's question is (`RagPrompt.question`).
BEFORE: Final = "before"  # the text before the header
PARAGRAPH: Final = "paragraph"  # the last paragraph before it (the last line after a join)


@dataclass(frozen=True, slots=True)
class RagPrompt:
    """A framework's default RAG prompt, where the documents reach the model only inside
    the prompt: `header`, the text that opens the documents (`line`: a line of its own,
    compared stripped; else anywhere in the prompt, its last occurrence); `delimiter`:
    the documents are the lines between the first two lines that are this, stripped (None:
    they follow the header, one a paragraph); `question`: where the user's question is
    (`before`: the text before the header; `paragraph`: the last paragraph before it, or
    its last line when the header comes earlier too, earlier turns joined into one
    string), None when the prompt says it otherwise (a labelled `Query:`)."""

    header: str
    line: bool = False
    delimiter: str | None = None
    question: str | None = None


@dataclass(frozen=True, slots=True)
class Kind:
    """An attribute naming a span's role: `roles` maps its values (`fold`ed: `upper`,
    `lower`, or as they are) to roles; a value ending in one of `suffixes` takes that
    role; a value not listed (but starting with `prefix`) takes `unlisted`, None: the
    next convention decides. `calls`: values of a span that is not a model call but shows
    that one was made (an agent invocation), when no span of its trace is one."""

    attribute: str
    roles: Mapping[str, str]
    unlisted: str | None = OTHER
    fold: str | None = None
    suffixes: Mapping[str, str] = field(default_factory=dict)
    prefix: str = ""
    calls: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, eq=False)
class Convention:
    """One tracing convention or SDK. `kinds`: the attributes naming a span's role;
    `span_names`, `span_attributes` / `span_role`: spans so named, or carrying one of
    those attributes, have that role (a user's retriever that declares no kind); `marks`,
    `marked_values`, `marked_names`, `language`: what only this stack writes, so a trace
    can be said to come from it (attribute names, prefixes ending in `.` or `:`; attribute
    values; span names' beginnings; `language`: its marks under that resource
    `telemetry.sdk.language` only); `standard`: the OpenTelemetry
    conventions other SDKs write beside their own, read before the declaring
    convention's content;
    `switch`: what turns its content capture on; `signs`: attributes (or prefixes) only a
    model call writes, which make a span that declares no role one when no span of its
    trace is one by its role (content capture off); `detail_events`: events whose fields
    are the span's own content (one event per model call), filling the attributes it lacks;
    `event_bodies`: event attributes that hold the event's fields as one JSON object;
    `logged`: its model calls may send their content apart, as log records (a model call
    whose output has not come waits for them); `log_events`: the log records, by event
    name, that the receivers take as events of their span; `log_lines`: log records with
    no event name taken by how their body starts (a framework that logs lines), each
    becoming the event named; `output_events`: those of its log events that carry a model
    call's output (the last its instrumentation writes for a call: once one has come, the
    call's content is in); `model_placeholders`: model names it writes
    when it cannot tell the model; `part_shapes`: its native message parts and which GenAI
    part each is (`_parts.py`); `placeholders`: what it writes where content was withheld
    (`HIDDEN:non-empty`): never content (a value ending in `:` is a prefix, compared
    case-insensitively); `advice`: what to do, by the cause a trace that carries its marks
    is given (`monitor/extraction/_diagnosis.py`: `lone_root`, `hosted_retrieval`), added
    to the cause's own text; `rag_prompts`: its default RAG prompts (`RagPrompt`), read in
    any trace; `joins_messages`: a model call of its, traced with one message, holds all
    the request's messages (system message, chat memory's turns) joined by newlines into
    one string. The rest say where each part is."""

    name: str
    standard: bool = False
    kinds: tuple[Kind, ...] = ()
    span_names: frozenset[str] = frozenset()
    span_attributes: frozenset[str] = frozenset()
    span_role: str | None = None
    marks: tuple[str, ...] = ()
    marked_values: Mapping[str, frozenset[str]] = field(default_factory=dict)
    marked_names: tuple[str, ...] = ()
    language: str | None = None
    switch: str = ""
    signs: tuple[str, ...] = ()
    detail_events: frozenset[str] = frozenset()
    event_bodies: tuple[str, ...] = ()
    logged: bool = False
    log_events: frozenset[str] = frozenset()
    log_lines: Mapping[str, str] = field(default_factory=dict)
    output_events: frozenset[str] = frozenset()
    model_placeholders: frozenset[str] = frozenset()
    part_shapes: tuple[PartShape, ...] = ()
    placeholders: tuple[str, ...] = ()
    advice: Mapping[str, str] = field(default_factory=dict)
    rag_prompts: tuple[RagPrompt, ...] = ()
    joins_messages: bool = False
    model_input: tuple[Source, ...] = ()  # the messages a model call was sent
    system: tuple[Source, ...] = ()  # its system instructions, apart from its messages
    model_output: tuple[Source, ...] = ()  # the text it returned
    model: tuple[Source, ...] = ()
    input_tokens: tuple[Source, ...] = ()
    output_tokens: tuple[Source, ...] = ()
    request_input: tuple[Source, ...] = ()  # a request's (container's) question
    request_output: tuple[Source, ...] = ()  # and what it handed back
    query: tuple[Source, ...] = ()  # a retrieval's query
    documents: tuple[Source, ...] = ()  # a retrieval's documents, in order
    reranked: tuple[Source, ...] = ()  # a reranker's output documents
    tool_name: tuple[Source, ...] = ()
    tool_result: tuple[Source, ...] = ()
    tool_arguments: tuple[Source, ...] = ()
    conversation: tuple[Source, ...] = ()  # the conversation (session) id
