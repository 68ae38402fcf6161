"""`audit`: a reference scores a random share of what a detector evaluated, and the
detector's defect rate is corrected to an estimate of the true rate with an interval
(`monitor.audit`, docs/audit.md)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from monitor.config._fields import Duration, ReadableFile, Section, environ_of, parse_duration

LABELS = "labels"
"""`audit.reference` for labels fed back (human review) instead of a judge."""


class LabelFeed(Section):
    # A JSON-lines file of `{"request_id": ..., "label": "pass" | "fail"}`, read as it grows.
    file: str | None = None
    # `POST /audit/labels` on the metrics port takes the same objects (one, or a list),
    # from senders with a credential (`token_env`, or the metrics port's web config); on a
    # loopback address from anyone on the host.
    http: bool = False
    # The environment variable holding the bearer token label senders present
    # (`Authorization: Bearer <token>`); the token is read from it at load time.
    token_env: str | None = None
    _token: str | None = PrivateAttr(default=None)

    @field_validator("token_env")
    @classmethod
    def _variable_set(cls, variable: str | None, info: ValidationInfo) -> str | None:
        if variable is not None and not environ_of(info).get(variable, "").strip():
            raise ValueError(f"environment variable {variable} is not set")
        return variable

    @model_validator(mode="after")
    def _token_from_env(self, info: ValidationInfo) -> LabelFeed:
        if self.token_env is not None:
            self._token = environ_of(info)[self.token_env].strip()
        return self

    @property
    def token(self) -> str | None:
        """The bearer token label senders present (None: `token_env` is unset)."""
        return self._token


class Anchors(Section):
    # Score the anchor set with each judge evaluator every `every`, within `budget`, and
    # page "the judge changed" when its verdicts on them moved (docs/audit.md).
    enabled: bool = False
    # A JSON list of records, each with `label` "pass" or "fail"; none: the shipped set.
    file: ReadableFile | None = None
    every: Duration = "6h"
    # The false-page rate per check of an unchanged judge.
    alpha: float = Field(default=0.001, gt=0, lt=0.5)


class Audit(Section):
    # The detector whose defect rate is corrected (an evaluator of `evaluators`); audits
    # are off while it is unset.
    evaluator: str | None = None
    # An evaluator of `evaluators` (usually an LLM judge) that scores the audited share,
    # or `labels`: verdicts fed back through `labels.file` or `labels.http`.
    reference: str | None = None
    # The share of the detector's evaluated records that the reference also scores,
    # chosen by the sampling hash (a random sample with respect to content).
    share: float = Field(default=0.05, gt=0, le=1)
    # The trailing window each estimate covers (kept in 24 buckets).
    window: Duration = "24h"
    # Effective audited traces in the window ((Σ records)² / Σ records² over the audited
    # traces: the audited records where each is its own trace) below which no interval is
    # given.
    min_audited: int = Field(default=30, ge=2)
    # Audited records waiting for their label, in all; past it the service awaiting the
    # most drops its oldest (counted).
    max_pending: int = Field(default=100_000, gt=0)
    labels: LabelFeed = LabelFeed()
    anchors: Anchors = Anchors()

    @property
    def enabled(self) -> bool:
        return self.evaluator is not None and self.reference is not None

    @property
    def window_s(self) -> float:
        return parse_duration(self.window)

    @model_validator(mode="after")
    def _consistent(self) -> Audit:
        problems = []
        if (self.evaluator is None) != (self.reference is None):
            problems.append("evaluator and reference are set together (audits need both)")
        fed = self.labels.file is not None or self.labels.http
        if self.reference == LABELS and not fed:
            problems.append("reference: labels needs labels.file or labels.http")
        if self.reference not in (None, LABELS) and fed:
            problems.append(
                f"labels: the reference is the evaluator {self.reference!r}; "
                "labels are read only with reference: labels"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _against_evaluators(audit: Audit, info: ValidationInfo) -> Audit:
    """The evaluators the audit names are configured, distinct, and the reference's
    sampling is the audit's (`share` of the detector's)."""
    if "evaluators" not in info.data:
        return audit  # the evaluators' own problems are reported instead
    entries: list[Any] = info.data["evaluators"]
    by_name = {entry.name: entry for entry in entries}
    problems = []
    for key in ("evaluator", "reference"):
        name = getattr(audit, key)
        if name is not None and name != LABELS and name not in by_name:
            configured = ", ".join(by_name) or "none"
            problems.append(f"{key}: {name!r} is not configured (evaluators: {configured})")
    if audit.evaluator is not None and audit.evaluator == audit.reference:
        problems.append("reference: the detector cannot be its own reference")
    reference = by_name.get(audit.reference or "")
    if reference is not None and reference.sample_rate is not None:
        problems.append(
            f"reference: {audit.reference} has its own sample_rate; an audit's reference "
            "samples audit.share of what audit.evaluator samples (remove its sample_rate)"
        )
    if reference is not None and reference.escalate_from is not None:
        problems.append(
            f"reference: {audit.reference} escalates from {reference.escalate_from}, so it "
            "scores a chosen subset, not a random share; use an evaluator without escalate_from"
        )
    if problems:
        raise ValueError("\n".join(problems))
    return audit


AuditSection = Annotated[Audit, AfterValidator(_against_evaluators)]
