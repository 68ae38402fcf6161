"""A real app whose model calls take longer than `trace_assembly.idle_timeout_s` still gives
one whole record per question, at the monitor's defaults (issue 88).

The LlamaIndex app (`tests/frameworks/apps/llama_index_app.py`, variant `slow-call`) with
its real OpenInference instrumentation and the SDK's OTLP/HTTP exporter: its scripted model
takes `SLOW_CALL_S` (15 s, the process really waits) per call. The retrieval's spans end
before the call and are exported at once; the call's, the query engine's and the request's
come 15 s or more later. The idle timeout (10 s by default) alone would cut each trace in
two; the trace stage keeps it open while a parent its spans name has not come
(`trace_assembly.missing_parent_wait_s`, `tests/trace/test_open_calls.py`). The other
framework tests raise the idle timeout (`APP_IDLE_TIMEOUT_S`) so that a loaded machine
cannot split their traces; this one keeps every `trace_assembly` setting at its default."""

from __future__ import annotations

from functools import partial

import pytest

from harness.framework_envs import against_the_monitor, default_assembly_config, run_python_app
from harness.pipeline import metric_value as _value
from monitor.records import EXTRACTION_SUSPECT
from monitor.telemetry import Telemetry
from tests.frameworks.apps.framework_apps import KB, QUESTIONS, SLOW_CALL_S, SLOW_QUESTIONS

pytestmark = pytest.mark.e2e


async def test_a_model_call_slower_than_the_idle_timeout_gives_one_whole_record(
    telemetry: Telemetry,
) -> None:
    config = default_assembly_config()
    assert SLOW_CALL_S > config.trace_assembly.idle_timeout_s
    stage, answers, traces = await against_the_monitor(
        telemetry,
        partial(run_python_app, "llama_index", "openinference", "slow-call"),
        config,
    )
    assert [a["question"] for a in answers] == [q for q, _ in QUESTIONS[:SLOW_QUESTIONS]]
    # No trace was cut: each was released by its root, and every trace but the questions'
    # (the index build's) was counted as giving no record.
    assert _value(telemetry, "traces_assembled_total", trigger="idle_timeout") == 0
    assert len(stage.records) == len(answers), [r.query for _, r in stage.records]
    assert _value(telemetry, "traces_assembled_total", trigger="root_ended") == traces
    not_rag = _value(telemetry, "dropped_total", stage="assemble", reason="not_rag")
    assert not_rag == traces - len(answers)
    for answer, (question, uri) in zip(answers, QUESTIONS, strict=False):
        ((_, record),) = await stage.wait_for(answer["trace_id"])
        assert record.query == question
        assert record.context_text == answer["sources"]
        assert answer["sources"][0] == KB[uri]
        assert record.response == answer["response"]
        assert record.missing() == frozenset()
        assert EXTRACTION_SUSPECT not in record.metadata
        # The model call really took that long.
        assert record.latency_ms is not None and record.latency_ms >= SLOW_CALL_S * 1000
