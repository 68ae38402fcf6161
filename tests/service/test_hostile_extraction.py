"""A running `rag-monitor` fed traces whose values once hung extraction for ever (a Mastra
container span whose `mastra.span.type` is `"{mastra.span.type}"`: the placeholder
substitution went round without end, in a worker process or, with `pipeline.processes: 0`,
in a thread of the monitor's own): with both process modes each such trace gives its
record, marked and counted as partly read, the traces after it are scored, `/metrics`
answers, and SIGTERM ends the process within `pipeline.shutdown_timeout_s`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.reliability import MonitorProcess, Trace, export_request, post, trace_ids
from tests.frameworks.apps.framework_apps import tracer_provider

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
SHUTDOWN_S = 5.0


def _send_placeholder_traces(port: int, n: int) -> None:
    """`n` Mastra agent runs through the SDK's own OTLP/HTTP exporter, each agent span's
    `mastra.span.type` a placeholder of itself, its model call an ordinary one."""
    provider, _ = tracer_provider("mastra-app", f"http://127.0.0.1:{port}/v1/traces")
    tracer = provider.get_tracer("mastra")
    agent = {"gen_ai.operation.name": "invoke_agent", "mastra.span.type": "{mastra.span.type}"}
    question = [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
    chat = {
        "gen_ai.operation.name": "chat",
        "mastra.span.type": "model_inference",
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": json.dumps(question),
        "gen_ai.output.messages": json.dumps(answer),
    }
    for _ in range(n):
        with tracer.start_as_current_span("invoke_agent kb", attributes=agent):
            with tracer.start_as_current_span("chat m", attributes=chat):
                pass
    provider.shutdown()


@pytest.mark.parametrize("processes", [0, 1])
def test_placeholder_values_cost_nothing_and_sigterm_ends_the_process(
    tmp_path: Path, processes: int
) -> None:
    config = {
        "pipeline": {"processes": processes, "shutdown_timeout_s": SHUTDOWN_S},
        "trace_assembly": {"late_spans_wait_s": 0},
    }
    monitor = MonitorProcess(tmp_path, config).start()
    try:
        _send_placeholder_traces(monitor.http_port, 4)
        monitor.wait_for(
            lambda: (
                monitor.value("rag_monitor_records_partly_read_total", reason="placeholder") == 4
            ),
            60,
            "the 4 placeholder traces' records, partly read",
        )
        after = [Trace(t) for t in trace_ids(5, 3)]
        assert post(monitor.http_port, export_request(after)).status == 200
        want = {t.trace_id.hex() for t in after}
        monitor.wait_for(
            lambda: want <= {line["trace_id"] for line in monitor.results_lines()},
            60,
            "the traces after them, scored",
        )
        assert "rag_monitor_records_total" in monitor.metrics_text()
        # A process that does not end raises here (its deadline, and room for a busy
        # machine): SIGTERM once hung it for good.
        code = monitor.stop(timeout=SHUTDOWN_S + 60)
        assert code == 0, monitor.log()[-4000:]
        assert "stopped;" in monitor.log()
    finally:
        monitor.kill()
