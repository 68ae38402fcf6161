"""JavaScript and TypeScript stacks, driven for real as Node apps (`tests/js/*.mjs`, their
packages locked in `tests/js/package-lock.json`): the Vercel AI SDK (`generateText` and
`streamText` with a tool, `experimental_telemetry` on), Mastra (an agent with a tool, its
own tracing exported over OTLP) and LangChain.js under OpenInference (a retrieval chain).
Each app's model is the scripted OpenAI-compatible server (`tests/frameworks/apps/openai_server.py`,
run here), its tool or retriever ranks the same knowledge base through that server, and
it exports OTLP/HTTP to the running receivers.

For each question: one record, the question, the tool's documents in the order it
returned them, each with its id as `doc_uri`, and the answer the app got; the embedded
groundedness evaluator fails the planted wrong answer and passes the others. A Vercel app
with `recordInputs` / `recordOutputs` off gives a suspect record per question, counted
and logged with the switch that fixes it, never a silent `not_rag`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

import pytest

from harness.framework_envs import Answers, against_the_monitor, run_js_app
from harness.pipeline import RecordingStage
from harness.pipeline import metric_value as _value
from monitor.config import EvaluatorConfig
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.records import EXTRACTION_SUSPECT
from monitor.telemetry import Telemetry
from tests.frameworks.apps.framework_apps import ANSWERS, KB, PLANTED, QUESTIONS, search
from tests.frameworks.apps.openai_server import serve

pytestmark = pytest.mark.e2e

# (app, instrumentation, variant, service); `app` is `tests/js/<app>.mjs`.
APPS = [
    ("vercel_ai", "vercel-ai", "generate", "vercel-ai-generate"),
    ("vercel_ai", "vercel-ai", "stream", "vercel-ai-stream"),
    ("mastra", "mastra", "agent", "mastra-agent"),
    ("langchain_js", "openinference", "rag-chain", "langchain-js-openinference"),
]
# Content capture off: (app, instrumentation, variant, service).
WITHOUT_CONTENT = [("vercel_ai", "vercel-ai", "no-content", "vercel-ai-no-content")]


async def _records(
    telemetry: Telemetry, app: str, variant: str
) -> tuple[RecordingStage, list[dict[str, Any]], int]:
    def run(endpoint: str) -> Awaitable[Answers]:
        return run_js_app(app, variant, endpoint, serve())

    return await against_the_monitor(telemetry, run)


@pytest.mark.parametrize(("app", "instrumentation", "variant", "service"), APPS)
async def test_each_question_is_one_record_and_a_planted_fact_fails_groundedness(
    telemetry: Telemetry, app: str, instrumentation: str, variant: str, service: str
) -> None:
    stage, answers, traces = await _records(telemetry, app, variant)
    assert [a["question"] for a in answers] == [q for q, _ in QUESTIONS]
    assert len(stage.records) == len(answers) == traces == 6, [r.query for _, r in stage.records]
    groundedness = build(EvaluatorConfig(name="local_groundedness"), BuildContext())
    verdicts = {}
    for answer in answers:
        ((_, record),) = await stage.wait_for(str(answer["trace_id"]))
        question = str(answer["question"])
        assert record.query == question
        assert record.response == answer["response"]
        assert record.context_text == answer["sources"] == [KB[u] for u in search(question)]
        assert [d.doc_uri for d in record.retrieved_context] == search(question)
        assert record.missing() == frozenset()
        assert EXTRACTION_SUSPECT not in record.metadata
        assert record.service == service
        result = await groundedness.evaluate(record)
        verdicts[str(record.response).strip()] = result.passed
    wrong = set(PLANTED.values())
    assert {r: p for r, p in verdicts.items() if r in wrong} == dict.fromkeys(wrong, False)
    faithful = {r: p for r, p in verdicts.items() if r not in wrong}
    assert faithful == dict.fromkeys(faithful, True) and len(faithful) == 5
    assert set(faithful) <= set(ANSWERS.values())


async def test_vercel_without_recorded_content_gives_counted_logged_suspects(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """`recordInputs: false, recordOutputs: false`: the spans say a model call was made
    (`ai.generateText.doGenerate`, `gen_ai.request.model`, token counts) but carry no
    text. Each question is still one record, marked suspect (`no_query`), counted, and
    logged with the Vercel AI SDK's switch; no trace is dropped as `not_rag`."""
    caplog.set_level(logging.WARNING, logger="monitor.processors.trace")
    ((app, _, variant, service),) = WITHOUT_CONTENT
    stage, answers, traces = await _records(telemetry, app, variant)
    assert len(stage.records) == len(answers) == traces == 6
    for _, record in stage.records:
        assert record.metadata[EXTRACTION_SUSPECT] == "no_query"
        assert record.metadata["instrumentation"] == "vercel-ai"
        assert record.model == "scripted" and record.query is None and record.response is None
    assert _value(telemetry, "dropped_total", stage="assemble", reason="not_rag") == 0
    assert _value(telemetry, "records_suspect_total", service=service, reason="no_query") == 6
    logged = [r.getMessage() for r in caplog.records if "looks wrongly extracted" in r.message]
    assert len(logged) == 1  # rate-limited: one line per service and reason
    assert "recordInputs" in logged[0] and "no_query" in logged[0]
