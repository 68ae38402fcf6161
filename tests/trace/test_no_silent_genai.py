"""No GenAI trace is silent: a trace with any sign of a model call gives a record, marked
suspect with what is missing and the stack that wrote it; only a trace with no model
call at all is `not_rag`. And the conventions of stacks whose content travels in their
own attributes: the Vercel AI SDK's `ai.*` (as `ai` 6's generate-text.ts and
tool-call.ts write them: vercel/ai packages/ai/src/generate-text/) and Mastra's
`mastra.<span type>.input` / `.output` (@mastra/otel-exporter 1.4's span converter).
The rule is also checked through the whole front of the pipeline: OTLP from the SDK's
exporter into the receivers and the trace stage, counted and logged."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from harness.pipeline import RecordingStage, started
from harness.pipeline import metric_value as _value
from harness.pipeline import receiver_config as _config
from harness.wait import wait_until_async
from monitor.extraction import suspect_guidance
from monitor.records import EXTRACTION_SUSPECT, RagRecord
from monitor.telemetry import Telemetry
from tests.frameworks.apps.framework_apps import tracer_provider
from tests.trace.test_extraction_rule import Trace

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
_MAF = "microsoft.agent_framework"  # Microsoft Agent Framework's gen_ai.provider.name
DOCS = [
    {"id": "kb/eiffel.md", "content": "The Eiffel Tower was completed in 1889 for the World Fair."},
    {"id": "kb/water.md", "content": "At sea level, pure water boils at 100 degrees Celsius."},
]


def _only(t: Trace) -> RagRecord:
    (record,) = t.records()
    return record


def _vercel(t: Trace, *, content: bool) -> None:
    """`generateText` with a tool: the request span, a tool-call step, the tool, the
    answering step. Without content (`recordInputs` / `recordOutputs` false) only the
    operation ids, models and token counts are left."""

    def attrs(operation: str, **content_attrs: Any) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ai.operationId": operation,
            "operation.name": operation,
            "ai.model.id": "gpt-4o-mini",
            "ai.model.provider": "openai.chat",
        }
        if operation.endswith(".doGenerate"):
            out |= {
                "gen_ai.system": "openai.chat",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 30,
                "gen_ai.usage.output_tokens": 8,
            }
        return out | (content_attrs if content else {})

    user = {"role": "user", "content": [{"type": "text", "text": QUESTION}]}
    call = {
        "type": "tool-call",
        "toolCallId": "c1",
        "toolName": "searchKb",
        "input": {"query": QUESTION},
    }
    result = {
        "type": "tool-result",
        "toolCallId": "c1",
        "toolName": "searchKb",
        "output": {"type": "json", "value": DOCS},
    }
    prompt = json.dumps({"system": "Answer from the knowledge base.", "prompt": QUESTION})
    with t.span("POST /ask", http__route="/ask"):
        request = attrs("ai.generateText", **{"ai.prompt": prompt, "ai.response.text": ANSWER})
        with t.tracer.start_as_current_span("ai.generateText", attributes=request):
            first = attrs(
                "ai.generateText.doGenerate",
                **{
                    "ai.prompt.messages": json.dumps([user]),
                    "ai.response.toolCalls": json.dumps([call]),
                },
            )
            with t.tracer.start_as_current_span("ai.generateText.doGenerate", attributes=first):
                pass
            tool = attrs(
                "ai.toolCall",
                **{
                    "ai.toolCall.args": json.dumps({"query": QUESTION}),
                    "ai.toolCall.result": json.dumps(DOCS),
                },
            )
            tool |= {"ai.toolCall.name": "searchKb", "ai.toolCall.id": "c1"}
            with t.tracer.start_as_current_span("ai.toolCall", attributes=tool):
                pass
            messages = [
                user,
                {"role": "assistant", "content": [call]},
                {"role": "tool", "content": [result]},
            ]
            second = attrs(
                "ai.generateText.doGenerate",
                **{"ai.prompt.messages": json.dumps(messages), "ai.response.text": ANSWER},
            )
            with t.tracer.start_as_current_span("ai.generateText.doGenerate", attributes=second):
                pass


def test_vercel_ai_sdk_with_content_is_one_record_with_the_tools_documents() -> None:
    t = Trace()
    _vercel(t, content=True)
    record = _only(t)
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert record.context_text == [d["content"] for d in DOCS]
    assert [d.doc_uri for d in record.retrieved_context] == [d["id"] for d in DOCS]
    assert record.model == "gpt-4o-mini"
    assert EXTRACTION_SUSPECT not in record.metadata


def test_vercel_ai_sdk_without_content_is_a_suspect_naming_its_switch() -> None:
    t = Trace()
    _vercel(t, content=False)
    record = _only(t)
    assert record.metadata[EXTRACTION_SUSPECT] == "no_query"
    assert record.metadata["instrumentation"] == "vercel-ai"
    assert "recordInputs" in suspect_guidance("no_query", "vercel-ai")


def test_a_span_declaring_nothing_but_model_call_attributes_is_a_suspect_not_rag() -> None:
    """A stack nobody knows: a span with GenAI request and usage attributes, no operation
    name, no text."""
    t = Trace()
    with t.span("POST /ask"):
        with t.span("llm call", gen_ai__request__model="m", gen_ai__usage__input_tokens=12):
            pass
    record = _only(t)
    assert record.metadata[EXTRACTION_SUSPECT] == "no_query"
    assert record.model == "m" and record.input_tokens == 12
    assert record.metadata["instrumentation"] == "genai"


async def test_only_generic_genai_attributes_give_counted_logged_suspects_end_to_end(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """Three requests of an app whose model-call span has nothing but the generic GenAI
    attributes (a system, a model, token counts: no operation name, no kind any stack
    declares, no text), exported by the OpenTelemetry SDK over OTLP/HTTP: three records,
    each a counted `no_query` suspect; one log line (rate-limited) naming the GenAI
    switch; nothing dropped as `not_rag`."""
    caplog.set_level(logging.WARNING, logger="monitor.processors.trace")
    stage = RecordingStage()
    served = await started(_config(late_spans_wait_s=0), stage, telemetry)
    try:
        assert served.http is not None
        provider, roots = tracer_provider(
            "acme-chat", f"http://127.0.0.1:{served.http.port}/v1/traces"
        )
        tracer = provider.get_tracer("acme")
        model_call: dict[str, str | int] = {
            "gen_ai.system": "acme",
            "gen_ai.request.model": "acme-large",
            "gen_ai.usage.input_tokens": 12,
            "gen_ai.usage.output_tokens": 5,
        }
        for _ in range(3):
            with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
                with tracer.start_as_current_span("acme.complete", attributes=model_call):
                    pass
        await asyncio.to_thread(provider.shutdown)

        def outcomes() -> float:  # a record, or a trace dropped as not a request
            not_rag = _value(telemetry, "dropped_total", stage="assemble", reason="not_rag")
            return len(stage.records) + not_rag

        await wait_until_async(lambda: outcomes() >= 3, 30, "each trace's outcome")
    finally:
        await served.shutdown(5)
    assert _value(telemetry, "dropped_total", stage="assemble", reason="not_rag") == 0
    assert sorted(str(r.trace_id) for _, r in stage.records) == sorted(roots.trace_ids)
    for _, record in stage.records:
        assert record.metadata[EXTRACTION_SUSPECT] == "no_query"
        assert record.metadata["instrumentation"] == "genai"
        assert (record.model, record.input_tokens) == ("acme-large", 12)
    assert _value(telemetry, "records_suspect_total", service="acme-chat", reason="no_query") == 3
    (line,) = [r.getMessage() for r in caplog.records if "looks wrongly extracted" in r.message]
    assert "acme-chat" in line and suspect_guidance("no_query", "genai") in line


@pytest.mark.parametrize(
    ("instrumentation", "chain", "llm", "switch"),
    [
        pytest.param(
            "openinference",
            {"openinference.span.kind": "CHAIN"},
            {"openinference.span.kind": "LLM", "llm.model_name": "m"},
            "OPENINFERENCE_HIDE_INPUTS",
            id="openinference-hidden",
        ),
        pytest.param(
            "openllmetry",
            {"traceloop.span.kind": "workflow", "traceloop.entity.name": "rag"},
            {"llm.request.type": "chat", "gen_ai.request.model": "m"},
            "TRACELOOP_TRACE_CONTENT=false",
            id="openllmetry-no-content",
        ),
        # agent-framework-core 1.23.0 with sensitive data off, and google-adk 2.13.0
        # without content capture, as tests/frameworks/apps/agent_framework_app.py and
        # tests/frameworks/apps/google_adk_app.py (`no-content`) export them: GenAI spans, but each
        # framework's own switch.
        pytest.param(
            "agent-framework",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": _MAF},
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
            "ENABLE_SENSITIVE_DATA=true",
            id="agent-framework-no-sensitive-data",
        ),
        pytest.param(
            "google-adk",
            {"gen_ai.operation.name": "invoke_agent", "gcp.vertex.agent.event_id": "e1"},
            {"gen_ai.operation.name": "generate_content", "gen_ai.request.model": "m"},
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY",
            id="google-adk-no-content",
        ),
    ],
)
def test_a_model_span_by_its_kind_without_content_is_a_suspect_naming_its_switch(
    instrumentation: str, chain: dict[str, Any], llm: dict[str, Any], switch: str
) -> None:
    """OpenInference with its inputs and outputs hidden, OpenLLMetry with content tracing
    off: the model span is known by its kind alone. Agent frameworks writing GenAI spans
    without text: the log line names the framework's switch, not the GenAI one."""
    t = Trace()
    with t.tracer.start_as_current_span("rag", attributes=chain):
        with t.tracer.start_as_current_span("ChatOpenAI", attributes=llm):
            pass
    record = _only(t)
    assert record.metadata[EXTRACTION_SUSPECT] == "no_query"
    assert record.metadata["instrumentation"] == instrumentation
    assert switch in suspect_guidance("no_query", instrumentation)


def test_an_agent_invocation_alone_is_a_suspect() -> None:
    """AutoGen's own spans: an agent invoked and a tool run, no model call traced."""
    t = Trace()
    with t.span("POST /ask"):
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.system": "autogen"}
        with t.tracer.start_as_current_span("invoke_agent librarian", attributes=agent):
            tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
            with t.tracer.start_as_current_span("execute_tool search", attributes=tool):
                pass
    record = _only(t)
    assert (record.metadata[EXTRACTION_SUSPECT], record.metadata["instrumentation"]) == (
        "no_query",
        "autogen",
    )


def test_a_model_call_with_its_question_but_no_answer_is_a_suspect() -> None:
    t = Trace()
    with t.span("POST /ask"):
        chat = {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
            ),
        }
        with t.tracer.start_as_current_span("chat m", attributes=chat):
            pass
    record = _only(t)
    assert record.query == QUESTION and record.response is None
    assert record.metadata[EXTRACTION_SUSPECT] == "no_response"
    assert "no span carries its answer" in suspect_guidance("no_response", "genai")


def test_no_model_call_at_all_is_not_rag() -> None:
    """A health check, and an index build (embeddings only, with a model and tokens)."""
    t = Trace()
    with t.span("GET /health", http__route="/health"):
        with t.span("SELECT 1", db__system="postgresql"):
            pass
    assert t.records() == []
    t = Trace()
    embed: dict[str, Any] = {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.request.model": "e",
        "gen_ai.usage.input_tokens": 5,
    }
    with t.tracer.start_as_current_span("embeddings e", attributes=embed):
        pass
    assert t.records() == []
    t = Trace()
    with t.tracer.start_as_current_span("ai.embed", attributes={"ai.operationId": "ai.embed"}):
        with t.tracer.start_as_current_span(
            "ai.embed.doEmbed",
            attributes={"ai.operationId": "ai.embed.doEmbed", "gen_ai.request.model": "e"},
        ):
            pass
    assert t.records() == []


def test_mastra_agent_span_input_and_output_are_the_request() -> None:
    """Mastra's exporter: `invoke_agent` with `mastra.agent_run.input` / `.output`; its
    `chat` spans carry only the output messages; the tool its GenAI result."""
    t = Trace()
    agent = {
        "gen_ai.operation.name": "invoke_agent",
        "mastra.span.type": "agent_run",
        "mastra.agent_run.input": QUESTION,
        "mastra.agent_run.output": json.dumps({"text": ANSWER, "files": []}),
    }
    with t.tracer.start_as_current_span("invoke_agent kb", attributes=agent):
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "mastra.span.type": "tool_call",
            "gen_ai.tool.name": "searchKb",
            "gen_ai.tool.call.result": json.dumps(DOCS),
        }
        with t.tracer.start_as_current_span("execute_tool searchKb", attributes=tool):
            pass
        out = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
        chat = {
            "gen_ai.operation.name": "chat",
            "mastra.span.type": "model_inference",
            "gen_ai.output.messages": json.dumps(out),
            "gen_ai.request.model": "m",
        }
        with t.tracer.start_as_current_span("chat m", attributes=chat):
            pass
    record = _only(t)
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert record.context_text == [d["content"] for d in DOCS]
    assert EXTRACTION_SUSPECT not in record.metadata


# Observability SDKs' model calls with their content capture off: the span's role (or only
# its model and usage attributes, on a span that declares no role) is the sign.
SDK_CALLS_WITHOUT_CONTENT = [
    (
        "mlflow",
        {"mlflow.spanType": '"CHAT_MODEL"', "mlflow.llm.model": '"gpt-4o-mini"'},
    ),
    (
        "mlflow",
        {"mlflow.chat.tokenUsage": json.dumps({"input_tokens": 30, "output_tokens": 8})},
    ),
    (
        "langfuse",
        {"langfuse.observation.type": "generation", "langfuse.observation.model.name": "x"},
    ),
    (
        "langfuse",
        {"langfuse.observation.usage_details": json.dumps({"input": 30, "output": 8})},
    ),
]


@pytest.mark.parametrize(("stack", "attributes"), SDK_CALLS_WITHOUT_CONTENT)
def test_an_sdks_model_call_without_content_is_a_suspect_naming_the_sdk(
    stack: str, attributes: dict[str, Any]
) -> None:
    t = Trace()
    with t.span("POST /ask", http__route="/ask"), t.span("llm call", **attributes):
        pass
    record = _only(t)
    assert record.metadata[EXTRACTION_SUSPECT] == "no_query"
    assert record.metadata["instrumentation"] == stack
    switch = {"mlflow": "autolog", "langfuse": "capture_input"}[stack]
    assert f"({stack}: " in suspect_guidance("no_query", stack)
    assert switch in suspect_guidance("no_query", stack)
