"""Real RAG apps on stacks no shipped convention names their retrieval for, each from its own
locked environment (`tests/frameworks/envs/<stack>/`), exporting real OTLP into the
receivers, with **no declared convention**: a retriever with no span, a GenAI retrieval
span with ids and scores only, an OpenInference retriever whose documents are
`set_output`, a retrieval traced as a database client span (`otel-plain`); LiteLLM's own
OTel callback, alone and under the app's own spans (`litellm`); the Traceloop SDK with its
retriever a `@task` (`traceloop`); Haystack 3's own tracer (`haystack-tracer`); the Google
Gen AI SDK's instrumentation (`google-genai`); the Anthropic SDK under OpenLLMetry, its
documents `search_result` or `document` content blocks (`anthropic`); LlamaIndex's own
OpenTelemetry package, a query engine and a chat engine (`llama-index-otel`); Grafana's
agent-observability SDK in its OpenTelemetry export mode (`agento11y`).

Each app: eight documents, two retrieved per question, six questions, a scripted model
that plants a wrong fact in three answers. Each question must give one record with the
question and the answer the app got, the two retrieved documents as separate documents
in order with no instruction text, a `context_source` that says how they were found; the
embedded groundedness evaluator fails the three planted answers and passes the three
others."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from harness.framework_envs import against_the_monitor, run_python_app
from harness.pipeline import RecordingStage
from monitor.config import EvaluatorConfig
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.records import EXTRACTION_SUSPECT
from monitor.telemetry import Telemetry
from tests.frameworks.apps.framework_apps import INSTRUCTIONS, PLANTED_THREE, QUESTIONS

pytestmark = pytest.mark.e2e

# (app module, instrumentation, variant, the record's context_source)
APPS = [
    pytest.param("plain_otel", "openai-v2", "untraced-retriever", "prompt", id="untraced"),
    pytest.param("plain_otel", "openai-v2", "genai-ids-only", "prompt", id="genai-ids-only"),
    pytest.param("plain_otel", "openinference", "set-output", "structure", id="set-output"),
    pytest.param("plain_otel", "openai-v2", "db-span", "prompt", id="db-span"),
    pytest.param("litellm", "litellm", "callback", "prompt", id="litellm-callback"),
    pytest.param("litellm", "litellm", "app-spans", "prompt", id="litellm-app-spans"),
    pytest.param("traceloop", "traceloop", "task", "structure", id="traceloop-task"),
    pytest.param("haystack_tracer", "haystack", "pipeline", "structure", id="haystack-tracer"),
    pytest.param("google_genai", "google-genai", "span-only", "prompt", id="google-genai"),
    pytest.param(
        "anthropic", "anthropic", "search-result", "message_documents", id="anthropic-search"
    ),
    pytest.param("anthropic", "anthropic", "document", "message_documents", id="anthropic-doc"),
    pytest.param("llama_index_otel", "llama-index-otel", "query", "structure", id="llama-otel-q"),
    pytest.param("llama_index_otel", "llama-index-otel", "chat", "structure", id="llama-otel-c"),
    pytest.param("agento11y", "agento11y", "otel", "prompt", id="agento11y-otel"),
]


async def _three_pass_three_fail(
    stage: RecordingStage, answers: list[dict[str, Any]], traces: int, service: str, source: str
) -> None:
    assert [a["question"] for a in answers] == [q for q, _ in QUESTIONS]
    assert len(stage.records) == len(answers) == traces == 6, [r.query for _, r in stage.records]
    groundedness = build(EvaluatorConfig(name="local_groundedness"), BuildContext())
    verdicts: dict[str, bool] = {}
    for answer in answers:
        ((_, record),) = await stage.wait_for(answer["trace_id"])
        assert record.service == service
        assert (record.query, record.response) == (answer["question"], answer["response"])
        assert record.context_text == answer["sources"], record.context_text
        assert not any(INSTRUCTIONS in text for text in record.context_text)
        assert record.missing() == frozenset()
        assert EXTRACTION_SUSPECT not in record.metadata
        assert record.context_source == source
        verdicts[answer["response"]] = (await groundedness.evaluate(record)).passed is True
    wrong = set(PLANTED_THREE.values())
    assert verdicts == {response: response not in wrong for response in verdicts}
    assert sorted(verdicts.values()) == [False] * 3 + [True] * 3


@pytest.mark.parametrize(("app", "instrumentation", "variant", "source"), APPS)
async def test_an_undeclared_stack_gives_whole_records_that_say_where_their_context_came_from(
    telemetry: Telemetry, app: str, instrumentation: str, variant: str, source: str
) -> None:
    stage, answers, traces = await against_the_monitor(
        telemetry, partial(run_python_app, app, instrumentation, variant)
    )
    await _three_pass_three_fail(stage, answers, traces, f"{instrumentation}-{variant}", source)
