"""Quarkus LangChain4j 1.5.0 on Quarkus 3.27.1 as a real app
(`tests/frameworks/quarkus_langchain4j/`, a Maven project built by
`tests/frameworks/envs/build.sh`): an AI service with a system message, a retrieval
augmentor (an in-memory embedding store, top 2, embeddings from the scripted server) and
the default chat memory, `quarkus-opentelemetry` over http/protobuf, no declared
convention in the monitor. Its model call is traced as `completion <model>` with
`gen_ai.prompt` as one string: the system message and every turn of the chat memory
joined, the last user message carrying LangChain4j's default content injection. Six
questions, three answered with a planted wrong fact: six records with the last user turn
as the question, the injected documents (exact text, one per document) and the answer;
three fail groundedness, three pass. The indexing trace (one embeddings call) makes no
record and is counted; a custom injection template is counted as a prompt that cannot be
split; with the content switches off the warning names them."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from harness.framework_envs import (
    JVM_FLAGS,
    Answers,
    against_the_monitor,
    assert_each_question_right,
    jvm_app,
    run_app,
)
from harness.pipeline import RecordingStage
from harness.pipeline import metric_value as _value
from monitor.extraction import CONTEXT_DOUBTS
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

pytestmark = pytest.mark.e2e
SERVICE = "quarkus-langchain4j-rag"
HEADER = "Answer using the following information:"  # LangChain4j's default injection
CUSTOM = "<notes>"  # the app's own injection template (`rag.template=custom`)


def _last_turn_answer(prompt: str) -> str:
    """The scripted model's answer to the last user turn: the chat memory's earlier turns,
    joined before it, hold other documents."""
    return three_planted_answer(prompt[max(prompt.rfind(HEADER), prompt.rfind(CUSTOM), 0) :])


async def _run(
    telemetry: Telemetry, tmp_path: Path, *options: str
) -> tuple[RecordingStage, list[dict[str, Any]], int]:
    java = jvm_app("quarkus_langchain4j")
    kb = tmp_path / "kb.json"
    kb.write_text(json.dumps({"kb": KB, "questions": [q for q, _ in QUESTIONS]}))
    model_url = serve(_last_turn_answer)

    def run(endpoint: str) -> Answers:
        base = endpoint.removesuffix("/v1/traces")  # Quarkus adds the signal's path
        return run_app(
            [
                "java",
                *JVM_FLAGS,
                f"-Dquarkus.langchain4j.openai.base-url={model_url}",
                f"-Dquarkus.otel.exporter.otlp.traces.endpoint={base}",
                *options,
                *java,
                str(kb),
            ]
        )

    async def run_async(endpoint: str) -> Answers:
        return await asyncio.to_thread(run, endpoint)

    return await against_the_monitor(telemetry, run_async)


async def test_quarkus_langchain4j_each_question_is_one_record_and_its_indexing_is_counted(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING, logger="monitor.processors.trace")
    stage, answers, traces = await _run(telemetry, tmp_path)
    assert [a["question"] for a in answers] == [q for q, _ in QUESTIONS]
    assert traces == 7  # the indexing trace and one per question
    records = await assert_each_question_right(
        stage, answers, SERVICE, PLANTED_THREE.values(), lambda q: KB[search(q)[0]]
    )
    for record in records:
        assert record.context_source == "prompt"
        assert "context_doubt" not in record.metadata
    assert _value(telemetry, "traces_not_rag_total", service=SERVICE, reason="embedding_only") == 1
    assert _value(telemetry, "dropped_total", stage="assemble", reason="not_rag") == 1
    assert [r.getMessage() for r in caplog.records] == []


async def test_quarkus_langchain4j_custom_injection_template_is_counted_as_not_split(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """An injection template of the app's own inside the chat memory's joined prompt: the
    earlier turns' documents cannot be told from the last turn's, so each record says so
    (`prompt_not_split`, counted) and takes no document rather than a guess."""
    caplog.set_level(logging.WARNING, logger="monitor.processors.trace")
    stage, answers, _ = await _run(telemetry, tmp_path, "-Drag.template=custom")
    assert len(stage.records) == len(answers) == 6
    for answer in answers:
        ((_, record),) = await stage.wait_for(str(answer["trace_id"]))
        assert record.query == answer["question"]  # the template labels it: `Question:`
        assert record.response == answer["response"]
        assert record.context_text == []
        assert record.context_source == "prompt"
        assert record.metadata["context_doubt"] == "prompt_not_split"
    value = _value(
        telemetry, "records_context_doubtful_total", service=SERVICE, reason="prompt_not_split"
    )
    assert value == 6
    lines = [r.getMessage() for r in caplog.records if "prompt_not_split" in r.getMessage()]
    assert len(lines) == 1 and CONTEXT_DOUBTS["prompt_not_split"] in lines[0]


# What the warning says when the content switches are off, word for word.
SWITCHES_OFF = (
    "(quarkus-langchain4j: Quarkus LangChain4j writes the prompt and the completion on its "
    "`completion <model>` spans only with quarkus.langchain4j.tracing.include-prompt=true and "
    "quarkus.langchain4j.tracing.include-completion=true)"
)


async def test_quarkus_langchain4j_without_content_is_loud_naming_its_switches(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """`quarkus.langchain4j.tracing.include-prompt` / `include-completion` off: each
    question is a suspect record, counted, and the warning names the two switches."""
    caplog.set_level(logging.WARNING, logger="monitor.processors.trace")
    off = ("include-prompt", "include-completion")
    stage, answers, traces = await _run(
        telemetry, tmp_path, *(f"-Dquarkus.langchain4j.tracing.{name}=false" for name in off)
    )
    assert len(stage.records) == len(answers) == 6 and traces == 7
    for _, record in stage.records:
        assert record.metadata[EXTRACTION_SUSPECT] == "no_query"
        assert record.metadata["instrumentation"] == "quarkus-langchain4j"
    assert _value(telemetry, "records_suspect_total", service=SERVICE, reason="no_query") == 6
    assert _value(telemetry, "traces_not_rag_total", service=SERVICE, reason="embedding_only") == 1
    (line,) = [r.getMessage() for r in caplog.records if "looks wrongly extracted" in r.message]
    assert line.startswith(f"service '{SERVICE}': record ")
    assert (
        "looks wrongly extracted (no_query): a model call was traced but no span carries the "
        "user's question: turn on the instrumentation's content capture, or set rag.query "
        + SWITCHES_OFF
    ) in line
