"""Spring AI as a real app, on both lines: 1.1.2 on Spring Boot 3.5.7
(`tests/frameworks/spring_ai_1_1/`) and 2.0.1 on Spring Boot 4.0.7
(`tests/frameworks/spring_ai_2_0/`), Maven projects built once per machine by
`tests/frameworks/envs/build.sh`. A command-line Spring Boot app whose `ChatClient` has a
`QuestionAnswerAdvisor` (top 2; or a `RetrievalAugmentationAdvisor`) over a
`SimpleVectorStore`, the OpenAI chat and embedding models pointed at the scripted
OpenAI-compatible server, Micrometer tracing bridged to OpenTelemetry, spans and log records
(OpenTelemetry's logback appender) over OTLP/HTTP to a monitor with no declared convention.
Six questions, three answered with a planted wrong fact.

With the content logged (1.1: Spring AI's five switches; 2.0 on Boot 4: the five content
handlers declared as beans, spring-ai issue 5641), whether the store is observed (built with
the observation registry: a `simple query` span and its `Vector Store Query Response:` log
line) or built by hand (the documents only in the advisor's default prompt): six records,
each with the question, the two retrieved documents (exact text, one per document, none of
the prompt's template), the answer; three fail groundedness and three pass. With no advisor
and a `@Tool` that searches the store (`spring.ai.tools.observations.include-content`), the
context is the tool's result as it returned it. The indexing
traces make no record, are counted in `traces_not_rag_total` and draw no warning. With the
switches off (1.1), or on but without the beans (2.0), the monitor's warning says the true
cause, word for word."""

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
    Monitor,
    assert_each_question_right,
    jvm_app,
    run_app,
)
from harness.pipeline import metric_value as _value
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
# The trace stage's logger: what it says of each trace (the receivers also say that they
# discard the app's other log lines, which the log appender sends along with Spring AI's).
TRACE_STAGE = "monitor.processors.trace"
SERVICE = "spring-ai-rag"
# Spring AI's content switches (1.x): its observation handlers log prompts, completions and
# the store's documents only when these are on.
SWITCHES = (
    "spring.ai.chat.client.observations.log-prompt",
    "spring.ai.chat.client.observations.log-completion",
    "spring.ai.chat.observations.log-prompt",
    "spring.ai.chat.observations.log-completion",
    "spring.ai.vectorstore.observations.log-query-response",
)

# Where each app's Boot version reads the OTLP/HTTP endpoints of spans and of log records.
ENDPOINTS = {
    "spring_ai_1_1": ("management.otlp.tracing.endpoint", "management.otlp.logging.endpoint"),
    "spring_ai_2_0": (
        "management.opentelemetry.tracing.export.otlp.endpoint",
        "management.opentelemetry.logging.export.otlp.endpoint",
    ),
}


class Run:
    """One run of a Spring AI app against a monitor: its answers, trace count, records."""

    def __init__(self, monitor: Monitor, answers: list[dict[str, Any]], traces: int) -> None:
        self.monitor, self.answers, self.traces = monitor, answers, traces


async def run_spring(telemetry: Telemetry, tmp_path: Path, app: str, *properties: str) -> Run:
    """Run the app `tests/frameworks/<app>/` with `properties` (`name=value`) on its command
    line, sending to a fresh monitor."""
    java = jvm_app(app)
    kb = tmp_path / "kb.json"
    kb.write_text(json.dumps({"kb": KB, "questions": [q for q, _ in QUESTIONS]}))
    model_url = serve(three_planted_answer).removesuffix("/v1")

    def run(endpoint: str) -> Answers:
        logs = endpoint.removesuffix("/traces") + "/logs"
        return run_app(
            [
                "java",
                *JVM_FLAGS,
                *java,
                f"--rag.kb={kb}",
                f"--spring.ai.openai.base-url={model_url}",
                f"--{ENDPOINTS[app][0]}={endpoint}",
                f"--{ENDPOINTS[app][1]}={logs}",
                *(f"--{p}" for p in properties),
            ]
        )

    async def run_async(endpoint: str) -> Answers:
        return await asyncio.to_thread(run, endpoint)

    monitor = Monitor(telemetry)
    answers, traces = await monitor.run(run_async)
    return Run(monitor, answers, traces)


@pytest.mark.parametrize(
    ("app", "store", "advisor"),
    [
        ("spring_ai_1_1", "observed", "qa"),
        ("spring_ai_1_1", "hand", "qa"),
        ("spring_ai_1_1", "hand", "rag"),
        # No advisor: the model calls a @Tool that searches the store.
        ("spring_ai_1_1", "hand", "tool"),
        # 2.0 on Boot 4 with the five content handlers declared as beans (spring-ai 5641).
        ("spring_ai_2_0", "observed", "qa"),
        ("spring_ai_2_0", "hand", "qa"),
    ],
)
async def test_spring_ai_each_question_is_one_record_and_its_indexing_is_counted(
    telemetry: Telemetry,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    app: str,
    store: str,
    advisor: str,
) -> None:
    caplog.set_level(logging.WARNING, logger=TRACE_STAGE)
    done = await run_spring(
        telemetry,
        tmp_path,
        app,
        f"rag.store={store}",
        f"rag.advisor={advisor}",
        "rag.handlers=true",
        *(f"{s}=true" for s in SWITCHES),
        "spring.ai.tools.observations.include-content=true",
    )
    stage, answers = done.monitor.stage, done.answers
    assert [a["question"] for a in answers] == [q for q, _ in QUESTIONS]
    # A tool's result is one text (the tool joins the documents by lines): it is the
    # context as the tool returned it, not split by guess.
    records = await assert_each_question_right(
        stage,
        answers,
        SERVICE,
        PLANTED_THREE.values(),
        lambda q: KB[search(q)[0]],
        (lambda a: ["\n".join(a["sources"])]) if advisor == "tool" else (lambda a: a["sources"]),
    )
    source = {"tool": "tool_result"}.get(
        advisor, "retrieval_span" if store == "observed" else "prompt"
    )
    assert {r.context_source for r in records} == {source}
    indexing = done.traces - len(answers)
    # Observed, the store's `add` is one trace (its embedding calls under it); built by hand,
    # each document's embedding call is a trace of its own. And Spring AI's dimension probe
    # (an embedding call alone) either way.
    expected = (
        {"indexing": 1, "embedding_only": 1}
        if store == "observed"
        else {"embedding_only": len(KB) + 1}
    )
    assert indexing == sum(expected.values())
    for reason in ("indexing", "embedding_only", "health_check", "unrecognised"):
        counted = _value(telemetry, "traces_not_rag_total", service=SERVICE, reason=reason)
        assert counted == expected.get(reason, 0), reason
    assert _value(telemetry, "dropped_total", stage="assemble", reason="not_rag") == indexing
    assert [r.getMessage() for r in caplog.records if r.name.startswith(TRACE_STAGE)] == []


async def test_spring_ai_1_1_with_its_switches_off_names_them(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING, logger=TRACE_STAGE)
    done = await run_spring(telemetry, tmp_path, "spring_ai_1_1", "rag.store=observed")
    records = [r for _, r in done.monitor.stage.records]
    # Each question's record lacks its answer and is not evaluated.
    assert len(records) == 6
    assert {r.metadata.get(EXTRACTION_SUSPECT) for r in records} == {"no_response"}
    switch = (
        "(spring-ai: Spring AI writes content only as log lines: "
        "spring.ai.chat.client.observations.log-prompt / log-completion, "
        "spring.ai.chat.observations.log-prompt / log-completion and "
        "spring.ai.vectorstore.observations.log-query-response set to true, with the logs "
        "exported over OTLP to the monitor (an OTel log appender), and the vector store "
        "built with its observationRegistry (one built without it has no span and logs no "
        "documents))"
    )
    said = [r.getMessage() for r in caplog.records if r.name.startswith(TRACE_STAGE)]
    suspect = [m for m in said if "looks wrongly extracted (no_response)" in m]
    assert suspect and all(switch in m for m in suspect), said
    assert not any("5641" in m for m in said)


async def test_spring_ai_2_0_on_boot_4_with_its_switches_alone_says_why_and_what_to_declare(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING, logger=TRACE_STAGE)
    done = await run_spring(
        telemetry,
        tmp_path,
        "spring_ai_2_0",
        "rag.store=observed",
        *(f"{s}=true" for s in SWITCHES),
    )
    records = [r for _, r in done.monitor.stage.records]
    assert len(records) == 6
    assert {r.metadata.get(EXTRACTION_SUSPECT) for r in records} == {"no_response"}
    switch = (
        "(spring-ai 2.x: on Spring AI 2.x with Spring Boot 4, the "
        "spring.ai.*.observations.log-prompt / log-completion / log-query-response switches "
        "alone log nothing: Spring AI's observation auto-configuration looks for the Tracer "
        "before Boot 4 defines it and declares no content handler (spring-ai issue 5641). "
        "Declare the five handlers as beans, each a TracingAwareLoggingObservationHandler "
        "given the Tracer, around ChatModelPromptContentObservationHandler, "
        "ChatModelCompletionObservationHandler, ChatClientPromptContentObservationHandler, "
        "ChatClientCompletionObservationHandler and VectorStoreQueryResponseObservationHandler "
        "(the README's 'Tracing your app' shows them), with the logs exported over OTLP to "
        "the monitor (an OTel log appender))"
    )
    said = [r.getMessage() for r in caplog.records if r.name.startswith(TRACE_STAGE)]
    suspect = [m for m in said if "looks wrongly extracted (no_response)" in m]
    assert suspect and all(switch in m for m in suspect), said
