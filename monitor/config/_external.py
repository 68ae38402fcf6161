"""`external_verdicts`: the verdicts an app writes into its own traces — evaluation results
(`gen_ai.evaluation.result`) and guardrail verdicts — read as verdicts of evaluators named
`external:<name>` and `guardrail:<name>`, counted and judged like the monitor's own
(docs/external-evaluations.md). They are data their sender controls: who may send them,
how many evaluators and labels each service may have, and other vocabularies to read."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from monitor.config._fields import Section

# How evaluator names are written: the prefix says who judged.
EXTERNAL_PREFIX = "external:"
GUARDRAIL_PREFIX = "guardrail:"
# Bounds on a user's vocabularies.
MAX_VOCABULARIES = 16
MAX_NAMES = 64
MAX_ATTRIBUTES = 8
MAX_SERVICES = 1000


class VerdictVocabulary(Section):
    """A vocabulary of verdicts beside the shipped ones (`monitor/conventions/_verdicts.py`):
    where its verdicts travel (`events`: span events and log records so named; `span_key`:
    a span carrying this attribute is one) and which attributes hold each part, read in
    order. `evaluation`: `passing` / `failing` labels; `guardrail`: `outcomes` maps each
    outcome value to blocked, flagged or passed."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["evaluation", "guardrail"]
    events: list[str] = Field(default=[], max_length=MAX_NAMES)
    span_key: str | None = Field(default=None, min_length=1)
    evaluator: list[str] = Field(min_length=1, max_length=MAX_ATTRIBUTES)
    score: list[str] = Field(default=[], max_length=MAX_ATTRIBUTES)
    label: list[str] = Field(default=[], max_length=MAX_ATTRIBUTES)
    explanation: list[str] = Field(default=[], max_length=MAX_ATTRIBUTES)
    category: list[str] = Field(default=[], max_length=MAX_ATTRIBUTES)
    version: list[str] = Field(default=[], max_length=MAX_ATTRIBUTES)
    error: list[str] = Field(default=[], max_length=MAX_ATTRIBUTES)
    passing: list[str] = Field(default=[], max_length=MAX_NAMES)
    failing: list[str] = Field(default=[], max_length=MAX_NAMES)
    outcomes: dict[str, Literal["blocked", "flagged", "passed"]] = Field(
        default={}, max_length=MAX_NAMES
    )

    @model_validator(mode="after")
    def _carried_and_readable(self) -> VerdictVocabulary:
        if not self.events and self.span_key is None:
            raise ValueError("events: name the events (or a span_key) its verdicts travel in")
        if self.kind == "guardrail" and not (self.label and self.outcomes):
            raise ValueError("outcomes: a guardrail vocabulary maps its label values to outcomes")
        if self.kind == "evaluation" and not (self.label or self.score):
            raise ValueError("label: an evaluation vocabulary needs a label or a score")
        return self


class ExternalVerdicts(Section):
    """`enabled`: read them at all. `services`: the services whose verdicts are taken, by
    the `service.name` of the span or log record that carries each (empty: every service). `evaluators`: the evaluator names taken, as written
    (`external:relevance`, `guardrail:pii`; empty: any, up to the bounds).
    `max_evaluators_per_service` and `max_labels_per_evaluator`: how many distinct
    evaluator names a service, and distinct labels (guardrail categories) an evaluator,
    may have; the first ones seen hold their places, later ones are refused (counted in
    `external_verdicts_refused_total`). `max_label_chars`: longer names and labels are
    refused. `threshold`: a verdict whose label says neither pass nor fail passes at this
    score or above, when its score is in 0..1 (1 = good). `vocabularies`: others to read."""

    enabled: bool = True
    services: list[str] = Field(default=[], max_length=MAX_SERVICES)
    evaluators: list[str] = Field(default=[], max_length=MAX_SERVICES)
    max_evaluators_per_service: int = Field(default=16, ge=1, le=256)
    max_labels_per_evaluator: int = Field(default=16, ge=1, le=256)
    max_label_chars: int = Field(default=64, ge=8, le=256)
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    vocabularies: list[VerdictVocabulary] = Field(default=[], max_length=MAX_VOCABULARIES)

    @field_validator("evaluators")
    @classmethod
    def _named_as_written(cls, names: list[str]) -> list[str]:
        for name in names:
            if not name.startswith((EXTERNAL_PREFIX, GUARDRAIL_PREFIX)):
                raise ValueError(
                    f"{name!r} does not start with {EXTERNAL_PREFIX!r} or "
                    f"{GUARDRAIL_PREFIX!r} (an app's own evaluators are named by who judged)"
                )
        return names

    @field_validator("vocabularies")
    @classmethod
    def _named_once(cls, entries: list[VerdictVocabulary]) -> list[VerdictVocabulary]:
        names = [v.name for v in entries]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"named twice: {', '.join(twice)}")
        return entries


def is_external(evaluator: str) -> bool:
    """Whether `evaluator` names an app's own judge, not one the monitor runs."""
    return evaluator.startswith((EXTERNAL_PREFIX, GUARDRAIL_PREFIX))
