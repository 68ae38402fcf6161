"""The embedded evaluators: no network, no API key, CPU only (see `monitor.detector`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from monitor.config import EvaluatorConfig
from monitor.evaluators.base import Evaluator
from monitor.evaluators.factory import BuildContext, Factory
from monitor.records import Part, RagRecord
from monitor.results import SEVERITIES, EvalResult, Severity, severity_bucket

if TYPE_CHECKING:  # the detector loads where records are scored, not at import
    from monitor.detector.contradiction import Contradiction
    from monitor.detector.groundedness import GroundednessVerdict

_MAX_LISTED = 5


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _LocalEvaluator:
    """Runs a pure scoring function off the event loop and turns it into an `EvalResult`."""

    kind: Literal["local"] = "local"
    requires: frozenset[Part] = frozenset()
    default_threshold = 0.5

    def __init__(self, spec: EvaluatorConfig) -> None:
        self.name = spec.name
        self.threshold = spec.threshold if spec.threshold is not None else self.default_threshold

    async def evaluate(self, record: RagRecord) -> EvalResult:
        return await asyncio.to_thread(self.score, record)

    async def warm_up(self) -> None:
        """Load the shared word vectors now rather than on the first record."""
        # The detector (and numpy) is imported where records are scored, in the worker
        # processes, never by a main process that only hands records on.
        from monitor.detector.embedding import shared_embedder

        await asyncio.to_thread(shared_embedder)

    def score(self, record: RagRecord) -> EvalResult:
        # The evaluators of one record tokenise, split and embed the same texts: each is
        # done once per record (`shared_work`), whichever evaluator needs it first.
        from monitor.detector.text import shared_work

        with shared_work(record):
            return self._score(record)

    def _score(self, record: RagRecord) -> EvalResult:
        raise NotImplementedError

    def _verdict(self, value: float, explanation: str) -> EvalResult:
        return EvalResult.verdict(self.name, value, self.threshold, explanation)


def asked(record: RagRecord) -> str:
    """What the groundedness check reads as the question: earlier turns count as support
    too, since an answer may repeat what the user said before."""
    return "\n".join([*(m.content for m in record.history), record.query or ""])


def _disagreements(verdict: GroundednessVerdict) -> list[Contradiction]:
    """Contradictions that did not decide the score: counted by the model, shown as possible."""
    return [c for c in verdict.contradictions if not (c.decisive or c.invented)]


def _failing_explanation(verdict: GroundednessVerdict) -> str:
    """What decided first: the deciding contradictions, or the unsupported sentences and the
    terms the context lacks (a name the context never mentions first, where it decided);
    contradictions that did not decide come last, as possible disagreements."""
    parts = []
    if verdict.decided_by == "contradiction":
        deciding = [c for c in verdict.contradictions if c.decisive or c.invented]
        shown = "; ".join(c.describe() for c in deciding[:_MAX_LISTED])
        parts.append(f"contradicted: {shown}")
    if verdict.unsupported:
        listed = "; ".join(_clip(s) for s in verdict.unsupported[:_MAX_LISTED])
        more = len(verdict.unsupported) - _MAX_LISTED
        parts.append(f"unsupported: {listed}" + (f" (+{more} more)" if more > 0 else ""))
        if verdict.unsupported_terms:
            terms = ", ".join(verdict.unsupported_terms[: 3 * _MAX_LISTED])
            parts.append(f"not in the context: {terms}")
    if not parts:
        parts.append("fail: no single sentence stands out; the answer as a whole")
    possible = _disagreements(verdict)
    if possible:
        shown = "; ".join(c.describe() for c in possible[:_MAX_LISTED])
        parts.append(f"a possible disagreement, not decisive: {shown}")
    if verdict.rescored:
        parts.append("uncertain: rescored by the sentence-pair model")
    return " | ".join(parts)


def _passing_explanation(verdict: GroundednessVerdict) -> str:
    """A pass says it passed and names what was weakest, never a finding of failure."""
    parts = ["pass"]
    if verdict.unsupported:
        terms = verdict.unsupported_terms
        missing = f", {len(terms)} word{'s' if len(terms) != 1 else ''} not in the context"
        listed = f" ({', '.join(terms[: 3 * _MAX_LISTED])})" if terms else ""
        parts.append(f"weakest sentence: {_clip(verdict.unsupported[0])}{missing}{listed}")
    if verdict.contradictions:
        shown = verdict.contradictions[0].describe()
        parts.append(f"a possible disagreement, not decisive: {shown}")
    if verdict.rescored:
        parts.append("uncertain: rescored by the sentence-pair model")
    if len(parts) == 1:
        parts.append("no sentence stands out as unsupported by the context")
    return "; ".join(parts)


class LocalGroundedness(_LocalEvaluator):
    requires = frozenset({"context", "response"})

    def __init__(self, spec: EvaluatorConfig) -> None:
        super().__init__(spec)
        # Off unless asked: the sentence-pair model costs each worker process its own
        # ONNX Runtime session, for a small gain (monitor/detector/README.md).
        self.second_stage = bool(spec.second_stage)
        # A previous release's parameters (`monitor.detector.releases`), or this one's.
        self.parameters = None if spec.release is None else spec.release[1:]

    def _score(self, record: RagRecord) -> EvalResult:
        from monitor.detector import score_groundedness
        from monitor.detector.groundedness import SHIPPED, Parameters

        assert record.response is not None
        parameters = SHIPPED if self.parameters is None else Parameters(*map(Path, self.parameters))
        verdict = score_groundedness(
            asked(record),
            record.context_text,
            record.response,
            second_stage=self.second_stage,
            parameters=parameters,
        )
        if verdict.score >= self.threshold:
            explanation = _passing_explanation(verdict)
        else:
            explanation = _failing_explanation(verdict)
        return self._verdict(verdict.score, explanation)


class LocalRelevance(_LocalEvaluator):
    requires = frozenset({"query", "response"})

    def _score(self, record: RagRecord) -> EvalResult:
        from monitor.detector import score_relevance

        assert record.query is not None and record.response is not None
        value = score_relevance(record.query, record.response)
        return self._verdict(value, f"question/response relevance {value:.2f}")


class LocalRetrieval(_LocalEvaluator):
    requires = frozenset({"query", "context"})

    def _score(self, record: RagRecord) -> EvalResult:
        from monitor.detector import score_retrieval

        assert record.query is not None
        verdict = score_retrieval(record.query, record.context_text)
        per_doc = ", ".join(f"#{i + 1}={v:.2f}" for i, v in enumerate(verdict.per_document))
        return self._verdict(
            verdict.score, f"best rank {verdict.best_rank}; per document: {per_doc}"
        )


class LocalSafety(_LocalEvaluator):
    """Heuristic screen; a defect when any category reaches `severity_threshold`."""

    requires = frozenset({"response"})

    def __init__(self, spec: EvaluatorConfig) -> None:
        super().__init__(spec)
        self.severity_threshold: Severity = spec.severity_threshold or "medium"

    def _score(self, record: RagRecord) -> EvalResult:
        from monitor.detector import screen_safety

        assert record.response is not None
        verdict = screen_safety(record.query or "", record.response)
        safety: dict[str, Severity] = {c: severity_bucket(v) for c, v in verdict.severities.items()}
        safety["jailbreak"] = "high" if verdict.jailbreak else "very_low"
        worst_category = max(safety, key=lambda c: SEVERITIES.index(safety[c]))
        worst = safety[worst_category]
        passed = SEVERITIES.index(worst) < SEVERITIES.index(self.severity_threshold)
        top = max(verdict.severities.values(), default=0)
        return EvalResult(
            name=self.name,
            score=float(max(top, 7 if verdict.jailbreak else 0)),
            normalized=round(1 - max(top, 7 if verdict.jailbreak else 0) / 7, 4),
            label=worst_category if worst != "very_low" else "safe",
            passed=passed,
            severity=worst,
            explanation="; ".join(verdict.reasons) or "no harm markers found",
            safety=safety,
        )


CLASSES: dict[str, type[_LocalEvaluator]] = {
    "local_groundedness": LocalGroundedness,
    "local_relevance": LocalRelevance,
    "local_retrieval": LocalRetrieval,
    "local_safety": LocalSafety,
}


def _create(spec: EvaluatorConfig, context: BuildContext) -> Evaluator:
    return CLASSES[spec.name](spec)


FACTORIES: dict[str, Factory] = dict.fromkeys(
    ("local_groundedness", "local_relevance", "local_retrieval", "local_safety"), _create
)
