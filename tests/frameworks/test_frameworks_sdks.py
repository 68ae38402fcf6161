"""RAG apps traced by an observability SDK rather than a framework's instrumentation:
MLflow's tracing SDK (`mlflow.openai.autolog()` and `@mlflow.trace`) and Langfuse's
Python SDK (`@observe`, the `langfuse.openai` drop-in), each run from its own locked
environment (`tests/frameworks/envs/<sdk>/`), exporting real OTLP into the receivers.

For each of the six questions: one record with the question, the retriever's two
documents, separate and in order, with their ids, and the answer; its conversation (the
session the app asked it in); the embedded groundedness evaluator fails the answer with
the planted wrong year and passes the others. MLflow's own translation into the GenAI
conventions (`MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true`) keeps the chat span whole but the
retriever as a bare `RETRIEVER` operation: its documents are lost, and the record's
context is what reached the model, the system message (`metadata.source`)."""

from __future__ import annotations

from functools import partial

import pytest

from harness.framework_envs import against_the_monitor, run_python_app
from harness.pipeline import RecordingStage
from monitor.config import EvaluatorConfig
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.records import EXTRACTION_SUSPECT
from monitor.telemetry import Telemetry
from tests.frameworks.apps.framework_apps import PLANTED, QUESTIONS
from tests.frameworks.test_frameworks_agents import _records_ground_on_the_tools_documents

# (app module, instrumentation, variant, service name)
APPS = [
    ("mlflow", "mlflow", "default", "mlflow-default"),
    ("langfuse", "langfuse", "observe", "langfuse-observe"),
]
# MLflow with its own translation into the GenAI conventions.
TRANSLATED = ("mlflow", "mlflow", "genai-semconv", "mlflow-genai-semconv")


async def _conversations(stage: RecordingStage, answers: list[dict[str, str]]) -> list[str]:
    found = []
    for answer in answers:
        ((_, record),) = await stage.wait_for(answer["trace_id"])
        found.append(str(record.conversation))
    return found


@pytest.mark.parametrize(("app", "instrumentation", "variant", "service"), APPS)
async def test_an_sdk_traced_rag_app_gives_one_whole_record_per_question(
    telemetry: Telemetry, app: str, instrumentation: str, variant: str, service: str
) -> None:
    stage, answers, traces = await against_the_monitor(
        telemetry, partial(run_python_app, app, instrumentation, variant)
    )
    await _records_ground_on_the_tools_documents(stage, answers, traces, service, doc_uris=True)
    assert await _conversations(stage, answers) == [f"session-{i}" for i in range(6)]
    for answer in answers:
        ((_, record),) = await stage.wait_for(answer["trace_id"])
        assert instrumentation in str(record.metadata.get("conventions")).split(",")


async def test_mlflow_translated_to_genai_takes_the_documents_from_the_system_message(
    telemetry: Telemetry,
) -> None:
    app, instrumentation, variant, service = TRANSLATED
    stage, answers, traces = await against_the_monitor(
        telemetry, partial(run_python_app, app, instrumentation, variant)
    )
    assert [a["question"] for a in answers] == [q for q, _ in QUESTIONS]
    assert len(stage.records) == len(answers) == traces == 6
    groundedness = build(EvaluatorConfig(name="local_groundedness"), BuildContext())
    verdicts = {}
    for answer in answers:
        ((_, record),) = await stage.wait_for(answer["trace_id"])
        assert (record.query, record.response) == (answer["question"], answer["response"])
        assert EXTRACTION_SUSPECT not in record.metadata
        assert record.service == service
        # Split out of the system message, one document a line, its heading left out.
        assert [d.content for d in record.retrieved_context] == answer["sources"]
        assert record.context_source == "prompt"
        verdicts[answer["response"]] = (await groundedness.evaluate(record)).passed
    # The planted wrong year still fails against the documents, the others pass.
    assert verdicts == {r: r not in PLANTED.values() for r in verdicts}
    assert set(PLANTED.values()) <= verdicts.keys()
