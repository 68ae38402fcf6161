"""`extraction`: the user's own tracing conventions, read before the shipped ones
(`monitor/conventions/_shipped.py`): which attribute names a span's role and
which of its values mean what, or which spans (by name or by an attribute they carry) have
a role; and where each part of a record is, in the span's attributes or its events, with
its encoding."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from monitor.config._fields import Section

Role = Literal["request", "agent", "chain", "retrieval", "model", "tool", "embeddings", "other"]
Encoding = Literal["text", "json", "messages", "indexed"]
MessageRole = Literal["system", "user", "assistant", "tool"]
# The shipped conventions' names: a user's convention takes another.
SHIPPED_CONVENTIONS = frozenset(
    {
        "vercel-ai",
        "mastra",
        "spring-ai",
        "genkit",
        "semantic-kernel",
        "autogen",
        "langsmith",
        "openinference",
        "mlflow",
        "langfuse",
        "openllmetry",
        "agento11y",
        "quarkus-langchain4j",
        "agent-framework",
        "google-adk",
        "dotnet-genai",
        "java-genai",
        "genai",
        "spring-ai 2.x",
        "openai",
        "anthropic",
        "bedrock-converse",
        "gemini",
        "cohere",
        "llamaindex",
        "koog",
        "litellm",
    }
)


class AttributeSource(Section):
    """Where a part is: a span attribute (a prefix for `indexed`: `<attribute>.N.<field>`),
    its encoding, and for a JSON object the member that holds it. A bare string is the
    attribute, as text."""

    attribute: str = Field(min_length=1)
    encoding: Encoding = "text"
    field: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_attribute(cls, data: Any) -> Any:
        return {"attribute": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _field_of_an_object(self) -> AttributeSource:
        # An indexed source is read entry by entry, never as one value: a field would be
        # silently ignored.
        if self.field is not None and self.encoding == "indexed":
            raise ValueError(
                "field: takes a member of one JSON object, and an indexed encoding reads "
                "<attribute>.N.<field> entries instead; leave field out, or use encoding json"
            )
        return self


class EventSource(AttributeSource):
    """An answer's or documents' source, which may be a span's events: with `event`, a
    field of each event so named (its attributes, and the members of a JSON body), each
    event one answer or one set of documents (one JSON object: one document)."""

    event: str | None = Field(default=None, min_length=1)


class MessageSource(EventSource):
    """An input's source; an event may hold one message of `role`."""

    role: MessageRole | None = None

    @model_validator(mode="after")
    def _role_of_an_event(self) -> MessageSource:
        if self.role is not None and self.event is None:
            raise ValueError(
                "role: names the message an event holds; name the event too (event:), or "
                "leave role out"
            )
        return self


# The most values a `kind` maps, and span names or attributes a `match` lists: each is held
# by every process that reads spans (docs/contract.md); an SDK has a handful.
MAX_KIND_VALUES = 1000
MAX_MATCH_NAMES = 1000


class ConventionKind(Section):
    """The attribute naming a span's role, and which of its values mean which role
    (values not listed leave the span to the other conventions)."""

    attribute: str = Field(min_length=1)
    values: dict[str, Role] = Field(min_length=1, max_length=MAX_KIND_VALUES)


class ConventionMatch(Section):
    """Spans that have `role` though they declare none: by name, or because they carry one
    of `attributes` (a decorated retriever whose documents the app writes itself)."""

    span_names: list[str] = Field(default=[], max_length=MAX_MATCH_NAMES)
    attributes: list[str] = Field(default=[], max_length=MAX_MATCH_NAMES)
    role: Role

    @model_validator(mode="after")
    def _matches_something(self) -> ConventionMatch:
        if not self.span_names and not self.attributes:
            raise ValueError("span_names: name the spans, or the attributes they carry")
        return self


PartKind = Literal[
    "text",
    "tool_call",
    "tool_call_response",
    "server_tool_call",
    "server_tool_call_response",
    "blob",
    "file",
    "uri",
    "reasoning",
    "generic",
]
MAX_PART_PATHS = 16


class ConventionPart(Section):
    """A native message part shape and the GenAI part kind it is: known by its `type`
    values (`type`, `block_type`) or by the `key` of a keyed block (`{"document": {...}}`);
    where its text, name, title, id, bytes (`data`: base64, hex, byte values), media type,
    URI and file id are, as dotted paths, the first that holds a value winning; `modality`
    (`document`: its text is one of the record's documents)."""

    kind: PartKind
    types: list[str] = Field(default=[], max_length=MAX_KIND_VALUES)
    key: str | None = Field(default=None, min_length=1)
    text: list[str] = Field(default=[], max_length=MAX_PART_PATHS)
    name: list[str] = Field(default=[], max_length=MAX_PART_PATHS)
    title: list[str] = Field(default=[], max_length=MAX_PART_PATHS)
    id: list[str] = Field(default=[], max_length=MAX_PART_PATHS)
    data: list[str] = Field(default=[], max_length=MAX_PART_PATHS)
    mime_type: list[str] = Field(default=[], max_length=MAX_PART_PATHS)
    uri: list[str] = Field(default=[], max_length=MAX_PART_PATHS)
    file_id: list[str] = Field(default=[], max_length=MAX_PART_PATHS)
    modality: str | None = None

    @model_validator(mode="after")
    def _known_somehow(self) -> ConventionPart:
        if not self.types and self.key is None:
            raise ValueError("types: name the part's type values, or the key of its block")
        return self


MAX_RAG_PROMPTS = 16
MAX_MARKS = 100


class ConventionRagPrompt(Section):
    """A framework's default RAG prompt, where the documents reach the model only inside
    the prompt: `header`, the text that opens the documents (`line`: a line of its own,
    else anywhere in the prompt); `delimiter`: the documents are the lines between the
    first two lines that are this (none: they follow the header, one a paragraph);
    `question`: where the user's question is (`before` the header, or the last
    `paragraph` before it), none when the prompt says it otherwise."""

    header: str = Field(min_length=1)
    line: bool = False
    delimiter: str | None = Field(default=None, min_length=1)
    question: Literal["before", "paragraph"] | None = None

    @field_validator("header")
    @classmethod
    def _header_says_something(cls, header: str) -> str:
        if not header.strip():
            raise ValueError("header: the text that opens the documents, not only blanks")
        return header

    @model_validator(mode="after")
    def _one_line(self) -> ConventionRagPrompt:
        if self.line and (self.header != self.header.strip() or "\n" in self.header):
            raise ValueError(
                "header: a header on a line of its own (line: true) is that line, without "
                "line breaks or surrounding blanks"
            )
        if self.delimiter is not None and (
            self.delimiter != self.delimiter.strip() or "\n" in self.delimiter
        ):
            raise ValueError(
                "delimiter: the line around the documents, without line breaks or "
                "surrounding blanks"
            )
        return self


class UserConvention(Section):
    """One convention of the user's: a span's role by `kind` or `match`; `input` (a
    request's question, a model call's messages, a retrieval's query), `output` (a
    request's or model call's answer, a tool's result), `documents` (a retrieval's, in
    order), `model`, `input_tokens`, `output_tokens`, `conversation` (the session id);
    `event_bodies`: event attributes holding an event's fields as one JSON object;
    `parts`: native message part shapes; `placeholders`: what stands where content was
    withheld (a value ending in `:` a prefix), never content; `marks`, `marked_names`:
    attributes (a prefix ends in `.` or `:`) and span names' beginnings only this stack
    writes, which tell its traces; `switch`: what turns its content capture on;
    `joins_messages`: its model call traced with one message holds the request's messages
    joined by newlines (needs marks); `rag_prompts`: its default RAG prompts."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    kind: ConventionKind | None = None
    match: ConventionMatch | None = None
    input: list[MessageSource] = []
    output: list[EventSource] = []
    documents: list[EventSource] = []
    model: list[AttributeSource] = []
    input_tokens: list[AttributeSource] = []
    output_tokens: list[AttributeSource] = []
    conversation: list[AttributeSource] = []
    event_bodies: list[str] = []
    parts: list[ConventionPart] = Field(default=[], max_length=MAX_KIND_VALUES)
    placeholders: list[str] = Field(default=[], max_length=MAX_KIND_VALUES)
    marks: list[str] = Field(default=[], max_length=MAX_MARKS)
    marked_names: list[str] = Field(default=[], max_length=MAX_MARKS)
    switch: str = ""
    joins_messages: bool = False
    rag_prompts: list[ConventionRagPrompt] = Field(default=[], max_length=MAX_RAG_PROMPTS)

    @field_validator("marks", "marked_names")
    @classmethod
    def _no_empty_mark(cls, marks: list[str]) -> list[str]:
        empty = [k for k, mark in enumerate(marks) if not mark.strip()]
        if empty:
            raise ValueError(f"item {empty[0]}: a mark is an attribute name or a beginning")
        return marks

    @field_validator("name")
    @classmethod
    def _not_shipped(cls, name: str) -> str:
        if name in SHIPPED_CONVENTIONS:
            raise ValueError(f"{name!r} is a shipped convention; give yours another name")
        return name

    @model_validator(mode="after")
    def _says_something(self) -> UserConvention:
        parts = (self.input, self.output, self.documents, self.model, self.conversation)
        if self.joins_messages and not (self.marks or self.marked_names):
            raise ValueError(
                "joins_messages: say how its traces are told (marks or marked_names): "
                "only a trace of this stack is read as messages joined into one string"
            )
        told = (self.parts, self.placeholders, self.rag_prompts, self.marks, self.marked_names)
        if self.kind is None and self.match is None and not any(parts) and not any(told):
            raise ValueError(
                "kind: a convention needs a kind or a match (what a span is), or where a "
                "part is (input, output, documents, model, conversation)"
            )
        return self


# The most conventions `extraction.conventions` takes: every span is tried against each
# (docs/contract.md).
MAX_CONVENTIONS = 100


class Extraction(Section):
    conventions: list[UserConvention] = Field(default=[], max_length=MAX_CONVENTIONS)

    @field_validator("conventions")
    @classmethod
    def _unique_names(cls, entries: list[UserConvention]) -> list[UserConvention]:
        # Each later entry is named at its own `name`, the key to change.
        seen: set[str] = set()
        twice = []
        for k, entry in enumerate(entries):
            if entry.name in seen:
                twice.append(f"{k}.name: {entry.name!r} is listed twice; names are unique")
            seen.add(entry.name)
        if twice:
            raise ValueError("\n".join(twice))
        return entries
