"""The shipped entries of the conventions table (`_entry.py` says what each field means):
every tracing convention and SDK the extraction reads, and the log records the receivers
take, as data. A user's entries (`extraction.conventions`) come before these
(`monitor/extraction/_table.py`)."""

from __future__ import annotations

from monitor.conventions._entry import (
    BEFORE,
    CONTAINER,
    EMBEDDINGS,
    FIELDS,
    GENKIT,
    INDEXED,
    INDEXING,
    JSON,
    LISTED,
    LISTED_ROLES,
    MESSAGES,
    MODEL,
    PARAGRAPH,
    PROMPT,
    RETRIEVAL,
    SCORED_NODES,
    TEXT,
    TOOL,
    TOOL_MESSAGES,
    Convention,
    Kind,
    RagPrompt,
    Source,
)
from monitor.conventions._operations import GENAI_OPERATIONS, MODEL_OPERATIONS, SK_OPERATIONS
from monitor.conventions._shipped_parts import (
    ANTHROPIC_PARTS,
    BEDROCK_PARTS,
    COHERE_PARTS,
    GEMINI_PARTS,
    GENAI_PARTS,
    LLAMAINDEX_PARTS,
    OPENAI_PARTS,
    VERCEL_AI_PARTS,
)


def _s(*keys: str, encoding: str = TEXT, undeclared: bool = False) -> tuple[Source, ...]:
    return tuple(Source(k, encoding, undeclared=undeclared) for k in keys)


def _usage(key: str, *fields: str) -> tuple[Source, ...]:
    return tuple(Source(key, JSON, f) for f in fields)


# The older GenAI message events (span events, or log records joined to their span): the
# text in the event's `content`, or its body when that is the text itself.
_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_EVENT_BODIES = ("gen_ai.event.content", "body")
_GENAI_EVENT_INPUT = (
    *(
        Source(key, event=event, role=role, undeclared=True)
        for event, role in _MESSAGE_EVENTS.items()
        for key in ("content", *_EVENT_BODIES)
    ),
    Source("gen_ai.prompt", MESSAGES, event="gen_ai.content.prompt"),
)
# `gen_ai.choice`: the answer in its `message` (`{role, content}`), else its `content`.
_GENAI_EVENT_OUTPUT = (
    Source("message", field="content", event="gen_ai.choice", undeclared=True),
    Source("content", event="gen_ai.choice", undeclared=True),
    Source("message", event="gen_ai.choice", undeclared=True),
    Source("gen_ai.completion", MESSAGES, event="gen_ai.content.completion"),
)
# A tool span's `gen_ai.choice`: what the tool returned (Strands; its `gen_ai.tool.message`
# on the same span holds the arguments).
_GENAI_EVENT_TOOL_RESULT = tuple(
    Source(key, JSON, event="gen_ai.choice") for key in ("message", "content", "result")
)


_GENAI_TOKENS_IN = _s("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
_GENAI_TOKENS_OUT = _s("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
_GENAI_MODEL = _s("gen_ai.response.model", "gen_ai.request.model")
# Spring AI's default RAG prompts: QuestionAnswerAdvisor (1.x and 2.x) and
# RetrievalAugmentationAdvisor's ContextualQueryAugmenter put the documents, one a line
# (`Document::getText` joined by the line separator), between two lines of 21 dashes under
# a header line; the augmenter labels its question (`Query:`).
_SPRING_DASHES = "-" * 21
_SPRING_RAG_PROMPTS = (
    RagPrompt(
        "Context information is below, surrounded by " + _SPRING_DASHES,
        delimiter=_SPRING_DASHES,
        question=BEFORE,
    ),
    RagPrompt("Context information is below.", line=True, delimiter=_SPRING_DASHES),
)
# LangChain4j's DefaultContentInjector (Quarkus LangChain4j's too) appends this header and
# the contents joined by blank lines to the user's text.
_LANGCHAIN4J_RAG_PROMPT = RagPrompt("Answer using the following information:", question=PARAGRAPH)
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
        part_shapes=VERCEL_AI_PARTS,
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
        # Spring AI 2.x: its chat client runs the Tool Calling Advisor in every call (1.x
        # only when the app adds a ToolCallAdvisor). On Spring Boot 4 its observation
        # auto-configuration looks for the Tracer bean before Boot defines it and declares
        # no content handler, so the switches alone log nothing (spring-ai issue 5641, open
        # in 2.0.1). Only names the stack and its switch: the spring-ai entry reads it.
        "spring-ai 2.x",
        marked_values={"spring.ai.advisor.name": frozenset({"Tool Calling Advisor"})},
        switch="on Spring AI 2.x with Spring Boot 4, the spring.ai.*.observations.log-prompt / "
        "log-completion / log-query-response switches alone log nothing: Spring AI's "
        "observation auto-configuration looks for the Tracer before Boot 4 defines it and "
        "declares no content handler (spring-ai issue 5641). Declare the five handlers as "
        "beans, each a TracingAwareLoggingObservationHandler given the Tracer, around "
        "ChatModelPromptContentObservationHandler, ChatModelCompletionObservationHandler, "
        "ChatClientPromptContentObservationHandler, ChatClientCompletionObservationHandler "
        "and VectorStoreQueryResponseObservationHandler (the README's 'Tracing your app' "
        "shows them), with the logs exported over OTLP to the monitor (an OTel log "
        "appender)",
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
        "to true, with the logs exported over OTLP to the monitor (an OTel log appender), "
        "and the vector store built with its observationRegistry (one built without it "
        "has no span and logs no documents)",
        # Its content log lines (its observation handlers, such as
        # `ChatModelPromptContentObservationHandler`), by how their body starts.
        log_lines={
            "Chat Client Prompt Content:": "spring_ai.chat_client.prompt",
            "Chat Client Completion:": "spring_ai.chat_client.completion",
            "Chat Model Prompt Content:": "spring_ai.chat_model.prompt",
            "Chat Model Completion:": "spring_ai.chat_model.completion",
            "Vector Store Query Response:": "spring_ai.vector_store.response",
        },
        output_events=frozenset({"spring_ai.chat_model.completion"}),
        # Its content log lines, joined to their span as events.
        model_input=(
            Source("body", LISTED_ROLES, event="spring_ai.chat_client.prompt"),
            Source("body", LISTED, event="spring_ai.chat_model.prompt"),
        ),
        model_output=(
            Source("body", LISTED, event="spring_ai.chat_client.completion"),
            Source("body", LISTED, event="spring_ai.chat_model.completion"),
        ),
        query=_s("db.vector.query.content"),
        documents=(Source("body", LISTED, event="spring_ai.vector_store.response"),),
        # A @Tool's call, with spring.ai.tools.observations.include-content on.
        tool_name=_s("spring.ai.tool.definition.name"),
        tool_result=_s("spring.ai.tool.call.result", encoding=JSON),
        tool_arguments=_s("spring.ai.tool.call.arguments"),
        rag_prompts=_SPRING_RAG_PROMPTS,
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
                    "indexer": INDEXING,
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
        marked_values={"gen_ai.operation.name": SK_OPERATIONS},
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
        model_placeholders=frozenset({"unknown", "None"}),  # when it cannot tell
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
        # Every span of its (scope github.com/grafana/sigil/sdks/python) carries the mark, in
        # both modes; the GenAI attributes of its OTel export mode are the genai entry's.
        "agento11y",
        marks=("agento11y.sdk.name",),
        switch="agento11y (Grafana's agent-observability SDK, formerly Sigil) sends message "
        "content to its own generation API and never on its spans, whatever "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT says: set AGENTO11Y_PROTOCOL=otel "
        "with AGENTO11Y_ENABLE_EXPERIMENTAL_FEATURES=true (and the agento11y[otel] extra) "
        "for gen_ai.input.messages and gen_ai.output.messages on its spans, with "
        "AGENTO11Y_CONTENT_CAPTURE_MODE not metadata_only",
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
        marks=("gen_ai.",),
        language="dotnet",
        switch="Microsoft.Extensions.AI writes messages only with EnableSensitiveData = "
        "true on UseOpenTelemetry() (Semantic Kernel .NET: the AppContext switch "
        "Microsoft.SemanticKernel.Experimental.GenAI.EnableOTelDiagnosticsSensitive, or "
        "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true)",
    ),
    Convention(
        # Its AI services' spans (`langchain4j.aiservices.<Service>.<method>`) around
        # `completion <model>`, whose gen_ai.prompt (the chat memory's messages joined into
        # one string) and gen_ai.completion the genai entry reads.
        "quarkus-langchain4j",
        marked_names=("langchain4j.aiservices.",),
        language="java",
        joins_messages=True,
        rag_prompts=(_LANGCHAIN4J_RAG_PROMPT,),
        switch="Quarkus LangChain4j writes the prompt and the completion on its `completion "
        "<model>` spans only with quarkus.langchain4j.tracing.include-prompt=true and "
        "quarkus.langchain4j.tracing.include-completion=true",
    ),
    Convention(
        "java-genai",
        marks=("gen_ai.",),
        language="java",
        switch="turn on the instrumentation's content capture (LangChain4j's own "
        "observations carry no text: trace it with OpenInference, openinference-"
        "instrumentation-langchain4j; the OpenTelemetry Java agent: "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)",
    ),
    Convention(
        # JetBrains Koog writes GenAI spans; with content capture off it writes this in
        # place of every message's content, which is also how its traces are told apart.
        "koog",
        placeholders=("HIDDEN:",),
        switch="Koog writes HIDDEN:non-empty in place of every message unless its "
        "OpenTelemetry feature is installed with setVerbose(true)",
    ),
    Convention(
        "genai",
        standard=True,
        kinds=(
            Kind(
                "gen_ai.operation.name",
                GENAI_OPERATIONS,
                unlisted=None,
                fold="lower",
                calls=frozenset({"invoke_agent"}),
            ),
        ),
        marks=("gen_ai.",),
        switch=_GENAI_SWITCH,
        part_shapes=GENAI_PARTS,
        # What instrumentations write where they withhold a message's content.
        placeholders=("<redacted>", "[redacted]", "<elided>", "<hidden>", "[hidden]"),
        signs=("gen_ai.request.", "gen_ai.response.", "gen_ai.usage."),
        detail_events=frozenset({"gen_ai.client.inference.operation.details"}),
        event_bodies=_EVENT_BODIES,
        logged=True,
        log_events=frozenset(
            {*_MESSAGE_EVENTS, "gen_ai.choice", "gen_ai.client.inference.operation.details"}
        ),
        output_events=frozenset({"gen_ai.choice", "gen_ai.client.inference.operation.details"}),
        # On a span that declares no role these make it a model call.
        model_input=(
            *_s("gen_ai.input.messages", "gen_ai.prompt", encoding=MESSAGES, undeclared=True),
            *_GENAI_EVENT_INPUT,
        ),
        system=_s("gen_ai.system_instructions"),
        model_output=(
            *_s("gen_ai.output.messages", "gen_ai.completion", encoding=MESSAGES, undeclared=True),
            *_GENAI_EVENT_OUTPUT,
        ),
        model=_GENAI_MODEL,
        input_tokens=_GENAI_TOKENS_IN,
        output_tokens=_GENAI_TOKENS_OUT,
        # And the older database conventions' vector search: one `db.query.result` event a
        # document, on a span that declares nothing.
        query=_s("gen_ai.retrieval.query.text", "db.query.text"),
        documents=(
            Source("gen_ai.retrieval.documents", JSON, undeclared=True),
            Source("db.query.result", FIELDS, event="db.query.result", undeclared=True),
        ),
        tool_name=_s("gen_ai.tool.name"),
        tool_result=(
            Source("gen_ai.tool.call.result", JSON),
            Source("tool_response", JSON),
            Source("gen_ai.output.messages", TOOL_MESSAGES),
            *_GENAI_EVENT_TOOL_RESULT,
        ),
        tool_arguments=(
            Source("gen_ai.tool.call.arguments"),
            Source("content", event="gen_ai.tool.message"),
        ),
        conversation=_s("gen_ai.conversation.id"),
    ),
    # Message formats, not tracing conventions: each provider's or framework's native
    # message parts, as the instrumentations above record them in a call's messages.
    Convention(
        "openai",
        part_shapes=OPENAI_PARTS,
        marked_values={"gen_ai.system": frozenset({"openai"})},
        advice={
            "hosted_retrieval": "the OpenAI Responses API's file_search: OpenLLMetry's "
            "instrumentation drops the file_search_call results, and "
            "opentelemetry-instrumentation-openai-v2 does not trace the Responses API; the "
            'API returns them with include=["file_search_call.results"]'
        },
    ),
    Convention("anthropic", part_shapes=ANTHROPIC_PARTS),
    Convention("bedrock-converse", part_shapes=BEDROCK_PARTS),
    Convention("gemini", part_shapes=GEMINI_PARTS),
    Convention("cohere", part_shapes=COHERE_PARTS),
    Convention("llamaindex", part_shapes=LLAMAINDEX_PARTS),
    Convention(
        # LiteLLM's OpenTelemetry callback: its own request spans, or (without
        # USE_OTEL_LITELLM_REQUEST_SPAN) attributes written onto the app's current span.
        "litellm",
        marks=("hidden_params",),
        marked_names=("litellm_request", "raw_gen_ai_request"),
        switch="LiteLLM's OpenTelemetry callback records messages unless "
        "litellm.turn_off_message_logging (or the request's no-log metadata) is set",
        advice={
            "lone_root": "LiteLLM's callback writes onto the app's span from its own thread "
            "once the call returns: end that span only once the call's tracing is done, or "
            "set USE_OTEL_LITELLM_REQUEST_SPAN=true so the call is a span of its own, joined "
            "within trace_assembly.late_spans_wait_s"
        },
    ),
)
