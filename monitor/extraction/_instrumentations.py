"""Which instrumentation wrote a trace, by the conventions its spans follow, and the switch
of that stack that turns its content capture on: what a log line says when a model call
was traced but its question or answer was not (`_suspect.py`). Recognised by attributes
only each stack writes, the most specific first; a trace of none of them is `genai` when
it follows the OpenTelemetry GenAI conventions, else `unknown`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from monitor.spans import Span

# Semantic Kernel's own operation names (older releases) and `sk.*` attributes.
_SK_OPERATIONS = frozenset(
    {
        "text_completions",
        "chat.completions",
        "chat.streaming_completions",
        "text.completions",
        "text.streaming_completions",
    }
)


def _named(attributes: dict[str, Any], key: str) -> str:
    """A string attribute's value ("" when absent or not a string: any value may come)."""
    value = attributes.get(key)
    return value if isinstance(value, str) else ""


def _has_prefix(*prefixes: str) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    return lambda attributes, _: any(k.startswith(prefixes) for k in attributes)


def _dotnet_genai(attributes: dict[str, Any], resource: dict[str, Any]) -> bool:
    return resource.get("telemetry.sdk.language") == "dotnet" and any(
        k.startswith("gen_ai.") for k in attributes
    )


def _java_genai(attributes: dict[str, Any], resource: dict[str, Any]) -> bool:
    return resource.get("telemetry.sdk.language") == "java" and any(
        k.startswith("gen_ai.") for k in attributes
    )


# (name, how its spans are recognised, the switch that turns its content capture on)
_STACKS: tuple[tuple[str, Callable[[dict[str, Any], dict[str, Any]], bool], str], ...] = (
    (
        "vercel-ai",
        lambda a, _: "ai.operationId" in a,
        "the Vercel AI SDK records the prompt and the answer only with "
        "experimental_telemetry: {isEnabled: true} and recordInputs / recordOutputs not "
        "false, on every generateText / streamText call",
    ),
    (
        "mastra",
        _has_prefix("mastra."),
        "Mastra's observability exports each span's input and output unless a span output "
        "processor (such as SensitiveDataFilter) removes them, or the span is hidden",
    ),
    (
        "spring-ai",
        lambda a, _: "spring.ai.kind" in a,
        "Spring AI writes content only as log lines: spring.ai.chat.client.observations."
        "log-prompt / log-completion, spring.ai.chat.observations.log-prompt / "
        "log-completion and spring.ai.vectorstore.observations.log-query-response set to "
        "true, with the logs exported over OTLP to the monitor (an OTel log appender)",
    ),
    (
        "genkit",
        _has_prefix("genkit:"),
        "Genkit records genkit:input / genkit:output on every action span unless the "
        "telemetry is set to disable input and output logging",
    ),
    (
        "semantic-kernel",
        lambda a, _: (
            _named(a, "gen_ai.operation.name") in _SK_OPERATIONS
            or any(k.startswith("sk.") for k in a)
        ),
        "Semantic Kernel writes messages only with "
        "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true, and in "
        "Python only as log records: export its logs over OTLP to the monitor (a "
        "LoggingHandler on the semantic_kernel logger)",
    ),
    (
        "autogen",
        lambda a, _: a.get("gen_ai.system") == "autogen",
        "AutoGen's own spans (create_agent, invoke_agent, execute_tool) carry no messages "
        "nor tool results: trace AutoGen AgentChat with OpenInference "
        "(openinference-instrumentation-autogen-agentchat) too",
    ),
    (
        "langsmith",
        lambda a, _: "langsmith.span.kind" in a,
        "LangSmith's OTel mode records run inputs and outputs unless LANGSMITH_HIDE_INPUTS "
        "/ LANGSMITH_HIDE_OUTPUTS are set",
    ),
    (
        "openinference",
        lambda a, _: "openinference.span.kind" in a,
        "OpenInference records content unless OPENINFERENCE_HIDE_INPUTS, "
        "OPENINFERENCE_HIDE_OUTPUTS, OPENINFERENCE_HIDE_INPUT_MESSAGES or "
        "OPENINFERENCE_HIDE_OUTPUT_MESSAGES are set",
    ),
    (
        "openllmetry",
        lambda a, _: "llm.request.type" in a or any(k.startswith("traceloop.") for k in a),
        "OpenLLMetry records content unless TRACELOOP_TRACE_CONTENT=false",
    ),
    (
        "agent-framework",
        lambda a, _: (
            _named(a, "gen_ai.provider.name") == "microsoft.agent_framework"
            or any(k.startswith("agent_framework.") for k in a)
        ),
        "Microsoft Agent Framework (Python) writes messages and tool results only with "
        "sensitive data on: ENABLE_SENSITIVE_DATA=true, or "
        "enable_instrumentation(enable_sensitive_data=True)",
    ),
    (
        "google-adk",
        _has_prefix("gcp.vertex.agent."),
        "Google ADK 2 writes messages and tool results on its spans only with "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (or SPAN_AND_EVENT)",
    ),
    (
        "dotnet-genai",
        _dotnet_genai,
        "Microsoft.Extensions.AI writes messages only with EnableSensitiveData = true on "
        "UseOpenTelemetry() (Semantic Kernel .NET: the AppContext switch "
        "Microsoft.SemanticKernel.Experimental.GenAI.EnableOTelDiagnosticsSensitive, or "
        "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true)",
    ),
    (
        "java-genai",
        _java_genai,
        "turn on the instrumentation's content capture (LangChain4j's own observations "
        "carry no text: trace it with OpenInference, openinference-instrumentation-"
        "langchain4j; the OpenTelemetry Java agent: "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)",
    ),
    (
        "genai",
        _has_prefix("gen_ai."),
        "GenAI instrumentations capture no text by default: "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (with "
        "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental: span_only, or "
        "event_only with the logs exported over OTLP to the monitor; Semantic Kernel: "
        "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true and its "
        "logs exported)",
    ),
)
_SWITCHES = {name: switch for name, _, switch in _STACKS}
UNKNOWN = "unknown"


def instrumentation_of(spans: Sequence[Span]) -> str:
    """The stack that wrote these spans (`_STACKS`, the first any span matches), or
    `unknown`."""
    for name, recognised, _ in _STACKS:
        if any(recognised(s.attributes, s.resource) for s in spans):
            return name
    return UNKNOWN


def content_switch(instrumentation: str | None) -> str:
    """What turns content capture on in that stack."""
    return _SWITCHES.get(
        instrumentation or UNKNOWN,
        "turn on the instrumentation's content capture (see the README's 'Tracing your app')",
    )
