"""The same record gets the same verdict whichever way it reaches the monitor: as a trace
over OTLP (the SDK's own exporter, into a running `rag-monitor run`) and as a line of a
file given to `rag-monitor replay`. The record is a faithful answer that quotes its one
document word for word, as the model's own output: OTLP once dropped it as suspect
(`answer_is_context`) while replay scored it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.reliability import REPO, MonitorProcess
from tests.frameworks.apps.framework_apps import tracer_provider

QUESTION = "When was the Eiffel Tower completed?"
QUOTED = "The Eiffel Tower was completed in 1889 for the World Fair in Paris."
EVALUATOR = "local_groundedness"


def _send_trace(port: int) -> str:
    """An OpenInference chain, retriever and LLM call; the model answers with the
    document's sentence. Returns the trace id."""
    provider, _ = tracer_provider("quoting-app", f"http://127.0.0.1:{port}/v1/traces")
    tracer = provider.get_tracer("app")
    chain = {"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": QUOTED}
    with tracer.start_as_current_span("chain", attributes=chain) as root:
        retriever = {
            "openinference.span.kind": "RETRIEVER",
            "input.value": QUESTION,
            "retrieval.documents.0.document.content": QUOTED,
        }
        with tracer.start_as_current_span("retrieve", attributes=retriever):
            pass
        llm = {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": f"Context: {QUOTED}\n\nQuestion: {QUESTION}",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": QUOTED,
        }
        with tracer.start_as_current_span("llm", attributes=llm):
            pass
    provider.shutdown()
    return f"{root.get_span_context().trace_id:032x}"


def test_a_quoting_answer_gets_one_verdict_over_otlp_and_replay(tmp_path: Path) -> None:
    config = {
        "pipeline": {"processes": 0},
        "trace_assembly": {"late_spans_wait_s": 0},
        "evaluators": [{"name": EVALUATOR}],
    }
    monitor = MonitorProcess(tmp_path / "otlp", config)
    monitor.tmp.mkdir()
    monitor.start()
    try:
        trace_id = _send_trace(monitor.http_port)

        def scored() -> dict[str, object] | None:
            lines = [x for x in monitor.results_lines() if x["trace_id"] == trace_id]
            return lines[0]["results"].get(EVALUATOR) if lines else None

        monitor.wait_for(scored, 90, "the trace's verdict")
        over_otlp = scored()
    finally:
        monitor.stop()
    assert over_otlp is not None

    records = tmp_path / "records.jsonl"
    line = {"request_id": "q1", "question": QUESTION, "context": [QUOTED], "answer": QUOTED}
    records.write_text(json.dumps(line) + "\n")
    out = tmp_path / "replayed.jsonl"
    replay = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "replay",
            str(records),
            "--output",
            str(out),
            "--config",
            str(monitor.tmp / "config.yaml"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert replay.returncode == 0, replay.stderr
    (replayed,) = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    by_replay = replayed["results"][EVALUATOR]
    keys = ("score", "passed", "label", "error")
    assert {k: over_otlp[k] for k in keys} == {k: by_replay[k] for k in keys}
    assert by_replay["error"] is None
