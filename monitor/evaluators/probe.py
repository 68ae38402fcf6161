"""`check-config --probe`: each judge evaluator asked to judge one sample record, through
the judge client as `run` calls it (its prompt, its answer format, its parser), with no
retry, cache or circuit breaker in the way. A judge whose answers do not parse fails here,
not at run time: a reachable model that cannot give a verdict is no judge. Each failure is
one line, by kind: `auth`, `not_found`, `unreachable`, `rate_limited`, `timeout`, `parse`,
`truncated`, `error` (`monitor.judge.access.ProbeResult`); a free-form answer cut off or
unread says how to ask for structured output."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from monitor.config import Config, EvaluatorConfig
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.judge.access import JudgeTarget, ProbeResult
from monitor.judge.client import JudgeClient
from monitor.judge.definitions import JUDGE_EVALUATORS
from monitor.records import parse_record
from monitor.telemetry import create_telemetry

# Every part any judge reads, so that each has what it needs.
SAMPLE = parse_record(
    {
        "request_id": "rag-monitor-probe",
        "service": "rag-monitor-probe",
        "request": "How long is the Model X kettle's warranty?",
        "retrieved_context": [
            {
                "content": "The Model X kettle comes with a two-year warranty covering "
                "manufacturing defects.",
                "doc_uri": "kb/warranty.md",
            }
        ],
        "response": "The Model X kettle has a two-year warranty for manufacturing defects.",
        "expected_response": "Two years, for manufacturing defects.",
    }
)
_KINDS = ("auth", "not_found", "unreachable", "rate_limited", "timeout", "parse", "truncated")
# A free-form answer that ran past its tokens or could not be read: a schema keeps a
# model to the verdict's fields, so the line says how to ask for one.
_CUT_OR_UNREAD = ("parse", "truncated")


def structured_hint(mode: str) -> str:
    """What a probe failure's line adds when the judge answered free-form under `mode`
    (`judge.structured_output`)."""
    chose = "chose free-form for this model" if mode == "auto" else "is off"
    return (
        f"; the answer was free-form (judge.structured_output: {mode} {chose}): set "
        "judge.structured_output: on where the model server takes a JSON schema "
        "(llama.cpp, vLLM, Ollama do), which keeps the answer to the verdict's fields"
    )


async def probe(config: Config, environ: Mapping[str, str] | None = None) -> list[ProbeResult]:
    """One verdict asked of each judge evaluator; each answer or failure one result."""
    # Once: what a failing judge does under retries and the breaker is `run`'s business.
    judge = config.judge.model_copy(
        update={"retries": 0, "cache_size": 0, "breaker_failures": 1_000_000}
    )
    entries = [e for e in config.evaluators if e.name in JUDGE_EVALUATORS]
    models = sorted({m for e in entries if (m := e.model or judge.model)})
    client = JudgeClient(
        judge,
        config.redaction,
        create_telemetry(),
        environ=environ,
        models=models,
        log_failures=False,
    )
    context = BuildContext(judge=client, judge_model=judge.model)

    async def one(i: int, entry: EvaluatorConfig) -> ProbeResult | None:
        model = entry.model or judge.model
        if model is None:
            return None
        key = f"evaluators.{i}.model" if entry.model else "judge.model"
        target = JudgeTarget(model, entry.api_base or judge.api_base, key, (entry.name,))
        result = await build(entry, context).evaluate(SAMPLE)
        if result.error is None:
            return ProbeResult(target, "ok", "")
        kind, _, detail = result.error.partition(": ")
        if kind not in _KINDS:
            kind, detail = "error", result.error
        if kind in _CUT_OR_UNREAD and client.asks_structured(model) is False:
            detail += structured_hint(judge.structured_output)
        return ProbeResult(target, kind, detail)

    results = await asyncio.gather(
        *(one(i, e) for i, e in enumerate(config.evaluators) if e.name in JUDGE_EVALUATORS)
    )
    await client.shutdown(0)
    return [r for r in results if r is not None]
