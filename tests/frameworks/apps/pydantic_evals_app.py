"""A RAG app that judges its own answers online with pydantic-evals: a Pydantic AI agent
whose retrieval is a tool (traced by Pydantic AI's own instrumentation, as
`pydantic_ai_app`), its answering function decorated with `pydantic_evals.online.evaluate`
and an evaluator that checks each answer against the documents retrieved for it.
pydantic-evals runs the evaluator in the background and writes each verdict as a
`gen_ai.evaluation.result` OTLP log record parented to the call it judged; the app sends
them, and its spans, over OTLP/HTTP. Run as
`python -m tests.frameworks.apps.pydantic_evals_app JUDGE_VERSION VARIANT ENDPOINT`:

- `JUDGE_VERSION`: the evaluator's version (`get_evaluator_version`, written as
  `gen_ai.evaluation.evaluator.version`): a run can change the app's judge;
- `VARIANT`: `planted-N`, the scripted model states a wrong fact in the answers of the
  first N documents of `PLANTED_THREE` (N of the six answers fail the judge).

The model is Pydantic AI's `FunctionModel`: the first turn calls the `search_kb` tool,
the second answers from the tool's result. Each question is asked under the app's own
`POST /ask` span, which ends only once the question's verdicts were exported (so they
reach the monitor before the span that releases the trace). Prints one JSON line per
question, with the judge's verdict and version, then the traces sent."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_evals.evaluators import (
    EvaluationReason,
    EvaluationResult,
    Evaluator,
    EvaluatorContext,
    EvaluatorFailure,
)
from pydantic_evals.online import OnlineEvaluator, evaluate, wait_for_evaluations

from tests.frameworks.apps.framework_apps import (
    ANSWERS,
    KB,
    PLANTED_THREE,
    QUESTIONS,
    finish,
    scripted_answer,
    search,
    tracer_provider,
)

SERVICE = "pydantic-evals-app"
# How long the app waits for one question's verdicts at most.
VERDICTS_WAIT_S = 60.0


@dataclass
class Answered:
    """What the answering function returns, and the evaluator judges."""

    response: str
    documents: list[str]


def _numbers(text: str) -> set[str]:
    """The runs of digits in `text`."""
    runs, current = set(), ""
    for ch in text + " ":
        if ch.isdigit():
            current += ch
        elif current:
            runs.add(current)
            current = ""
    return runs


@dataclass
class Grounded(Evaluator[str, Answered]):
    """The app's judge: an answer passes when every number it states is in the documents
    it was given (the scripted model's wrong facts are numbers)."""

    version: str = "judge-v1"

    def evaluate(self, ctx: EvaluatorContext[str, Answered]) -> EvaluationReason:
        context = " ".join(ctx.output.documents)
        missing = sorted(_numbers(ctx.output.response) - _numbers(context))
        reason = f"not in the context: {', '.join(missing)}" if missing else "every number cited"
        return EvaluationReason(value=not missing, reason=reason)

    def get_evaluator_version(self) -> str | None:
        return self.version


def _wrong(planted: int) -> dict[str, str]:
    """The scripted model's wrong answers: those of the first `planted` documents."""
    return {ANSWERS[uri]: wrong for uri, wrong in list(PLANTED_THREE.items())[:planted]}


def _model(planted: int) -> FunctionModel:
    wrong = _wrong(planted)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
        returns = [p for p in requests if isinstance(p, ToolReturnPart)]
        if not returns:
            question = next(str(p.content) for p in requests if isinstance(p, UserPromptPart))
            return ModelResponse(parts=[ToolCallPart("search_kb", {"query": question})])
        answer = scripted_answer("\n".join(p.model_response_str() for p in returns))
        return ModelResponse(parts=[TextPart(wrong.get(answer, answer))])

    return FunctionModel(model, model_name="scripted")


def search_kb(query: str) -> list[dict[str, str]]:
    """Search the knowledge base."""
    return [{"id": uri, "content": KB[uri]} for uri in search(query)]


async def _ask_each(agent: Agent[None, str], judge: Grounded, logs: LoggerProvider) -> None:
    verdicts: dict[str, tuple[bool, str | None]] = {}

    def keep(
        results: Sequence[EvaluationResult],
        failures: Sequence[EvaluatorFailure],
        ctx: EvaluatorContext[str, Answered],
    ) -> None:
        # The app's own copy of each verdict (a sink beside the OTel log records), for the
        # test to compare with what the monitor read.
        for result in results:
            verdicts[ctx.inputs["question"]] = (bool(result.value), result.evaluator_version)

    @evaluate(OnlineEvaluator(evaluator=judge, sink=keep), target="rag_answer")
    async def rag_answer(question: str) -> Answered:
        result = await agent.run(question)
        return Answered(result.output, [KB[uri] for uri in search(question)])

    tracer = trace.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}) as span:
            trace_id = f"{span.get_span_context().trace_id:032x}"
            answered = await rag_answer(question)
            await wait_for_evaluations(timeout=VERDICTS_WAIT_S)
            assert logs.force_flush(), "the verdicts were not exported"
        passed, version = verdicts[question]
        line = {
            "trace_id": trace_id,
            "question": question,
            "response": answered.response,
            "sources": answered.documents,
            "passed": passed,
            "judge_version": version,
        }
        print(json.dumps(line), flush=True)


def main(judge_version: str, variant: str, endpoint: str) -> None:
    planted = int(variant.removeprefix("planted-"))
    provider, roots = tracer_provider(SERVICE, endpoint)
    # pydantic-evals opens its call span and writes its log records through the global
    # providers.
    trace.set_tracer_provider(provider)
    logs = LoggerProvider(resource=provider.resource)
    logs.add_log_record_processor(
        BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=endpoint.replace("/v1/traces", "/v1/logs"))
        )
    )
    set_logger_provider(logs)
    agent: Agent[None, str] = Agent(_model(planted), tools=[search_kb])
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    asyncio.run(_ask_each(agent, Grounded(version=judge_version), logs))
    logs.shutdown()
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
