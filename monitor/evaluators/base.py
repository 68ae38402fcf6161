"""The evaluator interface and its result (factories: `factory`; the name → factory table:
`registry`).

An evaluator is stateless: `evaluate(record)` returns a new `EvalResult` and stores
nothing on `self`, so one instance serves concurrent records. A result is a verdict
(`passed` True/False, `score` on the native scale, `normalized` 0..1 with 1 = good) or an
error (`error` set, `passed` None): an error is never a pass and never a defect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from monitor.config import Severity as Severity  # part of a result's type
from monitor.records import Part, RagRecord

Outcome = Literal["pass", "fail", "error"]
SEVERITIES: tuple[Severity, ...] = ("very_low", "low", "medium", "high")


@dataclass(frozen=True, slots=True)
class EvalResult:
    name: str
    score: float | None = None
    normalized: float | None = None
    label: str | None = None
    passed: bool | None = None
    severity: Severity | None = None
    explanation: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    error: str | None = None
    # Safety evaluators: severity per harm category graded (hate_unfairness, ..., jailbreak).
    safety: dict[str, Severity] | None = None

    @property
    def outcome(self) -> Outcome:
        if self.error is not None or self.passed is None:
            return "error"
        return "pass" if self.passed else "fail"

    def as_json(self) -> dict[str, Any]:
        """The per-evaluator object of a results line (docs/contract.md, "Results file")."""
        return {
            "score": self.score,
            "normalized": self.normalized,
            "label": self.label,
            "passed": self.passed,
            "severity": self.severity,
            "explanation": self.explanation,
            "error": self.error,
        }

    @classmethod
    def failed(cls, name: str, error: str) -> EvalResult:
        return cls(name=name, error=error)

    @classmethod
    def verdict(
        cls, name: str, value: float, threshold: float, explanation: str, **costs: Any
    ) -> EvalResult:
        """A 0..1 score (1 = good) that passes at `threshold` or above; `costs` are the
        token and cost fields of a judged one."""
        passed = value >= threshold
        return cls(
            name=name,
            score=round(value, 4),
            normalized=round(value, 4),
            label="pass" if passed else "fail",
            passed=passed,
            explanation=explanation,
            **costs,
        )


def severity_bucket(level: float) -> Severity:
    """Bucket a 0–7 harm severity: very_low 0–1, low 2–3, medium 4–5, high 6–7."""
    if level < 2:
        return "very_low"
    if level < 4:
        return "low"
    if level < 6:
        return "medium"
    return "high"


class Evaluator(Protocol):
    """What the pipeline needs from an evaluator."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> Literal["local", "judge"]:
        """ "local" evaluators run on CPU in-process; "judge" ones call an LLM and obey
        budgets."""

    @property
    def requires(self) -> frozenset[Part]:
        """Record parts without which the evaluator cannot say anything."""

    async def evaluate(self, record: RagRecord) -> EvalResult: ...


@runtime_checkable
class CpuScorer(Protocol):
    """An evaluator whose work is one synchronous CPU function. The evaluation stage runs
    all of a record's CPU scorers in a single worker-thread hop instead of one `evaluate`
    each: on the development VM a hop cost about 0.13 ms of CPU (a loop of `to_thread`
    calls on an empty function), as much as scoring a small record."""

    name: str

    def score(self, record: RagRecord) -> EvalResult: ...
