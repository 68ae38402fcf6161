"""Where no span carries the text, the warning (and `explain`) names that stack's own switch,
or says that no instrumentation records it, instead of a generic hint.

The spans are shaped as each SDK writes them (attribute names and values read from the
packages' source: agento11y 0.21.0's `client.py` and `otel_export.py`, OpenLLMetry's
`opentelemetry-instrumentation-openai` 0.62.4 `responses_wrappers.py`), written with the
real OpenTelemetry SDK."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.trace import Tracer

from harness.otlp import collector_json, finished_spans, otlp_bytes
from monitor.cli.explain import explain
from monitor.extraction import EXPLAIN, TraceRecords, extract_records, extract_within
from monitor.extraction._instrumentations import instrumentation_of
from monitor.processors.trace._assembler import FinishedTrace
from monitor.processors.trace._outcomes import Outcomes
from monitor.records.limits import SizeLimits
from monitor.spans import Span, decode_protobuf
from monitor.telemetry import Telemetry

QUESTION = "When was the Fjord Library founded?"
ANSWER = "The Fjord Library was founded in 1911."
GENAI_SWITCH = "GenAI instrumentations capture no text by default"
Emit = Callable[[Tracer], None]


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _agento11y(content: bool) -> Emit:
    """A generation span of agento11y: its default mode (content to its own API, none on
    the span), or its OTel export mode with content."""

    def emit(tracer: Tracer) -> None:
        attributes: dict[str, str | int] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 41,
            "agento11y.sdk.name": "sdk-python",
            "agento11y.generation.id": "gen-7",
        }
        if content:
            attributes["gen_ai.input.messages"] = _messages("user", QUESTION)
            attributes["gen_ai.output.messages"] = _messages("assistant", ANSWER)
        with tracer.start_as_current_span("POST /ask"):
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes=attributes):
                pass

    return emit


def _responses_file_search(tracer: Tracer) -> None:
    """OpenLLMetry's span of a Responses API call that ran the hosted file_search tool: the
    question and the answer's text, finish reason `tool_call`, the results dropped."""
    output = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": ANSWER}],
            "finish_reason": "tool_call",
        }
    ]
    with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
        with tracer.start_as_current_span(
            "openai.response",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4.1-mini",
                "gen_ai.response.model": "gpt-4.1-mini",
                "gen_ai.input.messages": _messages("user", QUESTION),
                "gen_ai.output.messages": json.dumps(output),
                "gen_ai.response.finish_reasons": ("tool_call",),
            },
        ):
            pass


def _lone_app_span(tracer: Tracer) -> None:
    """The app's request span alone, with no mark of any stack: no instrumentation recorded
    the model call (whatever the reason, nothing in the trace says LiteLLM)."""
    with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
        pass


def _lone_litellm_span(tracer: Tracer) -> None:
    """The app's request span alone, carrying what LiteLLM's callback wrote onto it before
    the span ended (its `hidden_params`), not the call: the callback's story applies."""
    attributes = {"http.route": "/ask", "hidden_params": "{}"}
    with tracer.start_as_current_span("POST /ask", attributes=attributes):
        pass


def _spans(emit: Emit) -> list[Span]:
    return decode_protobuf(otlp_bytes(finished_spans("shop-rag", emit))).spans


def _warnings(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, spans: list[Span]
) -> list[str]:
    outcome = extract_within(spans, "http.route", SizeLimits())
    assert isinstance(outcome, TraceRecords)
    outcomes = Outcomes(telemetry, None, SizeLimits())
    trace = FinishedTrace(spans[0].trace_id, spans, "root_ended", "otlp_http")
    with caplog.at_level(logging.WARNING, logger="monitor.processors.trace"):
        outcomes.extracted(trace, "shop-rag", outcome)
    return [r.getMessage() for r in caplog.records if "'shop-rag'" in r.getMessage()]


def _explained(tmp_path: Path, emit: Emit) -> str:
    trace_file = tmp_path / "trace.json"
    trace_file.write_text(collector_json(finished_spans("shop-rag", emit)) + "\n")
    out = io.StringIO()
    assert explain(trace_file, None, (), out, io.StringIO()) == 0
    return out.getvalue()


def test_agento11y_without_content_is_told_its_own_switch(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    lines = _warnings(telemetry, caplog, _spans(_agento11y(content=False)))
    said = [line for line in lines if "agento11y" in line]
    assert said, lines
    for line in said:
        assert "AGENTO11Y_PROTOCOL=otel" in line
        assert "AGENTO11Y_ENABLE_EXPERIMENTAL_FEATURES=true" in line
        assert GENAI_SWITCH not in line and EXPLAIN in line
    out = _explained(tmp_path, _agento11y(content=False))
    assert "agento11y: agento11y (Grafana's agent-observability SDK" in out
    assert GENAI_SWITCH not in out


def test_agento11y_in_its_otel_export_mode_reads_as_genai() -> None:
    spans = _spans(_agento11y(content=True))
    (record,) = extract_records(spans)
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert not record.metadata.get("extraction_suspect")
    assert instrumentation_of(spans) == "agento11y"


def test_hosted_file_search_says_no_instrumentation_records_its_results(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    spans = _spans(_responses_file_search)
    (record,) = extract_records(spans)
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert record.missing() == {"context"}
    lines = _warnings(telemetry, caplog, spans)
    (line,) = [line for line in lines if "has no context" in line]
    assert "ran a tool its provider hosts" in line and "file_search_call" in line
    assert "rag.context" in line and "span 'openai.response'" in line
    assert "retriever with no span of its own" not in line
    out = _explained(tmp_path, _responses_file_search)
    assert "the record has no context: no retrieval found, and the model call ran a tool" in out


def test_a_lone_app_span_names_itself_not_a_missing_convention(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    spans = _spans(_lone_app_span)
    assert extract_records(spans) == []
    (line,) = _warnings(telemetry, caplog, spans)
    assert "span 'POST /ask'" in line and "no instrumentation recorded the model call" in line
    assert "LiteLLM" not in line and "USE_OTEL_LITELLM_REQUEST_SPAN" not in line
    assert "declare your instrumentation" not in line and EXPLAIN in line
    out = _explained(tmp_path, _lone_app_span)
    assert "no record: the trace is one span with nothing under it" in out
    assert "the model client is not instrumented" in out and "LiteLLM" not in out


def test_a_lone_span_marked_by_litellm_gets_its_callbacks_story(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    spans = _spans(_lone_litellm_span)
    assert extract_records(spans) == []
    (line,) = _warnings(telemetry, caplog, spans)
    assert "no instrumentation recorded the model call" in line
    assert "USE_OTEL_LITELLM_REQUEST_SPAN=true" in line


def test_a_lone_app_span_of_a_service_that_gives_records_is_a_lost_request(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """LiteLLM under the app's own spans: most questions give records under `POST /ask`;
    one whose call was written after `POST /ask` ended leaves that span alone. The service
    gives records, so a record-less trace is not logged (health checks), but this one is a
    root that gives records elsewhere: logged, naming it. A lone health check is not."""
    outcomes = Outcomes(telemetry, None, SizeLimits())

    def handle(emit: Emit) -> None:
        spans = _spans(emit)
        outcome = extract_within(spans, "http.route", SizeLimits())
        assert isinstance(outcome, TraceRecords)
        trace = FinishedTrace(spans[0].trace_id, spans, "root_ended", "otlp_http")
        outcomes.extracted(trace, "shop-rag", outcome)

    def health(tracer: Tracer) -> None:
        with tracer.start_as_current_span("GET /health"):
            pass

    with caplog.at_level(logging.WARNING, logger="monitor.processors.trace"):
        handle(_agento11y(content=True))  # a record under `POST /ask`
        handle(health)
        handle(_lone_app_span)
    lines = [r.getMessage() for r in caplog.records if "'shop-rag'" in r.getMessage()]
    (line,) = [line for line in lines if "gave no record" in line or "alone" in line]
    assert "is the span 'POST /ask' alone, though traces under that span give records" in line
    assert "no instrumentation recorded the model call" in line and EXPLAIN in line
    assert "GET /health" not in "\n".join(lines)


def _spring_ai(chain: tuple[str, ...]) -> Emit:
    """Spring AI's spans of a chat client call with no content logged (as 1.1.2 and 2.0.1
    write them, seen from the real apps of tests/frameworks/test_frameworks_spring_ai.py):
    the chat client, an advisor span for each of `chain`, the chat model's call."""

    def emit(tracer: Tracer) -> None:
        framework = {"gen_ai.operation.name": "framework", "gen_ai.system": "spring_ai"}
        client = {**framework, "spring.ai.kind": "chat_client"}
        with tracer.start_as_current_span("spring_ai chat_client", attributes=client):
            for name in chain:
                advisor = {**framework, "spring.ai.kind": "advisor", "spring.ai.advisor.name": name}
                with tracer.start_as_current_span(name, attributes=advisor):
                    pass
            chat = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"}
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes=chat):
                pass

    return emit


def test_spring_ai_2_is_told_its_switches_alone_log_nothing_on_boot_4(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    one = _spans(_spring_ai(("QuestionAnswerAdvisor", "call")))
    two = _spans(_spring_ai(("Tool Calling Advisor", "QuestionAnswerAdvisor", "call")))
    assert (instrumentation_of(one), instrumentation_of(two)) == ("spring-ai", "spring-ai 2.x")
    lines = _warnings(telemetry, caplog, two)
    said = [line for line in lines if "looks wrongly extracted" in line]
    assert said, lines
    for line in said:
        assert "spring-ai issue 5641" in line and "TracingAwareLoggingObservationHandler" in line
        assert "switches alone log nothing" in line
    caplog.clear()
    lines = _warnings(telemetry, caplog, one)
    said = [line for line in lines if "looks wrongly extracted" in line]
    assert said and not any("5641" in line for line in said), lines
    assert all("spring.ai.vectorstore.observations.log-query-response" in x for x in said)
