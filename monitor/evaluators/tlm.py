"""`trustworthiness_tlm`: an LLM judge scoring a response's trustworthiness from observed
consistency and self-reflection, as BSDetector/TLM do (docs/contract.md, "Evaluators";
the arithmetic is in `monitor/judge/consistency.py`)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal, cast

from monitor.config import EvaluatorConfig, TrustworthinessTlm
from monitor.evaluators.factory import BuildContext, Factory
from monitor.judge import consistency, parsers, schemas
from monitor.judge.client import AnswerFormat, JudgeClient, Verdict
from monitor.judge.definitions import TLM, YES_NO_HINT
from monitor.judge.templates import ANSWER_SYSTEM_MESSAGE, load
from monitor.records import Part, RagRecord
from monitor.results import EvalResult

DRAW_MAX_TOKENS = 160
REFLECTION_MAX_TOKENS = 200
AGREEMENT_MAX_TOKENS = 120
_REFLECTION_HINT = 'a final line "Answer: A", "Answer: B" or "Answer: C"'
_QCR = frozenset({"query", "context", "response"})


class TrustworthinessTlmEvaluator:
    """`trustworthiness_tlm`: the response's trustworthiness as BSDetector/TLM score it
    (`monitor/judge/consistency.py` has the arithmetic).

    Per record, through the shared judge client: `draws` answers of its own to the same
    question with the same context at `temperature` (the drawn answers), and `reflections` self-reflection calls (one
    per wording) grading the response correct / incorrect / not sure, all concurrently;
    with `agreement: judge`, one more call per drawn answer asks whether it states the same
    facts as the response. Every call must end in a verdict: one that fails (after the client's
    retries and format follow-up) makes the record an `error` result naming the failed
    calls, with the tokens and cost of every call made; there is no partial score."""

    kind: Literal["local", "judge"] = "judge"
    requires: frozenset[Part] = frozenset({"query", "response"})

    def __init__(
        self,
        client: JudgeClient,
        model: str,
        options: TrustworthinessTlm,
        *,
        threshold: float | None = None,
        api_base: str | None = None,
    ) -> None:
        self.name = TLM
        self.model = model
        self.options = options
        self.threshold = threshold if threshold is not None else 0.5
        self._client = client
        self._api_base = api_base
        self._draw = load(
            f"{TLM}_draw",
            None,
            frozenset({"query", "context"}),
            frozenset({"query", "context"}),
            system=ANSWER_SYSTEM_MESSAGE,
        )
        wordings = [f"{TLM}_reflect", f"{TLM}_reflect_2"][: options.reflections]
        self._reflect = [load(name, None, _QCR, _QCR) for name in wordings]
        both = frozenset({"query", "response", "reference"})
        self._agree = load(f"{TLM}_agree", None, both, both)
        self.version = "+".join(t.version for t in (self._draw, *self._reflect, self._agree))

    @property
    def calls_per_record(self) -> int:
        """Judge calls a record costs when none is cached or repeated for the format."""
        draws = self.options.draw_count
        return draws + self.options.reflections + (draws if self._by_judge else 0)

    @property
    def _by_judge(self) -> bool:
        return self.options.agreement == "judge"

    async def evaluate(self, record: RagRecord) -> EvalResult:
        query, response = record.query or "", record.response or ""
        values: dict[str, str | list[str] | None] = {
            "query": query,
            "context": record.context_text,
            "response": response,
        }
        shown = {"query": query, "context": "\x1e".join(record.context_text)}
        opts = self.options
        temperature = f"{opts.temperature:g}"
        calls = [
            self._ask(
                f"{TLM}_draw",
                f"{self._draw.version}@t={temperature}",
                self._draw.render(values),
                {**shown, "draw": str(i)},
                AnswerFormat(parsers.parse_draw, "a short answer to the question"),
                DRAW_MAX_TOKENS,
                temperature=opts.temperature,
            )
            for i in range(opts.draw_count)
        ]
        calls += [
            self._ask(
                f"{TLM}_reflect",
                template.version,
                template.render(values),
                {**shown, "response": response},
                AnswerFormat(parsers.parse_reflection, _REFLECTION_HINT, schemas.ReflectionAnswer),
                REFLECTION_MAX_TOKENS,
                logprobs=opts.logprobs,
            )
            for template in self._reflect
        ]
        verdicts = list(await asyncio.gather(*calls))
        what = [f"draw {i + 1}" for i in range(opts.draw_count)]
        what += [f"reflection {i + 1}" for i in range(len(self._reflect))]
        failed = self._failures(verdicts, what)
        drawn = [str(v.value) for v in verdicts[: opts.draw_count]]
        if not failed and self._by_judge:
            judged = list(
                await asyncio.gather(*(self.judge_agreement(query, response, d) for d in drawn))
            )
            failed = self._failures(judged, [f"agreement {i + 1}" for i in range(len(drawn))])
            verdicts += judged
        costs: dict[str, Any] = {
            "input_tokens": sum(v.input_tokens for v in verdicts),
            "output_tokens": sum(v.output_tokens for v in verdicts),
            "cost": sum(v.cost for v in verdicts),
        }
        if failed:
            return EvalResult(
                name=self.name,
                error=f"{len(failed)} of {len(verdicts)} calls failed: " + "; ".join(failed),
                **costs,
            )
        if self._by_judge:
            agreements = [
                consistency.judged_agreement(response, d, bool(v.value))
                for d, v in zip(drawn, verdicts[-len(drawn) :], strict=True)
            ]
        else:
            agreements = await asyncio.to_thread(
                lambda: [consistency.detector_agreement(query, response, d) for d in drawn]
            )
        observed = sum(a.score for a in agreements) / len(agreements)
        explanation = consistency.describe_consistency(agreements)
        reflected: float | None = None
        reflections = verdicts[opts.draw_count : opts.draw_count + len(self._reflect)]
        if reflections:
            said = [float(cast(float, v.value)) for v in reflections]
            graded = [
                g if (g := consistency.logprob_grade(v.logprobs, s)) is not None else s
                for v, s in zip(reflections, said, strict=True)
            ]
            reflected = sum(graded) / len(graded)
            explanation += "; " + consistency.describe_reflection(
                said, graded, reflections[0].explanation
            )
        score = consistency.confidence(
            observed, reflected, opts.weights.consistency, opts.weights.reflection
        )
        return EvalResult.verdict(self.name, score, self.threshold, explanation, **costs)

    async def judge_agreement(self, query: str, response: str, drawn: str) -> Verdict[Any]:
        """The judge's YES/NO on whether the `drawn` answer states the same facts as
        `response`."""
        values: dict[str, str | list[str] | None] = {
            "query": query,
            "response": response,
            "reference": drawn,
        }
        return await self._ask(
            f"{TLM}_agree",
            self._agree.version,
            self._agree.render(values),
            {"query": query, "response": response, "reference": drawn},
            AnswerFormat(parsers.parse_yes_no, YES_NO_HINT, schemas.YesNoAnswer),
            AGREEMENT_MAX_TOKENS,
        )

    async def _ask(
        self,
        evaluator: str,
        version: str,
        messages: list[dict[str, str]],
        inputs: dict[str, str | None],
        answer: AnswerFormat,
        max_tokens: int,
        *,
        temperature: float = 0.0,
        logprobs: bool = False,
    ) -> Verdict[Any]:
        return await self._client.judge(
            evaluator=evaluator,
            version=version,
            model=self.model,
            messages=messages,
            inputs=inputs,
            answer=answer,
            max_tokens=max_tokens,
            api_base=self._api_base,
            temperature=temperature,
            logprobs=logprobs,
        )

    @staticmethod
    def _failures(verdicts: list[Verdict[Any]], what: list[str]) -> list[str]:
        return [
            f"{name}: {v.error or 'no verdict'}"
            for name, v in zip(what, verdicts, strict=True)
            if v.error is not None or v.value is None
        ]


def _create_tlm(entry: EvaluatorConfig, context: BuildContext) -> TrustworthinessTlmEvaluator:
    client, model = context.judge_for(entry)
    options = entry.tlm or TrustworthinessTlm()
    return TrustworthinessTlmEvaluator(
        client, model, options, threshold=entry.threshold, api_base=entry.api_base
    )


FACTORIES: dict[str, Factory] = {TLM: _create_tlm}
