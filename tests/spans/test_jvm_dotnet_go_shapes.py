"""Stacks of other languages that no real app here covers, by the shapes their own source
writes: LangChain4j (Java: its own observations, and OpenInference's instrumentation of
it), Microsoft.Extensions.AI and Semantic Kernel (.NET), Genkit (Go). Spring AI's shapes
are only built here (`_spring_ai`, for the traces of tests/spans/test_traces_asking_nothing.py):
its real apps (tests/frameworks/test_frameworks_spring_ai.py) prove what it sends.
Each test names the files and the version it follows; the spans are written with the
OpenTelemetry SDK and encoded as its OTLP exporter does, log lines (Spring AI's content)
as log records in the span's scope, as the stack's OTel log appender exports them. With
its content switch on, a question is one record with the question, the retrieved or tool
documents and the answer; with it off, a suspect record that names the stack, never a
silent `not_rag`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.context import get_current
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span as SdkSpan

from harness.otlp import otlp_bytes
from monitor.extraction import extract_records, suspect_guidance
from monitor.records import EXTRACTION_SUSPECT, RagRecord
from monitor.spans import decode_logs_protobuf, decode_protobuf
from tests.spans.test_agent_stack_shapes import DOCS, QUESTION, TEXTS
from tests.trace.test_extraction_rule import _messages

ANSWER = "The Eiffel Tower was completed in 1889."


class Stack:
    """Spans and log lines of one app, as its SDK exports them (`language`: the SDK's
    `telemetry.sdk.language`)."""

    def __init__(self, language: str) -> None:
        resource = Resource.create({"service.name": "app", "telemetry.sdk.language": language})
        self.spans = InMemorySpanExporter()
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.tracer = provider.get_tracer("test")
        self.logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        logs = LoggerProvider(resource=resource)
        logs.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self._logger = logs.get_logger("org.springframework.ai")

    @contextmanager
    def span(self, name: str, **attributes: Any) -> Iterator[SdkSpan]:
        with self.tracer.start_as_current_span(name, attributes=attributes) as span:
            yield span

    def log(self, line: str) -> None:
        """A log line in the current span's scope (its trace and span ids)."""
        self._logger.emit(
            body=line,
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
            context=get_current(),
        )

    def records(self) -> list[RagRecord]:
        spans = decode_protobuf(otlp_bytes(list(self.spans.get_finished_spans())))
        events = decode_logs_protobuf(
            encode_logs(list(self.logs.get_finished_logs())).SerializeToString()
        )
        assert spans.rejected == 0 and events.rejected == 0, events.message
        return extract_records([*spans.spans, *events.spans])


def _right(stack: Stack, texts: list[str] = TEXTS) -> RagRecord:
    (record,) = stack.records()
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert record.context_text == texts
    assert EXTRACTION_SUSPECT not in record.metadata
    return record


def _suspect(stack: Stack, reason: str, instrumentation: str) -> RagRecord:
    (record,) = stack.records()
    assert record.metadata[EXTRACTION_SUSPECT] == reason
    assert record.metadata["instrumentation"] == instrumentation
    return record


# -- Spring AI 2.0.1 ----------------------------------------------------------------------
# spring-projects/spring-ai v2.0.1: spring-ai-client-chat/.../chat/client/observation/
# DefaultChatClientObservationConvention.java (span `spring_ai chat_client`,
# gen_ai.operation.name `framework`, spring.ai.kind `chat_client`),
# ChatClientPromptContentObservationHandler.java / ChatClientCompletionObservationHandler.java
# (`log-prompt`, `log-completion`: log lines through TracingAwareLoggingObservationHandler,
# in the span's scope); .../advisor/observation/DefaultAdvisorObservationConvention.java
# (`question_answer`, spring.ai.kind `advisor`); spring-ai-vector-store/.../observation/
# DefaultVectorStoreObservationConvention.java (`<db.system> query`, db.vector.query.content)
# and VectorStoreQueryResponseObservationHandler.java (`log-query-response`);
# spring-ai-model/.../chat/observation/DefaultChatModelObservationConvention.java (`chat
# <model>`), ChatModelPromptContentObservationHandler.java and
# ChatModelCompletionObservationHandler.java; spring-ai-commons/.../ObservabilityHelper.java
# (`["a", "b"]` lists and `["role":"text"]` entries, quoted as they are).

_FRAMEWORK = {"gen_ai.operation.name": "framework", "gen_ai.system": "spring_ai"}


def _quoted(texts: list[str]) -> str:
    return "[" + ", ".join(f'"{t}"' for t in texts) + "]"


def _spring_ai(stack: Stack, advisor: str, *, content: bool) -> None:
    augmented = f"{QUESTION}\n\nContext information is below.\n---\n" + "\n".join(TEXTS)
    client = {**_FRAMEWORK, "spring.ai.kind": "chat_client", "spring.ai.chat.client.stream": False}
    with stack.span("spring_ai chat_client", **client):
        kind = {**_FRAMEWORK, "spring.ai.kind": "advisor", "spring.ai.advisor.name": advisor}
        with stack.span(advisor.removesuffix("Advisor").lower(), **kind):
            store = {
                "db.system": "simple",
                "db.operation.name": "query",
                "spring.ai.kind": "vector_store",
                "db.vector.query.content": QUESTION,
                "db.vector.query.top_k": 2,
            }
            with stack.span("simple query", **store):
                if content:
                    stack.log("Vector Store Query Response:\n" + _quoted(TEXTS))
            model = {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.response.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.output_tokens": 12,
            }
            with stack.span("chat gpt-4o-mini", **model):
                if content:
                    stack.log("Chat Model Prompt Content:\n" + _quoted(["Be brief.", augmented]))
                    stack.log("Chat Model Completion:\n" + _quoted([ANSWER]))
        if content:
            stack.log(f'Chat Client Prompt Content:\n["user":"{QUESTION}", "system":"Be brief."]')
            stack.log("Chat Client Completion:\n" + _quoted([ANSWER]))


# -- Microsoft.Extensions.AI 10.8.0 --------------------------------------------------------
# dotnet/extensions v10.8.0: src/Libraries/Microsoft.Extensions.AI/ChatCompletion/
# OpenTelemetryChatClient.cs (`chat <model>`; with EnableSensitiveData
# gen_ai.system_instructions, gen_ai.input.messages, gen_ai.output.messages),
# Common/OtelMessageSerializer.cs and OtelMessageParts.cs (messages of `parts`: text,
# tool_call, tool_call_response), ChatCompletion/FunctionInvokingChatClient.cs
# (`orchestrate_tools`, with the usage totals) and Common/FunctionInvocationProcessor.cs
# (`execute_tool <name>`, gen_ai.tool.call.arguments / result when sensitive).


def _meai(stack: Stack, *, sensitive: bool) -> None:
    call = {"type": "tool_call", "id": "call_1", "name": "search", "arguments": {"q": QUESTION}}
    user = {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    asked = {"role": "assistant", "parts": [call]}
    result = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_1", "response": DOCS}],
    }
    answered = {
        "role": "assistant",
        "parts": [{"type": "text", "content": ANSWER}],
        "finish_reason": "stop",
    }

    def chat(messages: list[dict[str, Any]], output: dict[str, Any]) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 50,
        }
        if sensitive:
            attrs["gen_ai.system_instructions"] = json.dumps(
                [{"type": "text", "content": "Be brief."}]
            )
            attrs["gen_ai.input.messages"] = json.dumps(messages)
            attrs["gen_ai.output.messages"] = json.dumps([output])
        return attrs

    with stack.span("orchestrate_tools", **{"gen_ai.usage.input_tokens": 100}):
        with stack.span("chat gpt-4o-mini", **chat([user], asked)):
            pass
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.call.id": "call_1",
        }
        if sensitive:
            tool["gen_ai.tool.call.arguments"] = json.dumps({"q": QUESTION})
            tool["gen_ai.tool.call.result"] = json.dumps(DOCS)
        with stack.span("execute_tool search", **tool):
            pass
        with stack.span("chat gpt-4o-mini", **chat([user, asked, result], answered)):
            pass


def test_microsoft_extensions_ai_with_sensitive_data() -> None:
    stack = Stack("dotnet")
    _meai(stack, sensitive=True)
    record = _right(stack)
    assert [d.doc_uri for d in record.retrieved_context] == [d["id"] for d in DOCS]


def test_microsoft_extensions_ai_without_sensitive_data_names_its_switch() -> None:
    stack = Stack("dotnet")
    _meai(stack, sensitive=False)
    _suspect(stack, "no_query", "dotnet-genai")


# -- Semantic Kernel .NET 1.80.0 -----------------------------------------------------------
# microsoft/semantic-kernel dotnet-1.80.0: dotnet/src/InternalUtilities/src/Diagnostics/
# ModelDiagnostics.cs (`chat <model>`, gen_ai.operation.name `chat`; with the sensitive
# switch each message a span event `gen_ai.<role>.message` and the answer `gen_ai.choice`,
# their JSON in `gen_ai.event.content`: {role, name, content, tool_calls}).


def _sk_dotnet_event(span: SdkSpan, name: str, content: dict[str, Any]) -> None:
    span.add_event(name, {"gen_ai.event.content": json.dumps(content), "gen_ai.system": "openai"})


def test_semantic_kernel_dotnet_with_sensitive_events() -> None:
    stack = Stack("dotnet")
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
    }
    call = {
        "id": "c1",
        "function": {"name": "kb-search", "arguments": {"q": QUESTION}},
        "type": "function",
    }
    user: dict[str, Any] = {"role": "user", "name": None, "content": QUESTION, "tool_calls": []}
    with stack.span("POST /ask", **{"http.route": "/ask"}):
        with stack.span("chat gpt-4o-mini", **attrs) as first:
            _sk_dotnet_event(first, "gen_ai.user.message", user)
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "ToolCalls",
            }
            _sk_dotnet_event(first, "gen_ai.choice", choice)
        with stack.span("chat gpt-4o-mini", **attrs) as second:
            _sk_dotnet_event(second, "gen_ai.user.message", user)
            _sk_dotnet_event(
                second,
                "gen_ai.assistant.message",
                {"role": "assistant", "content": None, "tool_calls": [call]},
            )
            _sk_dotnet_event(
                second,
                "gen_ai.tool.message",
                {"role": "tool", "content": json.dumps(DOCS), "tool_calls": []},
            )
            answer = {
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER, "tool_calls": []},
                "finish_reason": "Stop",
            }
            _sk_dotnet_event(second, "gen_ai.choice", answer)
    _right(stack)


# -- LangChain4j 1.19.0 --------------------------------------------------------------------
# langchain4j/langchain4j 1.19.0: langchain4j-observation/.../convention/
# DefaultChatModelConvention.java and ChatModelDocumentation.java (`chat <model>`:
# operation, provider, models, token counts; no text at all).
# Arize-ai/openinference java/instrumentation/openinference-instrumentation-langchain4j
# (commit 23d0be7): LangChain4jAiServiceStartedListener.java (`AiService.start`, AGENT,
# input.value `Execution Started`), LangChain4jServiceCompletedListener.java (output.value
# `Execution Completed`), LangChain4jServiceRequestIssuedListener.java (`LLM` spans,
# llm.input_messages / llm.output_messages), LangChain4jToolExecutedEventListener.java
# (`AiService.tool`, TOOL, input.value arguments, output.value the result).


def test_langchain4j_observations_carry_no_text_and_give_a_suspect() -> None:
    stack = Stack("java")
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "OPEN_AI",
        "gen_ai.system": "OPEN_AI",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini",
        "outcome": "SUCCESS",
        "input_tokens": "50",
        "output_tokens": "12",
    }
    with stack.span("POST /ask", **{"http.route": "/ask"}):
        with stack.span("chat gpt-4o-mini", **chat):
            pass
    record = _suspect(stack, "no_query", "java-genai")
    assert record.model == "gpt-4o-mini"


def test_langchain4j_under_openinference_run_markers_are_not_the_question() -> None:
    stack = Stack("java")
    service = {
        "openinference.span.kind": "AGENT",
        "llm.system": "langchain4j",
        "input.value": "Execution Started",
        "output.value": "Execution Completed",
    }
    with stack.span("AiService.start", **service):
        first = {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            **_messages("llm.input_messages", [("system", "Be brief."), ("user", QUESTION)]),
        }
        with stack.span("LLM", **first):
            pass
        tool = {
            "openinference.span.kind": "TOOL",
            "tool.name": "search",
            "input.value": json.dumps({"q": QUESTION}),
            "output.value": json.dumps(DOCS),
        }
        with stack.span("AiService.tool", **tool):
            pass
        second = {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            **_messages("llm.input_messages", [("system", "Be brief."), ("user", QUESTION)]),
            **_messages("llm.output_messages", [("assistant", ANSWER)]),
        }
        with stack.span("LLM", **second):
            pass
    _right(stack)


# -- Quarkus LangChain4j 1.5.0 (Quarkus 3.27.1) ------------------------------------------
# As its real app sends them (tests/frameworks/test_frameworks_quarkus.py): an AI service's
# `langchain4j.aiservices.<Service>.<method>` span around `completion <model>`, whose
# gen_ai.prompt (core/runtime/.../listeners/PromptTextSpanContributor.java) is every
# message of the chat memory joined by "\n", the user message carrying LangChain4j's
# DefaultContentInjector ("{{userMessage}}\n\nAnswer using the following
# information:\n{{contents}}", the contents joined by blank lines; langchain4j-core 1.9.1).
_EARLIER_TURN = (
    "Where is the Louvre?\n\nAnswer using the following information:\n"
    "The Louvre is a museum in Paris.\n\nThe Mona Lisa hangs in the Louvre.\n"
    "The Louvre is in Paris."
)


def _quarkus_langchain4j(stack: Stack, last_turn: str | None, earlier: str = _EARLIER_TURN) -> None:
    model = {
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini",
        "gen_ai.usage.prompt_tokens": 120,
        "gen_ai.usage.completion_tokens": 9,
    }
    if last_turn is not None:
        model["gen_ai.prompt"] = f"{earlier}\n{last_turn}"
        model["gen_ai.completion"] = ANSWER
    with stack.span("langchain4j.aiservices.Assistant.chat"):
        with stack.span("completion gpt-4o-mini", **model):
            pass


def test_quarkus_langchain4j_last_turn_of_its_joined_chat_memory() -> None:
    """The question is the last user turn (the earlier one is history), the documents those
    LangChain4j's injector put into it, one each."""
    stack = Stack("java")
    injected = "\n\n".join(TEXTS)
    _quarkus_langchain4j(
        stack, f"{QUESTION}\n\nAnswer using the following information:\n{injected}"
    )
    assert _right(stack).context_source == "prompt"


def test_quarkus_langchain4j_system_message_is_not_the_question() -> None:
    """An AI service's `@SystemMessage`, joined before the first turn's user message."""
    stack = Stack("java")
    injected = "\n\n".join(TEXTS)
    system = "You are the museum's guide.\nBe brief."
    _quarkus_langchain4j(
        stack, f"{QUESTION}\n\nAnswer using the following information:\n{injected}", system
    )
    _right(stack)


def test_quarkus_langchain4j_custom_injection_template_is_not_split() -> None:
    """A template of the app's own in the joined chat memory: no document is guessed, and
    the record says why."""
    stack = Stack("java")
    template = "Use only these notes.\n<notes>\n{}\n</notes>\nQuestion: {}"
    earlier = template.format("The Louvre is a museum in Paris.", "Where is the Louvre?")
    last = template.format("\n\n".join(TEXTS), QUESTION)
    _quarkus_langchain4j(stack, last, f"{earlier}\nThe Louvre is in Paris.")
    (record,) = stack.records()
    assert (record.query, record.response, record.context_text) == (QUESTION, ANSWER, [])
    assert record.metadata["context_doubt"] == "prompt_not_split"
    assert record.context_source == "prompt"


def test_quarkus_langchain4j_without_content_is_a_suspect_naming_its_switches() -> None:
    stack = Stack("java")
    _quarkus_langchain4j(stack, None)
    record = _suspect(stack, "no_query", "quarkus-langchain4j")
    assert "quarkus.langchain4j.tracing.include-prompt=true" in suspect_guidance(
        "no_query", "quarkus-langchain4j"
    )
    assert record.model == "gpt-4o-mini"


# -- Genkit (Go) 1.7.0 ---------------------------------------------------------------------
# firebase/genkit go/v1.7.0: go/core/tracing/tracing.go (genkit:name, genkit:type,
# genkit:metadata:subtype, genkit:input / genkit:output as JSON, genkit:path,
# genkit:isRoot), go/core/action.go (an action's type is its span's subtype: flow, model,
# retriever, tool), go/ai/gen.go (ModelRequest {messages}, ModelResponse {message},
# RetrieverRequest {query}, RetrieverResponse {documents}; parts {text}; roles user,
# model, tool).


def _genkit(name: str, subtype: str, input: Any, output: Any, **extra: Any) -> dict[str, Any]:
    return {
        "genkit:name": name,
        "genkit:type": "action",
        "genkit:metadata:subtype": subtype,
        "genkit:input": json.dumps(input),
        "genkit:output": json.dumps(output),
        "genkit:path": f"/{{{name},t:{subtype}}}",
        "genkit:state": "success",
        **extra,
    }


def test_genkit_go_flow_with_a_retriever_and_a_model() -> None:
    stack = Stack("go")
    docs = [{"content": [{"text": d["content"]}], "metadata": {"source": d["id"]}} for d in DOCS]
    prompt = f"Answer from these:\n{TEXTS[0]}\n{TEXTS[1]}\n\nQuestion: {QUESTION}"
    request = {"messages": [{"role": "user", "content": [{"text": prompt}]}], "config": {}}
    response = {
        "message": {"role": "model", "content": [{"text": ANSWER}]},
        "finishReason": "stop",
        "usage": {"inputTokens": 40, "outputTokens": 9},
    }
    with stack.span(
        "ragFlow", **_genkit("ragFlow", "flow", QUESTION, ANSWER, **{"genkit:isRoot": True})
    ):
        retrieve = {"query": {"content": [{"text": QUESTION}]}, "options": {"k": 2}}
        with stack.span("kb", **_genkit("kb", "retriever", retrieve, {"documents": docs})):
            pass
        with stack.span("generate", **{"genkit:name": "generate", "genkit:type": "util"}):
            with stack.span(
                "googleai/gemini", **_genkit("googleai/gemini", "model", request, response)
            ):
                pass
    record = _right(stack)
    assert [d.doc_uri for d in record.retrieved_context] == [d["id"] for d in DOCS]
