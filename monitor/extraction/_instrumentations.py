"""Which instrumentation wrote a trace, by the conventions its spans follow, and the switch
of that stack that turns its content capture on: what a log line says when a model call
was traced but its question or answer was not (`_suspect.py`). Both come from the
conventions table (`marks`, `marked_values`, `marked_names`, `language`, `switch`): the
first convention whose marks any span carries; a trace of none of them is `unknown`. A
version of a stack whose switch works otherwise is told apart by its spans (`VARIANTS`):
Spring AI 2.x on Spring Boot 4, whose switches alone log nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from monitor.conventions import Convention
from monitor.extraction._table import active
from monitor.spans import Span

UNKNOWN = "unknown"
# Spring AI 2.x: its chat client runs the Tool Calling Advisor in every call (1.x only
# when the app adds a ToolCallAdvisor). On Spring Boot 4 its observation auto-configuration
# looks for the Tracer bean before Boot defines it and declares no content handler, so the
# switches the convention names log nothing there (spring-ai issue 5641, open in 2.0.1).
SPRING_AI_2 = "spring-ai 2.x"
_SPRING_AI_2_SWITCH = (
    "on Spring AI 2.x with Spring Boot 4, the spring.ai.*.observations.log-prompt / "
    "log-completion / log-query-response switches alone log nothing: Spring AI's observation "
    "auto-configuration looks for the Tracer before Boot 4 defines it and declares no "
    "content handler (spring-ai issue 5641). Declare the five handlers as beans, each a "
    "TracingAwareLoggingObservationHandler given the Tracer, around "
    "ChatModelPromptContentObservationHandler, ChatModelCompletionObservationHandler, "
    "ChatClientPromptContentObservationHandler, ChatClientCompletionObservationHandler and "
    "VectorStoreQueryResponseObservationHandler (the README's 'Tracing your app' shows "
    "them), with the logs exported over OTLP to the monitor (an OTel log appender)"
)


def _spring_ai_2(spans: Sequence[Span]) -> bool:
    return any(s.attributes.get("spring.ai.advisor.name") == "Tool Calling Advisor" for s in spans)


# A stack's version told apart by its spans: (convention, its name, test, its switch).
VARIANTS: tuple[tuple[str, str, Callable[[Sequence[Span]], bool], str], ...] = (
    ("spring-ai", SPRING_AI_2, _spring_ai_2, _SPRING_AI_2_SWITCH),
)


def _marked(convention: Convention, span: Span) -> bool:
    a = span.attributes
    if (
        convention.language is not None
        and span.resource.get("telemetry.sdk.language") != convention.language
    ):
        return False
    if convention.marked_names and span.name.startswith(convention.marked_names):
        return True
    for key, values in convention.marked_values.items():
        value = a.get(key)  # any attribute value may come: a list is no mark
        if isinstance(value, str) and value in values:
            return True
    prefixes = tuple(m for m in convention.marks if m.endswith((".", ":")))
    exact = [m for m in convention.marks if not m.endswith((".", ":"))]
    return any(m in a for m in exact) or bool(prefixes and any(k.startswith(prefixes) for k in a))


def instrumentation_of(spans: Sequence[Span]) -> str:
    """The stack that wrote these spans (the first convention any span carries the marks
    of, or its version in `VARIANTS` that the spans show), or `unknown`."""
    for convention in active():
        if any(_marked(convention, s) for s in spans):
            for of, name, shows, _ in VARIANTS:
                if of == convention.name and shows(spans):
                    return name
            return convention.name
    return UNKNOWN


def content_switch(instrumentation: str | None) -> str:
    """What turns content capture on in that stack."""
    for _, name, _, variant_switch in VARIANTS:
        if name == instrumentation:
            return variant_switch
    switch = next((c.switch for c in active() if c.name == instrumentation and c.switch), None)
    return switch or (
        "turn on the instrumentation's content capture (see the README's 'Tracing your app')"
    )
