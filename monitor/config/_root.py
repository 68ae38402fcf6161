"""`Config`: the whole configuration, one section per part of the pipeline, and the checks
that span sections."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from monitor.config._evaluators import DEFAULT_LOCAL_EVALUATORS, EvaluatorConfig, Judge, Redaction
from monitor.config._extraction import Extraction
from monitor.config._fields import Section
from monitor.config._outputs import Alerts, Exporters
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
    alerts: Alerts = Alerts()
    exporters: Exporters = Exporters()
    # A factory: the default number of worker processes probes the CPUs, not at import.
    pipeline: Pipeline = Field(default_factory=Pipeline)

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

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        """`receivers.otlp.queue_size` sets `trace_assembly.queue_size` unless that is set."""
        if not isinstance(data, dict):
            return data
        receivers = data.get("receivers")
        otlp = receivers.get("otlp") if isinstance(receivers, dict) else None
        legacy = otlp.get("queue_size") if isinstance(otlp, dict) else None
        assembly = data.get("trace_assembly")
        if legacy is not None and (assembly is None or isinstance(assembly, dict)):
            merged = dict(assembly or {})
            merged.setdefault("queue_size", legacy)
            data = {**data, "trace_assembly": merged}
        return data

    @model_validator(mode="after")
    def _cross_checks(self) -> Config:
        names = [e.name for e in self.evaluators]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"evaluators: listed twice: {', '.join(duplicates)}")
        for i, rule in enumerate(self.alerts.rules):
            if rule.evaluator is not None and rule.evaluator not in names:
                raise ValueError(
                    f"alerts.rules.{i}.evaluator: {rule.evaluator!r} is not configured"
                )
        for i, spec in enumerate(self.evaluators):
            if spec.escalate_from is not None and spec.escalate_from not in names:
                raise ValueError(
                    f"evaluators.{i}.escalate_from: {spec.escalate_from!r} is not configured"
                )
        return self
