"""A wrong extraction is loud: a record whose context only repeats the question or a
tool's arguments, whose answer repeats the question, or that has no question although a
model call was traced, is marked with the reason (`metadata.extraction_suspect`),
counted per service and reason, logged with what fixes it, and kept out of evaluation —
so out of defect rates and alert windows — unless `pipeline.evaluate_suspect_records`."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from monitor.alerts.engine import AlertEngine
from monitor.component import SampledRecord
from monitor.config import AbsoluteRule, Budget, EvaluatorConfig, load_config
from monitor.exporters.prometheus import MetricsSink
from monitor.extraction import Cause
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation import EvaluationStage, Settings
from monitor.processors.trace._assembler import FinishedTrace
from monitor.processors.trace._outcomes import Outcomes
from monitor.records import EXTRACTION_SUSPECT, ContextDoc, RagRecord
from monitor.records.limits import SizeLimits
from monitor.telemetry import Telemetry
from tests.evaluation.test_evaluation_stage import ScriptedEvaluator
from tests.spans.test_agent_stack_shapes import ANSWER, ARGS, QUESTION, _span
from tests.trace.test_extraction_rule import Trace

SEARCH = "search_docs"


def _agent_with_tool(result: str, *, query_in_spans: bool = True) -> Trace:
    t = Trace()
    agent = {"gen_ai.operation.name": "invoke_agent"}
    with _span(t, "invoke_agent a", **agent) as span:
        if query_in_spans:
            span.add_event("gen_ai.user.message", {"content": QUESTION})
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": SEARCH,
            "gen_ai.tool.call.arguments": ARGS,
            "gen_ai.tool.call.result": result,
        }
        with _span(t, f"execute_tool {SEARCH}", **tool):
            pass
        out = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
        with _span(
            t,
            "chat",
            **{"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(out)},
        ):
            pass
    return t


def _reason(t: Trace) -> str | None:
    (record,) = t.records()
    return record.metadata.get(EXTRACTION_SUSPECT)


def test_a_tool_result_that_is_its_arguments_is_flagged() -> None:
    # The arguments mistaken for the result, in other spellings of the same value.
    for result in (json.dumps({"query": QUESTION}, indent=2), str({"query": QUESTION})):
        assert _reason(_agent_with_tool(result)) == "context_is_tool_arguments"


def test_context_that_only_repeats_the_question_is_flagged() -> None:
    assert _reason(_agent_with_tool(QUESTION)) == "context_repeats_query"


def test_a_real_result_is_not_flagged() -> None:
    docs = json.dumps([{"id": "kb/eiffel.md", "content": "Completed in 1889."}])
    assert _reason(_agent_with_tool(docs)) is None


def test_no_question_while_a_model_call_was_traced_is_flagged() -> None:
    """Semantic Kernel with spans only: its spans carry no message content."""
    t = Trace()
    with _span(t, "invoke_agent kb", **{"gen_ai.operation.name": "invoke_agent"}):
        chat = {"gen_ai.operation.name": "chat.completions", "gen_ai.request.model": "scripted"}
        with _span(t, "chat.completions scripted", **chat):
            pass
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": SEARCH}
        with _span(t, f"execute_tool {SEARCH}", **tool):
            pass
        with _span(t, "chat.completions scripted", **chat):
            pass
    (record,) = t.records()
    assert record.query is None
    assert record.metadata[EXTRACTION_SUSPECT] == "no_query"


def test_an_answer_that_repeats_the_question_is_flagged() -> None:
    t = Trace()
    chain = {"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": QUESTION}
    with _span(t, "chain", **chain):
        retriever = {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.content": "Completed in 1889.",
        }
        with _span(t, "retrieve", **retriever):
            pass
    assert _reason(t) == "answer_repeats_query"


def _record(i: int, service: str, suspect: str | None) -> RagRecord:
    return RagRecord(
        request_id=f"r{i}",
        trace_id=f"{i:032x}",
        service=service,
        query=QUESTION,
        retrieved_context=(ContextDoc(content=ARGS),),
        response=ANSWER,
        metadata={EXTRACTION_SUSPECT: suspect} if suspect else {},
    )


def _value(telemetry: Telemetry, name: str, **labels: str) -> float:
    return telemetry.registry.get_sample_value(f"rag_monitor_{name}_total", labels) or 0.0


@pytest.mark.parametrize("evaluate_suspect", [False, True])
async def test_a_suspect_record_is_counted_logged_and_kept_out_of_the_alert_window(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, evaluate_suspect: bool
) -> None:
    outcomes = Outcomes(telemetry, None, SizeLimits())
    evaluator = ScriptedEvaluator("local_groundedness", value=0.0)  # every verdict a defect
    rule = AbsoluteRule(
        name="h", evaluator="local_groundedness", max_defect_rate=0.1, min_samples=1
    )
    alerts = AlertEngine([rule], telemetry)
    stage = EvaluationStage(
        [(evaluator, EvaluatorConfig(name="local_groundedness"))],
        BudgetGate(Budget()),
        [MetricsSink(telemetry), alerts],
        telemetry,
        settings=Settings(evaluate_suspect=evaluate_suspect),
    )
    await stage.start()
    records = [_record(1, "healthy", None), _record(2, "broken", "context_is_tool_arguments")]
    with caplog.at_level(logging.WARNING, logger="monitor.processors.trace"):
        for record in records:
            outcomes.record(record, "otlp_http")
    sampled = frozenset({"local_groundedness"})
    assert (
        await stage.put_many([SampledRecord(r, "otlp_http", sampled, None) for r in records]) == 2
    )
    await stage.shutdown(5)
    assert (
        _value(telemetry, "records_suspect", service="broken", reason="context_is_tool_arguments")
        == 1
    )
    assert (
        _value(telemetry, "records_suspect", service="healthy", reason="context_is_tool_arguments")
        == 0
    )
    (line,) = [r.getMessage() for r in caplog.records if "wrongly extracted" in r.getMessage()]
    assert "'broken'" in line and "pipeline.evaluate_suspect_records" in line
    assert "gen_ai.tool.call.result" in line  # what fixes it
    windows = set(alerts.snapshot().get("h", {}).get("services", {}))
    skipped = _value(
        telemetry,
        "evaluations_skipped",
        service="broken",
        evaluator="local_groundedness",
        reason="extraction_suspect",
    )
    if evaluate_suspect:
        assert evaluator.calls == 2
        assert windows == {"healthy", "broken"}
        assert skipped == 0
    else:
        assert evaluator.calls == 1
        assert windows == {"healthy"}
        assert skipped == 1


def test_the_switch_is_a_pipeline_setting(tmp_path: Any) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("pipeline: {evaluate_suspect_records: true}\n")
    assert load_config(str(path)).pipeline.evaluate_suspect_records is True
    path.write_text("pipeline: {}\n")
    assert load_config(str(path)).pipeline.evaluate_suspect_records is False


def test_the_first_trace_of_a_service_that_gives_no_record_is_logged_and_each_counted(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    outcomes = Outcomes(telemetry, None, SizeLimits())
    outcomes.record(_record(0, "rag", None), "otlp_http")
    with caplog.at_level(logging.WARNING, logger="monitor.processors.trace"):
        for i in range(10):
            outcomes.not_rag(FinishedTrace(f"{i:032x}", [], "root_ended", "otlp_http"), "mute")
            outcomes.not_rag(FinishedTrace(f"{i:032x}", [], "root_ended", "otlp_http"), "rag")
    lines = [r.getMessage() for r in caplog.records if "gave no record" in r.getMessage()]
    assert len(lines) == 1  # rate-limited, and never for a service that gives records
    assert f"'mute': its sampled trace {0:032x} (of 0 spans) gave no record" in lines[0]
    assert "extraction.conventions" in lines[0] and "Tracing your app" in lines[0]
    assert _value(telemetry, "traces_not_rag", service="mute", reason="unrecognised") == 10
    assert _value(telemetry, "traces_not_rag", service="rag", reason="unrecognised") == 10


def test_a_suspect_record_whose_spans_came_late_names_both_fixes(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """A span that missed the record may have held its question, or the instrumentation
    never records it: the line names the late spans and the instrumentation's own switch."""
    outcomes = Outcomes(telemetry, None, SizeLimits())
    record = _record(3, "vercel", "no_query").model_copy(
        update={
            "query": None,
            "metadata": {EXTRACTION_SUSPECT: "no_query", "instrumentation": "vercel-ai"},
        }
    )
    late = Cause("spans_after_root", "query", "1 span(s) ended after the root 'POST /ask'")
    with caplog.at_level(logging.WARNING, logger="monitor.processors.trace"):
        outcomes.record(record, "otlp_http", [late])
    (line,) = [r.getMessage() for r in caplog.records if "looks wrongly extracted" in r.message]
    assert "spans arrived after the trace's root ended" in line and "'POST /ask'" in line
    assert "recordInputs" in line
    assert _value(telemetry, "records_suspect", service="vercel", reason="no_query") == 1


QUOTED = "The Eiffel Tower was completed in 1889 for the World Fair in Paris."


def _quoting_trace(*, model_output: str | None) -> Trace:
    """A chain whose answer is a retrieved document word for word; the model call says so
    itself (`model_output`), or carries no output (the answer read is the chain's)."""
    t = Trace()
    chain = {"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": QUOTED}
    with _span(t, "chain", **chain):
        retriever = {
            "openinference.span.kind": "RETRIEVER",
            "input.value": QUESTION,
            "retrieval.documents.0.document.content": QUOTED,
        }
        with _span(t, "retrieve", **retriever):
            pass
        llm = {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": f"{QUOTED}\n\n{QUESTION}",
        }
        if model_output is not None:
            llm["llm.output_messages.0.message.role"] = "assistant"
            llm["llm.output_messages.0.message.content"] = model_output
        with _span(t, "llm", **llm):
            pass
    return t


def test_a_model_answer_that_quotes_a_document_is_not_suspect() -> None:
    """A faithful answer that quotes its document word for word is what the model said:
    the record is evaluated (it was dropped as `answer_is_context`)."""
    (record,) = _quoting_trace(model_output=QUOTED).records()
    assert record.response == QUOTED
    assert EXTRACTION_SUSPECT not in record.metadata


def test_an_answer_no_model_call_produced_that_is_a_document_is_still_suspect() -> None:
    """The model span carries no output and the answer read is a document: a misread."""
    (record,) = _quoting_trace(model_output=None).records()
    assert record.metadata[EXTRACTION_SUSPECT] == "answer_is_context"
