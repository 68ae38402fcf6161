"""Genkit Go 1.4.0 as a real app (`tests/frameworks/genkit_go/`, built by
`tests/frameworks/envs/build.sh` from its go.mod and go.sum): a flow that retrieves the two
closest documents with a `localvec` retriever and answers with `Generate` over them, its
model and embedder calling the scripted OpenAI-compatible server over HTTP, Genkit's spans
through the global OTel tracer provider set before `genkit.Init` and the real OTLP/HTTP
exporter. Six questions, three answered with a planted wrong fact: six records, each with
the question, the retrieved documents (one per document, exact text), the answer; three
fail groundedness and three pass. Its indexing trace (an embedder span alone) makes no
record, is counted as `embedding_only`, and draws no warning."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from harness.framework_envs import Answers, against_the_monitor, go_app, run_app
from harness.pipeline import metric_value as _value
from monitor.config import EvaluatorConfig
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.records import EXTRACTION_SUSPECT
from monitor.telemetry import Telemetry
from tests.frameworks.apps.framework_apps import (
    KB,
    PLANTED_THREE,
    QUESTIONS,
    search,
    three_planted_answer,
)
from tests.frameworks.apps.openai_server import serve

pytestmark = pytest.mark.slow
SERVICE = "genkit-go-rag"


async def test_genkit_go_each_question_is_one_record_and_its_indexing_is_counted(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING, logger="monitor.processors.trace")
    app = go_app("genkit_go")
    kb = tmp_path / "kb.json"
    kb.write_text(json.dumps({"kb": KB, "questions": [q for q, _ in QUESTIONS]}))
    model_url = serve(three_planted_answer)

    def run(endpoint: str) -> Answers:
        return run_app([str(app), str(kb), model_url, endpoint, str(tmp_path / "store")])

    async def run_async(endpoint: str) -> Answers:
        return await asyncio.to_thread(run, endpoint)

    stage, answers, traces = await against_the_monitor(telemetry, run_async)
    assert [a["question"] for a in answers] == [q for q, _ in QUESTIONS]
    assert traces == 7  # the indexing trace and one per question
    assert len(stage.records) == len(answers) == 6, [r.query for _, r in stage.records]
    groundedness = build(EvaluatorConfig(name="local_groundedness"), BuildContext())
    verdicts = {}
    for answer in answers:
        ((_, record),) = await stage.wait_for(str(answer["trace_id"]))
        question = str(answer["question"])
        assert record.query == question
        assert record.response == answer["response"]
        # localvec's cosine ranking: the closest document is the one `search` ranks first
        # (the second ties at no shared word, in the store's order).
        assert record.context_text == answer["sources"]
        assert len(answer["sources"]) == 2 and answer["sources"][0] == KB[search(question)[0]]
        assert record.missing() == frozenset()
        assert EXTRACTION_SUSPECT not in record.metadata
        assert record.service == SERVICE
        result = await groundedness.evaluate(record)
        verdicts[str(record.response).strip()] = result.passed
    wrong = set(PLANTED_THREE.values())
    assert {r: p for r, p in verdicts.items() if r in wrong} == dict.fromkeys(wrong, False)
    faithful = {r: p for r, p in verdicts.items() if r not in wrong}
    assert faithful == dict.fromkeys(faithful, True) and len(faithful) == 3
    assert _value(telemetry, "traces_not_rag_total", service=SERVICE, reason="embedding_only") == 1
    assert _value(telemetry, "dropped_total", stage="assemble", reason="not_rag") == 1
    assert [r.getMessage() for r in caplog.records] == []
