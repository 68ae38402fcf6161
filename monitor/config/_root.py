"""`Config`: the whole configuration, one section per part of the pipeline, and the checks
that span sections."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from monitor.config._audit import Audit, AuditSection
from monitor.config._evaluators import DEFAULT_LOCAL_EVALUATORS, EvaluatorConfig, Judge, Redaction
from monitor.config._external import ExternalVerdicts, is_external
from monitor.config._extraction import Extraction
from monitor.config._fields import Section
from monitor.config._outputs import DEFAULT_RULES, Alerts, Exporters
from monitor.config._processing import Budget, Pipeline, RecordLimits, Sampling, TraceAssembly
from monitor.config._receivers import Receivers


class Config(Section):
    receivers: Receivers = Receivers()
    trace_assembly: TraceAssembly = TraceAssembly()
    record_limits: RecordLimits = RecordLimits()
    extraction: Extraction = Extraction()
    sampling: Sampling = Sampling()
    budget: Budget = Budget()
    judge: Judge = Judge()
    redaction: Redaction = Redaction()
    evaluators: list[EvaluatorConfig] = [EvaluatorConfig(name=n) for n in DEFAULT_LOCAL_EVALUATORS]
    external_verdicts: ExternalVerdicts = ExternalVerdicts()
    audit: AuditSection = Audit()  # after `evaluators`, which it names
    alerts: Alerts = Alerts()
    exporters: Exporters = Exporters()
    # A factory: the default number of worker processes probes the CPUs, not at import.
    pipeline: Pipeline = Field(default_factory=Pipeline)

    @model_validator(mode="before")
    @classmethod
    def _default_rules(cls, data: Any) -> Any:
        """A written config without `alerts.rules` gets `DEFAULT_RULES` whose evaluators it
        runs."""
        if not isinstance(data, dict):
            return data
        alerts = data.get("alerts", {})
        if not isinstance(alerts, dict) or "rules" in alerts:
            return data
        evaluators = data.get("evaluators", list(DEFAULT_LOCAL_EVALUATORS))
        if not isinstance(evaluators, list):
            return data  # the evaluators' own check names the problem
        named = (
            e.get("name") if isinstance(e, dict) else getattr(e, "name", e) for e in evaluators
        )
        # Only names are kept: an entry of another shape is the evaluators' own check's to name.
        names = {name for name in named if isinstance(name, str)}
        rules = [rule for rule in DEFAULT_RULES if rule["evaluator"] in names]
        return {**data, "alerts": {**alerts, "rules": rules}} if rules else data

    @field_validator("evaluators")
    @classmethod
    def _evaluators_checked(
        cls, entries: list[EvaluatorConfig], info: ValidationInfo
    ) -> list[EvaluatorConfig]:
        """At least one evaluator; and the evaluators' own checks, when the loader was
        given them (`load_config(evaluator_check=...)`), in the same pass as the rest."""
        if not entries:
            raise ValueError(
                "no evaluators: the monitor would score nothing; leave the key out for the "
                "four local evaluators, or list the ones you want"
            )
        check = (info.context or {}).get("evaluator_check")
        if check is None:
            return entries
        judge = info.data.get("judge")
        problems = check(entries, judge.model if isinstance(judge, Judge) else None)
        if problems:
            raise ValueError("\n".join(problems))
        return entries

    @model_validator(mode="after")
    def _cross_checks(self) -> Config:
        rules = [(r.evaluator, r.boost.sample_rate if r.boost else None) for r in self.alerts.rules]
        problems = reference_problems(
            [e.name for e in self.evaluators],
            [e.escalate_from for e in self.evaluators],
            [e.sample_rate for e in self.evaluators],
            rules,
            self.sampling.rate,
        )
        external = self.external_verdicts
        for i, rule in enumerate(self.alerts.rules):
            if rule.evaluator is None or not is_external(rule.evaluator):
                continue
            if not external.enabled:
                problems.append(
                    f"alerts.rules.{i}.evaluator: {rule.evaluator!r} is an app's own judge and "
                    "external_verdicts.enabled is false: it would never have a verdict"
                )
            elif external.evaluators and rule.evaluator not in external.evaluators:
                problems.append(
                    f"alerts.rules.{i}.evaluator: {rule.evaluator!r} is not among "
                    "external_verdicts.evaluators, the only ones taken"
                )
        if problems:
            raise ValueError("\n".join(problems))
        return self


def reference_problems(
    names: list[str],
    escalations: list[str | None],
    sample_rates: list[float | None],
    rules: list[tuple[str | None, float | None]],
    base_rate: float,
) -> list[str]:
    """What the sections say of each other, every problem at once: an evaluator listed
    twice, a rule or an escalation naming an evaluator that is not configured (with the
    nearest configured name; an app's own judge, `external:` or `guardrail:`, is not
    configured there), a boost that would not raise its evaluator's rate above the
    base rate (`sampling.rate` × its `sample_rate`). `rules`: each rule's evaluator and
    boost rate. The loader also calls it on a file that failed validation elsewhere, with
    what could be read."""
    problems = []
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        problems.append(f"evaluators: listed twice: {', '.join(duplicates)}")
    rate_of = dict(zip(names, sample_rates, strict=True))
    for i, (evaluator, boost) in enumerate(rules):
        if evaluator is not None and is_external(evaluator):
            # An app's own judge (`external_verdicts`): its verdicts come with the traces.
            if boost is not None:
                problems.append(
                    f"alerts.rules.{i}.boost: {evaluator} is an app's own judge, whose "
                    "sampling the monitor does not decide"
                )
        elif evaluator is not None and evaluator not in names:
            hint = _nearest(evaluator, names)
            problems.append(f"alerts.rules.{i}.evaluator: {evaluator!r} is not configured{hint}")
        elif evaluator is not None and boost is not None:
            sample_rate = rate_of.get(evaluator)
            base = base_rate * (1.0 if sample_rate is None else sample_rate)
            if boost <= base:
                problems.append(
                    f"alerts.rules.{i}.boost.sample_rate: {boost:g} does not raise {evaluator}'s "
                    f"rate of {base:g} (sampling.rate × its sample_rate); a boost must exceed it"
                )
    for i, source in enumerate(escalations):
        if source is not None and source == names[i]:
            problems.append(f"evaluators.{i}.escalate_from: {source} cannot escalate from itself")
        elif source is not None and source not in names:
            hint = _nearest(source, names)
            problems.append(f"evaluators.{i}.escalate_from: {source!r} is not configured{hint}")
    return problems


def _nearest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    configured = f"; configured: {', '.join(names)}"
    return f" (did you mean {close[0]!r}?{configured})" if close else f" ({configured[2:]})"
