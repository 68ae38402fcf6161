"""Spans from the real instrumentation packages, not imitations: a LangChain RAG chain
(built-in fake chat model, fixed retriever — no LLM API) instrumented by OpenInference
or by OpenLLMetry 0.62 (`opentelemetry-instrumentation-langchain`), exporting with the
SDK's OTLP/HTTP exporter to the running receivers. Each app runs in its own process
(both instrumentations patch LangChain globally), from the RAG stacks' own environment."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from harness.framework_envs import APP_ENVS, APP_TIMEOUT_S, app_monitor_config, python_of
from harness.pipeline import RecordingStage, started
from monitor.telemetry import Telemetry
from tests.frameworks.apps.langchain_app import ANSWER, DOCS, QUESTION

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("instrumentation", ["openinference", "openllmetry"])
async def test_langchain_rag_chain_becomes_one_complete_record(
    telemetry: Telemetry, instrumentation: str
) -> None:
    stage = RecordingStage()
    receivers = await started(app_monitor_config(), stage, telemetry)
    try:
        assert receivers.http is not None
        endpoint = f"http://127.0.0.1:{receivers.http.port}/v1/traces"
        app = await asyncio.to_thread(
            subprocess.run,
            [
                str(python_of(APP_ENVS["langchain"])),
                str(REPO / "tests" / "frameworks" / "apps" / "langchain_app.py"),
                instrumentation,
                endpoint,
            ],
            capture_output=True,
            text=True,
            timeout=APP_TIMEOUT_S,  # a loaded machine's bound, as every app test's
            cwd=REPO,
        )
        assert app.returncode == 0, app.stderr
        trace_id = app.stdout.strip().splitlines()[-1]
        ((source, record),) = await stage.wait_for(trace_id)
    finally:
        await receivers.shutdown(5)
    assert source == "otlp_http"
    assert record.query == QUESTION
    assert record.response == ANSWER
    assert [d.content for d in record.retrieved_context] == list(DOCS)
    assert [d.doc_uri for d in record.retrieved_context] == [f"kb/{i}.md" for i in range(3)]
    assert (record.service, record.route) == (f"lc-{instrumentation}", "/ask")
    assert record.missing() == frozenset()
