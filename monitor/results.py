"""The result of one evaluation of one record, shared by the evaluation stage and everything
after it (exporters, alerts, replay's summary).

A result is a verdict (`passed` True/False, `score` on the evaluator's native scale,
`normalized` 0..1 with 1 = good) or an error (`error` set, `passed` None): an error is
never a pass and never a defect.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from monitor.config import Severity as Severity  # part of a result's type

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
    # What gave the verdict: the evaluator's revision (`monitor.evaluators.revision`). A
    # rule's baseline belongs to one revision.
    revision: str | None = None

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
            "revision": self.revision,
            "safety": self.safety,
        }

    @classmethod
    def from_json(cls, name: str, raw: Any, under: str = "results") -> EvalResult:
        """Takes back `as_json()` (a results line's object, in its field `under`); raises
        ValueError naming the field that is not what a results line holds."""
        if not isinstance(raw, dict):
            raise ValueError(f"{under}.{name}: expected an object")

        def field(key: str, kinds: tuple[type, ...]) -> Any:
            value = raw.get(key)
            if value is not None and (
                isinstance(value, bool) != (bool in kinds) or not isinstance(value, kinds)
            ):
                raise ValueError(f"{under}.{name}.{key}: {value!r} is not a {kinds[0].__name__}")
            return value

        safety = field("safety", (dict,))
        if safety is not None and any(v not in SEVERITIES for v in safety.values()):
            raise ValueError(f"{under}.{name}.safety: a severity is not one of {SEVERITIES}")
        severity = field("severity", (str,))
        return cls(
            name=name,
            score=field("score", (float, int)),
            normalized=field("normalized", (float, int)),
            label=field("label", (str,)),
            passed=field("passed", (bool,)),
            severity=severity if severity in SEVERITIES else None,
            error=field("error", (str,)),
            revision=field("revision", (str,)),
            safety=safety,
        )

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


Results = Mapping[str, EvalResult]
"""One record's results, by evaluator."""
