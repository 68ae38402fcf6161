"""Agents whose retrieval is a tool, driven for real: the framework's own model and tool
extension points (a scripted model, `tests/frameworks/apps/openai_server.py` or the framework's test
model; a tool that really ranks `tests/frameworks/apps/framework_apps.KB`), the real instrumentation,
the SDK's OTLP/HTTP exporter into the running receivers.

For each question: one record, the question, the tool's documents in the order the tool
returned them as the context, the answer the framework returned; and the embedded
groundedness evaluator passes the faithful answers and fails the one with a planted wrong
fact (`PLANTED`); no record is marked `extraction_suspect`. The agent stacks of the
README's "Tracing your app" table (`AGENT_STACKS`: Strands Agents in both GenAI modes,
LangGraph under LangSmith's OTel mode and under OpenInference, LlamaIndex's
`FunctionAgent`, Agno, an MCP server's tool under the OpenAI Agents SDK, Semantic Kernel,
CrewAI, AutoGen AgentChat, Microsoft Agent Framework, Google ADK) also keep each document's
id as its `doc_uri`."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import pytest

from harness.framework_envs import (
    Monitor,
    against_the_monitor,
    app_monitor_config,
    run_python_app,
)
from harness.pipeline import RecordingStage
from harness.pipeline import metric_value as _value
from monitor.config import EvaluatorConfig
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.extraction import suspect_guidance
from monitor.records import EXTRACTION_SUSPECT
from monitor.telemetry import Telemetry
from tests.frameworks.apps.framework_apps import ANSWERS, KB, PLANTED, QUESTIONS

# (app module, instrumentation, variant, service name); the agent stacks of the README's
# "Tracing your app" table run slow: their tool returns `[{"id", "content"}]`, and each
# document must come back separate, in order, with its id as `doc_uri`.
APPS = [
    ("pydantic_ai", "pydantic-ai", "agent", "pydantic-ai"),
    ("openai_agents", "openinference", "agent", "openai-agents-openinference"),
    ("smolagents", "openinference", "agent", "smolagents-openinference"),
    ("openai_v2", "openai-v2", "span_only", "openai-v2-span-only"),
    ("openai_v2", "openai-v2", "event_only", "openai-v2-event-only"),
]
AGENT_STACKS = [
    ("strands", "strands", "default", "strands-default"),
    ("strands", "strands", "latest", "strands-latest"),
    ("langgraph_tools", "langsmith", "agent", "langgraph-tools-langsmith"),
    ("langgraph_tools", "openinference", "agent", "langgraph-tools-openinference"),
    ("llama_index_agent", "openinference", "function-agent", "llama-index-agent-openinference"),
    ("agno", "openinference", "agent", "agno-openinference"),
    ("openai_agents", "openinference", "mcp", "openai-agents-openinference-mcp"),
    ("crewai", "openinference", "crew", "crewai-openinference"),
    ("autogen", "openinference", "agent", "autogen-openinference"),
    ("agent_framework", "agent-framework", "agent", "agent-framework-agent"),
    ("google_adk", "google-adk", "span-only", "google-adk-span-only"),
]
# Semantic Kernel: content only in log records, exported after every span and before any
# (the app holds the second kind back until the test, having checked the monitor, lets it
# go). An agent stack too.
ORDERED = [
    ("semantic_kernel", "semantic-kernel", "spans-first", "semantic-kernel-spans-first"),
    ("semantic_kernel", "semantic-kernel", "logs-first", "semantic-kernel-logs-first"),
]


_URIS = {text: uri for uri, text in KB.items()}


@pytest.mark.parametrize(
    ("app", "instrumentation", "variant", "service"),
    APPS + [pytest.param(*row, marks=pytest.mark.e2e) for row in AGENT_STACKS],
)
async def test_tool_results_are_the_context_and_a_planted_fact_fails_groundedness(
    telemetry: Telemetry, app: str, instrumentation: str, variant: str, service: str
) -> None:
    stage, answers, traces = await against_the_monitor(
        telemetry, partial(run_python_app, app, instrumentation, variant)
    )
    row = (app, instrumentation, variant, service)
    await _records_ground_on_the_tools_documents(
        stage, answers, traces, service, doc_uris=row in AGENT_STACKS
    )


@pytest.mark.e2e
@pytest.mark.parametrize(("app", "instrumentation", "variant", "service"), ORDERED)
async def test_log_records_exported_after_or_before_every_span_join_their_traces(
    telemetry: Telemetry, app: str, instrumentation: str, variant: str, service: str
) -> None:
    """While the app holds its log records back, every span has arrived and no record
    exists: the traces wait for their log events. While it holds its spans back, every
    log event has arrived and no span. Either way, 6/6 whole records."""
    # A grace longer than any wait here (the default is 5 s), so that the test does not
    # depend on the machine's speed between the two kinds.
    config = app_monitor_config()
    assembly = config.trace_assembly.model_copy(update={"log_events_wait_s": 120})
    monitor = Monitor(telemetry, config.model_copy(update={"trace_assembly": assembly}))
    arrivals = monitor.arrivals
    held: list[str] = []

    async def gate(kind: str) -> None:
        held.append(kind)
        # Everything the app exported so far was acknowledged: the counts are final.
        received = _value(telemetry, "spans_received_total", receiver="otlp_http")
        if kind == "logs":
            assert (arrivals.spans, arrivals.events) == (received, 0) and received > 0
        else:
            assert (arrivals.spans, arrivals.events) == (0, received) and received > 0
        assert monitor.stage.records == []
        assert monitor.assembled("root_ended") == 0

    answers, traces = await monitor.run(
        partial(run_python_app, app, instrumentation, variant, gate=gate)
    )
    first = variant.removesuffix("-first")
    assert held == [{"spans": "logs", "logs": "spans"}[first]]
    if first == "spans":
        assert arrivals.spans_before_first_event == arrivals.spans
    else:
        assert arrivals.events_before_first_span == arrivals.events
    await _records_ground_on_the_tools_documents(
        monitor.stage, answers, traces, service, doc_uris=True
    )
    assert _value(telemetry, "dropped_total", stage="assemble", reason="late_span") == 0


async def _records_ground_on_the_tools_documents(
    stage: RecordingStage,
    answers: list[dict[str, Any]],
    traces: int,
    service: str,
    *,
    doc_uris: bool,
) -> None:
    """One record per question, whole, with the framework's answer and the tool's
    documents in order as its context (`doc_uris`: each with its id); the planted wrong
    fact fails groundedness and every faithful answer passes."""
    assert [a["question"] for a in answers] == [q for q, _ in QUESTIONS]
    assert len(stage.records) == len(answers) == traces == 6, [r.query for _, r in stage.records]
    groundedness = build(EvaluatorConfig(name="local_groundedness"), BuildContext())
    verdicts = {}
    for answer in answers:
        ((_, record),) = await stage.wait_for(answer["trace_id"])
        assert record.query == answer["question"]
        assert record.response == answer["response"]
        assert record.context_text == answer["sources"]
        assert record.missing() == frozenset()
        assert EXTRACTION_SUSPECT not in record.metadata
        assert record.service == service
        if doc_uris:
            uris = [d.doc_uri for d in record.retrieved_context]
            assert uris == [_URIS[text] for text in answer["sources"]]
        result = await groundedness.evaluate(record)
        verdicts[str(record.response).strip()] = result.passed  # Strands ends it with "\n"
    wrong = set(PLANTED.values())
    assert wrong <= verdicts.keys()
    assert {r: p for r, p in verdicts.items() if r in wrong} == dict.fromkeys(wrong, False)
    faithful = {r: p for r, p in verdicts.items() if r not in wrong}
    assert faithful == dict.fromkeys(faithful, True)
    assert set(faithful) <= set(ANSWERS.values())


# (app, instrumentation, variant, service, the suspect reason, the stack named)
WITHOUT_CONTENT = [
    ("autogen", "autogen", "agent", "autogen-autogen", "no_query", "autogen"),
    (
        "agent_framework",
        "agent-framework",
        "no-content",
        "agent-framework-no-content",
        "no_query",
        "agent-framework",
    ),
    ("google_adk", "google-adk", "no-content", "google-adk-no-content", "no_query", "google-adk"),
]


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("app", "instrumentation", "variant", "service", "reason", "stack"), WITHOUT_CONTENT
)
async def test_a_stack_traced_without_content_gives_counted_logged_suspects(
    telemetry: Telemetry,
    caplog: pytest.LogCaptureFixture,
    app: str,
    instrumentation: str,
    variant: str,
    service: str,
    reason: str,
    stack: str,
) -> None:
    """A stack whose spans show a model call or an agent invocation but no text: each
    question is still one record, marked suspect with the reason, counted, and logged with
    that stack's switch; never a silent `not_rag`."""
    caplog.set_level(logging.WARNING, logger="monitor.processors.trace")
    stage, answers, traces = await against_the_monitor(
        telemetry, partial(run_python_app, app, instrumentation, variant)
    )
    assert len(stage.records) == len(answers) == traces == 6
    for _, record in stage.records:
        assert record.metadata[EXTRACTION_SUSPECT] == reason
        assert record.metadata["instrumentation"] == stack
    assert _value(telemetry, "dropped_total", stage="assemble", reason="not_rag") == 0
    assert _value(telemetry, "records_suspect_total", service=service, reason=reason) == 6
    (line,) = [r.getMessage() for r in caplog.records if "looks wrongly extracted" in r.message]
    # The guidance names the stack and its own switch.
    assert service in line and suspect_guidance(reason, stack) in line
