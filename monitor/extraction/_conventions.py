"""The conventions table: for each tracing convention the extraction reads, which attribute
names a span's role and which values mean a request, a retrieval, a model call, a tool or an
agent; where the question, the documents, the answer, the model, the token counts and the
conversation are, and how each is encoded. The span readers (`_span_roles.py`,
`_model_call_spans.py`, `_retrieval_spans.py`, `_request_spans.py`, `_tool_results.py`,
`_instrumentations.py`) read this table and nothing else to know a convention: a new SDK
is an entry here (or in a user's `extraction.conventions`) and a test.

Order matters: a span's role is the first convention's that says something (so LangSmith's
own kind wins over the `gen_ai.operation.name` it also writes, Spring AI's over its
`framework` operation), and a trace's stack is the first whose marks any span carries; a
span's content is read from the standard (GenAI) first, then from the convention that
declared its role, then from every other in table order. A user's conventions come before the shipped ones.

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
- `tool_messages`: a tool span's `gen_ai.output.messages` (its `tool_call_response` parts).
Content carried in span events (the older GenAI events, `db.query.result`, Spring AI's
content log lines) is read by the event readers beside the span readers.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Final

from monitor.config import AttributeSource, UserConvention

MODEL: Final = "model"
TOOL: Final = "tool"
CONTAINER: Final = "container"  # a request, an agent, a workflow, a chain
RETRIEVAL: Final = "retrieval"
EMBEDDINGS: Final = "embeddings"
PROMPT: Final = "prompt"  # a prompt template rendered, traced like a call (LangSmith)
OTHER: Final = "other"  # named, but none of the above (guardrails, evaluators)

TEXT: Final = "text"
JSON: Final = "json"
MESSAGES: Final = "messages"
INDEXED: Final = "indexed"
GENKIT: Final = "genkit"
SCORED_NODES: Final = "scored_nodes"
TOOL_MESSAGES: Final = "tool_messages"
ENCODINGS = frozenset({TEXT, JSON, MESSAGES, INDEXED, GENKIT, SCORED_NODES, TOOL_MESSAGES})


@dataclass(frozen=True, slots=True)
class Source:
    """Where a value is: attribute `key` (a prefix for `indexed`), decoded by `encoding`;
    `field`: the member of a JSON object that holds it (`mlflow.chat.tokenUsage` →
    `input_tokens`); `undeclared`: read on a span that declares no role too (only for
    attributes no other convention writes)."""

    key: str
    encoding: str = TEXT
    field: str | None = None
    undeclared: bool = False


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
    those attributes, have that role (a user's retriever that declares no kind); `marks`, `marked_values`, `language`: what only this stack writes, so a
    trace can be said to come from it (attribute names; prefixes end in `.` or `:`;
    `standard`: the OpenTelemetry conventions other SDKs write beside their own, read
    before the declaring convention's content;
    `language`: any `gen_ai.*` attribute under that resource `telemetry.sdk.language`);
    `switch`: what turns its content capture on; `signs`: attributes (or prefixes) only a
    model call writes, which make a span that declares no role one when no span of its
    trace is one by its role (content capture off). The rest say where each part is."""

    name: str
    standard: bool = False
    kinds: tuple[Kind, ...] = ()
    span_names: frozenset[str] = frozenset()
    span_attributes: frozenset[str] = frozenset()
    span_role: str | None = None
    marks: tuple[str, ...] = ()
    marked_values: Mapping[str, frozenset[str]] = field(default_factory=dict)
    language: str | None = None
    switch: str = ""
    signs: tuple[str, ...] = ()
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


def _s(*keys: str, encoding: str = TEXT, undeclared: bool = False) -> tuple[Source, ...]:
    return tuple(Source(k, encoding, undeclared=undeclared) for k in keys)


def _usage(key: str, *fields: str) -> tuple[Source, ...]:
    return tuple(Source(key, JSON, f) for f in fields)


# GenAI operation names: a model call (Semantic Kernel's older names too), a retrieval,
# an agent or workflow (Strands' loop turn; MLflow's translation writes its span types).
_GENAI_OPERATIONS = {
    **dict.fromkeys(
        (
            "chat",
            "text_completion",
            "generate_content",
            "completion",
            "text_completions",
            "chat.completions",
            "chat.streaming_completions",
            "text.completions",
            "text.streaming_completions",
        ),
        MODEL,
    ),
    "execute_tool": TOOL,
    **dict.fromkeys(("retrieval", "retrieve", "retriever", "vector_db_retrieve"), RETRIEVAL),
    "embeddings": EMBEDDINGS,
    **dict.fromkeys(
        (
            "invoke_agent",
            "create_agent",
            "invoke_workflow",
            "workflow",
            "chain",
            "execute_event_loop_cycle",
        ),
        CONTAINER,
    ),
}
MODEL_OPERATIONS = frozenset(k for k, v in _GENAI_OPERATIONS.items() if v == MODEL)
_SK_OPERATIONS = frozenset(
    {
        "text_completions",
        "chat.completions",
        "chat.streaming_completions",
        "text.completions",
        "text.streaming_completions",
    }
)
_GENAI_TOKENS_IN = _s("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
_GENAI_TOKENS_OUT = _s("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
_GENAI_MODEL = _s("gen_ai.response.model", "gen_ai.request.model")
_GENAI_SWITCH = (
    "GenAI instrumentations capture no text by default: "
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (with "
    "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental: span_only, or event_only "
    "with the logs exported over OTLP to the monitor; Semantic Kernel: "
    "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true and its logs "
    "exported)"
)

SHIPPED: tuple[Convention, ...] = (
    Convention(
        "vercel-ai",
        kinds=(
            Kind(
                "ai.operationId",
                {
                    "ai.generateText": CONTAINER,
                    "ai.streamText": CONTAINER,
                    "ai.generateObject": CONTAINER,
                    "ai.streamObject": CONTAINER,
                    "ai.toolCall": TOOL,
                    "ai.embed": EMBEDDINGS,
                    "ai.embedMany": EMBEDDINGS,
                },
                suffixes={".doGenerate": MODEL, ".doStream": MODEL, ".doEmbed": EMBEDDINGS},
                prefix="ai.",
            ),
        ),
        marks=("ai.operationId",),
        switch="the Vercel AI SDK records the prompt and the answer only with "
        "experimental_telemetry: {isEnabled: true} and recordInputs / recordOutputs not "
        "false, on every generateText / streamText call",
        model_input=_s("ai.prompt.messages", encoding=MESSAGES),
        model_output=_s("ai.response.text"),
        model=_s("ai.model.id"),
        input_tokens=_s("ai.usage.inputTokens"),
        output_tokens=_s("ai.usage.outputTokens"),
        request_input=_s("ai.prompt", encoding=JSON),
        request_output=_s("ai.response.text", encoding=JSON),
        tool_name=_s("ai.toolCall.name"),
        tool_result=_s("ai.toolCall.result", encoding=JSON),
        tool_arguments=_s("ai.toolCall.args"),
    ),
    Convention(
        "mastra",
        marks=("mastra.",),
        switch="Mastra's observability exports each span's input and output unless a span "
        "output processor (such as SensitiveDataFilter) removes them, or the span is "
        "hidden",
        # `mastra.<mastra.span.type>.input` / `.output`: `{mastra.span.type}` is replaced
        # by that attribute's value.
        request_input=_s("mastra.{mastra.span.type}.input", encoding=JSON),
        request_output=_s("mastra.{mastra.span.type}.output", encoding=JSON),
    ),
    Convention(
        "spring-ai",
        kinds=(
            Kind(
                "spring.ai.kind",
                {
                    "chat_client": CONTAINER,
                    "advisor": CONTAINER,
                    "vector_store": RETRIEVAL,
                    "tool_call": TOOL,
                },
            ),
        ),
        marks=("spring.ai.kind",),
        switch="Spring AI writes content only as log lines: spring.ai.chat.client."
        "observations.log-prompt / log-completion, spring.ai.chat.observations.log-prompt "
        "/ log-completion and spring.ai.vectorstore.observations.log-query-response set "
        "to true, with the logs exported over OTLP to the monitor (an OTel log appender)",
        query=_s("db.vector.query.content"),
    ),
    Convention(
        "genkit",
        kinds=(
            Kind(
                "genkit:metadata:subtype",
                {
                    "flow": CONTAINER,
                    "model": MODEL,
                    "tool": TOOL,
                    "tool.v2": TOOL,
                    "retriever": RETRIEVAL,
                    "embedder": EMBEDDINGS,
                },
            ),
        ),
        marks=("genkit:",),
        switch="Genkit records genkit:input / genkit:output on every action span unless "
        "the telemetry is set to disable input and output logging",
        model_input=_s("genkit:input", encoding=GENKIT),
        model_output=_s("genkit:output", encoding=GENKIT),
        request_input=_s("genkit:input", encoding=JSON),
        request_output=_s("genkit:output", encoding=JSON),
        query=_s("genkit:input", encoding=GENKIT),
        documents=_s("genkit:output", encoding=JSON),
        tool_name=_s("genkit:name"),
        tool_result=_s("genkit:output", encoding=JSON),
    ),
    Convention(
        "semantic-kernel",
        marks=("sk.",),
        marked_values={"gen_ai.operation.name": _SK_OPERATIONS},
        switch="Semantic Kernel writes messages only with "
        "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true, and in "
        "Python only as log records: export its logs over OTLP to the monitor (a "
        "LoggingHandler on the semantic_kernel logger)",
    ),
    Convention(
        "autogen",
        marked_values={"gen_ai.system": frozenset({"autogen"})},
        switch="AutoGen's own spans (create_agent, invoke_agent, execute_tool) carry no "
        "messages nor tool results: trace AutoGen AgentChat with OpenInference "
        "(openinference-instrumentation-autogen-agentchat) too",
    ),
    Convention(
        "langsmith",
        kinds=(
            Kind(
                "langsmith.span.kind",
                {
                    "llm": MODEL,
                    "tool": TOOL,
                    "retriever": RETRIEVAL,
                    "embedding": EMBEDDINGS,
                    "prompt": PROMPT,
                    "chain": CONTAINER,
                    "parser": CONTAINER,
                },
                unlisted=CONTAINER,
                fold="lower",
            ),
        ),
        marks=("langsmith.span.kind",),
        switch="LangSmith's OTel mode records run inputs and outputs unless "
        "LANGSMITH_HIDE_INPUTS / LANGSMITH_HIDE_OUTPUTS are set",
        # Its run inputs and outputs; on a span that declares no kind these are a model
        # call's (GenAI's older attributes), so only declared containers read them so.
        request_input=_s("gen_ai.prompt"),
        request_output=_s("gen_ai.completion"),
        query=_s("gen_ai.prompt", encoding=JSON),
        documents=_s("gen_ai.completion", encoding=JSON),
        tool_result=_s("gen_ai.completion", encoding=JSON),
        conversation=_s("langsmith.metadata.session_id", "langsmith.metadata.thread_id"),
    ),
    Convention(
        "openinference",
        kinds=(
            Kind(
                "openinference.span.kind",
                {
                    "LLM": MODEL,
                    "TOOL": TOOL,
                    "RETRIEVER": RETRIEVAL,
                    "RERANKER": RETRIEVAL,
                    "EMBEDDING": EMBEDDINGS,
                    "CHAIN": CONTAINER,
                    "AGENT": CONTAINER,
                },
                fold="upper",
            ),
        ),
        marks=("openinference.span.kind",),
        switch="OpenInference records content unless OPENINFERENCE_HIDE_INPUTS, "
        "OPENINFERENCE_HIDE_OUTPUTS, OPENINFERENCE_HIDE_INPUT_MESSAGES or "
        "OPENINFERENCE_HIDE_OUTPUT_MESSAGES are set",
        model_input=_s("llm.input_messages", encoding=INDEXED),
        model_output=_s("llm.output_messages", encoding=INDEXED),
        model=_s("llm.model_name"),
        input_tokens=_s("llm.token_count.prompt"),
        output_tokens=_s("llm.token_count.completion"),
        # `input.value` / `output.value` are read on spans that declare nothing too.
        request_input=(Source("input.value", JSON, undeclared=True), Source("crew_inputs", JSON)),
        request_output=_s("output.value", encoding=JSON, undeclared=True),
        query=(Source("reranker.query"), Source("input.value", JSON)),
        documents=_s("retrieval.documents", encoding=INDEXED, undeclared=True),
        reranked=_s("reranker.output_documents", encoding=INDEXED),
        tool_name=_s("tool.name"),
        tool_result=_s("output.value", encoding=JSON),
        tool_arguments=_s("input.value"),
        conversation=_s("session.id"),
    ),
    Convention(
        "mlflow",
        kinds=(
            Kind(
                "mlflow.spanType",
                {
                    "CHAIN": CONTAINER,
                    "AGENT": CONTAINER,
                    "PARSER": CONTAINER,
                    "RETRIEVER": RETRIEVAL,
                    "RERANKER": RETRIEVAL,
                    "CHAT_MODEL": MODEL,
                    "LLM": MODEL,
                    "TOOL": TOOL,
                    "EMBEDDING": EMBEDDINGS,
                    "UNKNOWN": CONTAINER,
                },
                fold="upper",
            ),
        ),
        marks=("mlflow.",),
        signs=("mlflow.llm.model", "mlflow.chat.tokenUsage"),
        switch="MLflow records every traced function's inputs and outputs; "
        "mlflow.openai.autolog() (and the other autologs) the model calls: turn the "
        "autolog of your model client on",
        model_input=_s("mlflow.spanInputs", encoding=MESSAGES),
        model_output=_s("mlflow.spanOutputs", encoding=MESSAGES),
        model=_s("mlflow.llm.model"),
        input_tokens=_usage("mlflow.chat.tokenUsage", "input_tokens"),
        output_tokens=_usage("mlflow.chat.tokenUsage", "output_tokens"),
        request_input=_s("mlflow.spanInputs", encoding=JSON),
        request_output=_s("mlflow.spanOutputs", encoding=JSON),
        query=_s("mlflow.spanInputs", encoding=JSON),
        documents=_s("mlflow.spanOutputs", encoding=JSON),
        tool_name=_s("mlflow.spanFunctionName"),
        tool_result=_s("mlflow.spanOutputs", encoding=JSON),
        tool_arguments=_s("mlflow.spanInputs"),
        conversation=_s("session.id", "mlflow.trace.session"),
    ),
    Convention(
        "langfuse",
        kinds=(
            Kind(
                "langfuse.observation.type",
                {
                    "span": CONTAINER,
                    "agent": CONTAINER,
                    "chain": CONTAINER,
                    "generation": MODEL,
                    "retriever": RETRIEVAL,
                    "tool": TOOL,
                    "embedding": EMBEDDINGS,
                },
                fold="lower",
            ),
        ),
        marks=("langfuse.",),
        signs=("langfuse.observation.model.name", "langfuse.observation.usage_details"),
        switch="Langfuse records each observation's input and output unless "
        "capture_input / capture_output are off on @observe, or "
        "LANGFUSE_OBSERVE_DECORATOR_IO_CAPTURE_ENABLED=false",
        model_input=_s("langfuse.observation.input", encoding=MESSAGES),
        model_output=_s("langfuse.observation.output", encoding=MESSAGES),
        model=_s("langfuse.observation.model.name"),
        input_tokens=_usage(
            "langfuse.observation.usage_details", "input", "prompt_tokens", "input_tokens"
        ),
        output_tokens=_usage(
            "langfuse.observation.usage_details", "output", "completion_tokens", "output_tokens"
        ),
        request_input=_s("langfuse.observation.input", encoding=JSON),
        request_output=_s("langfuse.observation.output", encoding=JSON),
        query=_s("langfuse.observation.input", encoding=JSON),
        documents=_s("langfuse.observation.output", encoding=JSON),
        tool_result=_s("langfuse.observation.output", encoding=JSON),
        tool_arguments=_s("langfuse.observation.input"),
        conversation=_s("session.id", "langfuse.session.id", "langfuse.trace.session_id"),
    ),
    Convention(
        "openllmetry",
        kinds=(
            Kind("traceloop.span.kind", {"tool": TOOL}, unlisted=None),
            Kind(
                "llm.request.type",
                {**dict.fromkeys(MODEL_OPERATIONS, MODEL), "embedding": EMBEDDINGS},
                unlisted=None,
            ),
        ),
        marks=("llm.request.type", "traceloop."),
        switch="OpenLLMetry records content unless TRACELOOP_TRACE_CONTENT=false",
        model_input=_s("gen_ai.prompt", encoding=INDEXED, undeclared=True),
        model_output=_s("gen_ai.completion", encoding=INDEXED, undeclared=True),
        request_input=_s("traceloop.entity.input", encoding=JSON, undeclared=True),
        request_output=_s("traceloop.entity.output", encoding=JSON, undeclared=True),
        query=_s("traceloop.entity.input", encoding=JSON),
        documents=(
            Source("traceloop.entity.output", JSON),
            Source("traceloop.entity.output", SCORED_NODES, undeclared=True),
        ),
        tool_name=_s("traceloop.entity.name"),
        tool_result=_s("traceloop.entity.output", encoding=JSON),
        tool_arguments=_s("traceloop.entity.input"),
    ),
    Convention(
        "agent-framework",
        marks=("agent_framework.",),
        marked_values={"gen_ai.provider.name": frozenset({"microsoft.agent_framework"})},
        switch="Microsoft Agent Framework (Python) writes messages and tool results only "
        "with sensitive data on: ENABLE_SENSITIVE_DATA=true, or "
        "enable_instrumentation(enable_sensitive_data=True)",
    ),
    Convention(
        "google-adk",
        marks=("gcp.vertex.agent.",),
        switch="Google ADK 2 writes messages and tool results on its spans only with "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (or SPAN_AND_EVENT)",
    ),
    Convention(
        "dotnet-genai",
        language="dotnet",
        switch="Microsoft.Extensions.AI writes messages only with EnableSensitiveData = "
        "true on UseOpenTelemetry() (Semantic Kernel .NET: the AppContext switch "
        "Microsoft.SemanticKernel.Experimental.GenAI.EnableOTelDiagnosticsSensitive, or "
        "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true)",
    ),
    Convention(
        "java-genai",
        language="java",
        switch="turn on the instrumentation's content capture (LangChain4j's own "
        "observations carry no text: trace it with OpenInference, openinference-"
        "instrumentation-langchain4j; the OpenTelemetry Java agent: "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)",
    ),
    Convention(
        "genai",
        standard=True,
        kinds=(
            Kind(
                "gen_ai.operation.name",
                _GENAI_OPERATIONS,
                unlisted=None,
                fold="lower",
                calls=frozenset({"invoke_agent"}),
            ),
        ),
        marks=("gen_ai.",),
        switch=_GENAI_SWITCH,
        signs=("gen_ai.request.", "gen_ai.response.", "gen_ai.usage."),
        # On a span that declares no role these make it a model call.
        model_input=_s(
            "gen_ai.input.messages", "gen_ai.prompt", encoding=MESSAGES, undeclared=True
        ),
        system=_s("gen_ai.system_instructions"),
        model_output=_s(
            "gen_ai.output.messages", "gen_ai.completion", encoding=MESSAGES, undeclared=True
        ),
        model=_GENAI_MODEL,
        input_tokens=_GENAI_TOKENS_IN,
        output_tokens=_GENAI_TOKENS_OUT,
        query=_s("gen_ai.retrieval.query.text"),
        documents=_s("gen_ai.retrieval.documents", encoding=JSON, undeclared=True),
        tool_name=_s("gen_ai.tool.name"),
        tool_result=(
            Source("gen_ai.tool.call.result", JSON),
            Source("tool_response", JSON),
            Source("gen_ai.output.messages", TOOL_MESSAGES),
        ),
        tool_arguments=_s("gen_ai.tool.call.arguments"),
        conversation=_s("gen_ai.conversation.id"),
    ),
)

_USER_ROLES = {
    "request": CONTAINER,
    "agent": CONTAINER,
    "chain": CONTAINER,
    "retrieval": RETRIEVAL,
    "model": MODEL,
    "tool": TOOL,
    "embeddings": EMBEDDINGS,
    "other": OTHER,
}


def _sources(entries: Sequence[AttributeSource]) -> tuple[Source, ...]:
    return tuple(Source(e.attribute, e.encoding, e.field) for e in entries)


def from_config(entries: Sequence[UserConvention]) -> tuple[Convention, ...]:
    """The user's conventions (`extraction.conventions`) as table entries. `input` is a
    request's question, a model call's messages and a retrieval's query; `output` a
    request's or a model call's answer and a tool's result."""
    out = []
    for entry in entries:
        kinds: tuple[Kind, ...] = ()
        if entry.kind is not None:
            roles = {value: _USER_ROLES[role] for value, role in entry.kind.values.items()}
            kinds = (Kind(entry.kind.attribute, roles, unlisted=None),)
        match = entry.match
        # A JSON answer may be an OpenAI response or messages: read as messages are.
        answer = tuple(
            Source(e.attribute, MESSAGES if e.encoding == JSON else e.encoding, e.field)
            for e in entry.output
        )
        out.append(
            Convention(
                entry.name,
                kinds=kinds,
                span_names=frozenset(match.span_names) if match is not None else frozenset(),
                span_attributes=frozenset(match.attributes) if match is not None else frozenset(),
                span_role=_USER_ROLES[match.role] if match is not None else None,
                model_input=_sources(entry.input),
                model_output=answer,
                model=_sources(entry.model),
                input_tokens=_sources(entry.input_tokens),
                output_tokens=_sources(entry.output_tokens),
                request_input=_sources(entry.input),
                request_output=_sources(entry.output),
                query=_sources(entry.input),
                documents=_sources(entry.documents),
                tool_result=_sources(entry.output),
                conversation=_sources(entry.conversation),
            )
        )
    return tuple(out)


class Table:
    """The conventions one extraction reads, in order, and what follows from them (the
    kind attributes to look at, each reading order and where each part is in it), worked
    out once per set of conventions (`table_of`)."""

    def __init__(self, conventions: tuple[Convention, ...]) -> None:
        self.conventions = conventions
        self.kinds = tuple((kind, c) for c in conventions for kind in c.kinds)
        self.matching = tuple(c for c in conventions if c.span_role is not None)
        self.standard = tuple(c for c in conventions if c.standard)
        self._orders: dict[str | None, tuple[Convention, ...]] = {}
        self._sources: dict[tuple[str | None, str, bool], tuple[Source, ...]] = {}
        # The conversation's sources in table order: the user's first, whatever declared
        # a span's role.
        self.conversation = tuple(s for c in conventions for s in c.conversation)
        self.conversation_keys = frozenset(s.key for s in self.conversation)

    def order(self, first: Convention | None) -> tuple[Convention, ...]:
        """The order to read a span's content in when `first` declared its role: the
        standard conventions, `first`, then every other in table order."""
        name = first.name if first is not None else None
        found = self._orders.get(name)
        if found is None:
            lead = (first,) if first is not None and not first.standard else ()
            rest = (c for c in self.conventions if c not in lead and not c.standard)
            found = self._orders[name] = (*self.standard, *lead, *rest)
        return found

    def sources(
        self, first: Convention | None, part: str, undeclared_only: bool
    ) -> tuple[Source, ...]:
        """Where `part` is, in `order(first)`; `undeclared_only`: the sources read on a span
        that declares no role."""
        key = (first.name if first is not None else None, part, undeclared_only)
        found = self._sources.get(key)
        if found is None:
            found = self._sources[key] = tuple(
                source
                for convention in self.order(first)
                for source in getattr(convention, part)
                if not undeclared_only or source.undeclared
            )
        return found


@functools.lru_cache(maxsize=16)
def table_of(user: tuple[Convention, ...]) -> Table:
    """The table of the user's conventions before the shipped ones (conventions compare by
    identity: a worker's settings give the same objects to every extraction)."""
    return Table((*user, *SHIPPED))


@dataclass(frozen=True, slots=True)
class Reading:
    """What one extraction reads by (`table`), and what it worked out of each of its spans
    (`roles`: the declared role, by the span object's id: the spans live as long as the
    extraction)."""

    table: Table
    roles: dict[int, tuple[str, Convention] | None] | None


# Outside an extraction (the trace stage's questions, a log line's switch): the shipped
# conventions, nothing remembered.
_SHIPPED_READING = Reading(table_of(()), None)
_ACTIVE: ContextVar[Reading | None] = ContextVar("conventions", default=None)


def active() -> tuple[Convention, ...]:
    """The conventions the extraction in progress reads, in order."""
    return current().table.conventions


def current() -> Reading:
    """What the extraction in progress reads by."""
    return _ACTIVE.get() or _SHIPPED_READING


@contextmanager
def reading(conventions: Sequence[Convention]) -> Iterator[None]:
    """Extraction within reads `conventions` before the shipped ones, and remembers each
    span's declared role until it ends."""
    token = _ACTIVE.set(Reading(table_of(tuple(conventions)), {}))
    try:
        yield
    finally:
        _ACTIVE.reset(token)
