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

from harness.framework_envs import (
    Answers,
    against_the_monitor,
    assert_each_question_right,
    go_app,
    run_app,
)
from harness.pipeline import metric_value as _value
from monitor.telemetry import Telemetry
from tests.frameworks.apps.framework_apps import (
    KB,
    PLANTED_THREE,
    QUESTIONS,
    search,
    three_planted_answer,
)
from tests.frameworks.apps.openai_server import serve

pytestmark = pytest.mark.e2e
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
    # localvec's cosine ranking: the closest document is the one `search` ranks first
    # (the second ties at no shared word, in the store's order).
    await assert_each_question_right(
        stage, answers, SERVICE, PLANTED_THREE.values(), lambda q: KB[search(q)[0]]
    )
    assert _value(telemetry, "traces_not_rag_total", service=SERVICE, reason="embedding_only") == 1
    assert _value(telemetry, "dropped_total", stage="assemble", reason="not_rag") == 1
    assert [r.getMessage() for r in caplog.records] == []
