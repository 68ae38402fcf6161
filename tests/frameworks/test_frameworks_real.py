"""One record per user question from the RAG frameworks people run, each driven for real
with its real instrumentation package and the SDK's OTLP/HTTP exporter, into the running
receivers. The apps (`tests/frameworks/apps/<framework>_app.py`) use the frameworks' own extension
points for the model (a scripted model, no network) and retrievers that really rank a
small knowledge base (`tests/frameworks/apps/framework_apps.py`). Each runs in its own process (the
instrumentations patch the framework globally), from its stack's own environment
(`harness/framework_envs.py`), never the monitor's.

For each question the extracted record must carry the question the user asked, the
documents the framework retrieved in the framework's order, and the answer the framework
returned; every other trace the app sent (index builds, chat-engine resets) must be
counted as `not_rag`."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from harness.framework_envs import against_the_monitor, run_python_app
from harness.pipeline import RecordingStage
from harness.pipeline import metric_value as _value
from monitor.records import EXTRACTION_SUSPECT
from monitor.telemetry import Telemetry
from tests.frameworks.apps.framework_apps import CONVERSATIONS, KB, QUESTIONS, answer_for

REPO = Path(__file__).resolve().parents[2]

# (app module, instrumentation, variant)
APPS = [
    ("llama_index", "openinference", "query-completion"),
    ("llama_index", "openinference", "query-chat"),
    ("llama_index", "openinference", "chat-engine"),
    ("llama_index", "openllmetry", "query-completion"),
    ("llama_index", "openllmetry", "query-chat"),
    ("llama_index", "openllmetry", "chat-engine"),
    ("langgraph", "openinference", "agent"),
    ("langgraph", "openllmetry", "agent"),
    ("haystack", "openinference", "pipeline"),
    ("haystack", "openinference", "completion"),
    ("dspy", "openinference", "rag"),
]


@pytest.mark.parametrize(("app", "instrumentation", "variant"), APPS)
async def test_each_question_becomes_one_record_with_its_query_context_and_answer(
    telemetry: Telemetry, app: str, instrumentation: str, variant: str
) -> None:
    # Every trace is released when its root span arrives; extraction is counted first.
    stage, answers, traces = await against_the_monitor(
        telemetry, partial(run_python_app, app, instrumentation, variant)
    )
    expected_questions = (
        [q for first, follow_up, _, _ in CONVERSATIONS for q in (first, follow_up)]
        if variant == "chat-engine"
        else [q for q, _ in QUESTIONS]
    )
    assert [a["question"] for a in answers] == expected_questions
    assert len(stage.records) == len(answers) == 6, [r.query for _, r in stage.records]
    not_rag = _value(telemetry, "dropped_total", stage="assemble", reason="not_rag")
    assert _value(telemetry, "traces_assembled_total", trigger="root_ended") == traces
    assert not_rag == traces - len(answers)  # every other trace says why it gave no record
    for answer in answers:
        ((source, record),) = await stage.wait_for(answer["trace_id"])
        assert source == "otlp_http"
        assert record.query == answer["question"]
        assert record.response == answer["response"]
        assert record.context_text == answer["sources"]
        # The retriever really ranked: the document that answers comes first.
        assert answer["sources"][0] == KB[str(answer_for(answer["question"]))]
        assert record.missing() == frozenset()
        assert EXTRACTION_SUSPECT not in record.metadata
        assert record.service == f"{app.replace('_', '-')}-{instrumentation}"
    if variant == "chat-engine":
        _check_conversations(stage)
    else:
        assert {r.route for _, r in stage.records} == {"/ask"}


def _check_conversations(stage: RecordingStage) -> None:
    """A follow-up's query is the user's own message; the standalone question the engine
    condensed it into (and searched with) is kept in `metadata.retrieval_query`; the
    earlier turn is the history."""
    records = {r.query: r for _, r in stage.records}
    for first, follow_up, standalone, _ in CONVERSATIONS:
        opening, later = records[first], records[follow_up]
        assert opening.history == ()
        assert "retrieval_query" not in opening.metadata
        assert later.metadata["retrieval_query"] == standalone
        assert [(m.role, m.content) for m in later.history] == [
            ("user", first),
            ("assistant", opening.response),
        ]
