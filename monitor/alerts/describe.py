"""What an alert says: its summary, description and figures, one function per rule kind.

The description is also the log line of a first page and a resolve, so it reads the same in
Alertmanager, a webhook and the monitor's log:

- absolute: `25/40 defects, Wilson interval [0.402, 0.812] vs max_defect_rate 0.1;
  min_samples 30; one false page per 90d`
- regression: `defect rate 0.42 over the last 310 verdicts against 0.29 over the previous
  24h (310 / 86,400 verdicts), +0.13, p < 1e-05 (sequential test, one false page per 90d)`
  (the window test names its window: `over 30m`)
- cohort: `defect rate 0.46 for version v2 against 0.21 for the rest of shop over 30m
  (412 / 1,650 verdicts), +0.25, p < 1e-05`
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from monitor.alerts.rule import Rule, RuleState
from monitor.component import GENERATOR, Alert
from monitor.config import AlertRule


def alert(
    rule: Rule,
    service: str,
    cohort: str,
    state: RuleState,
    status: Literal["firing", "resolved"],
    ends_at: datetime,
    generator_url: str,
) -> Alert:
    """The alert one (rule, service, cohort) sends: labels, annotations, times."""
    cfg = rule.config
    what = f"evaluator {cfg.evaluator}" if cfg.evaluator else f"safety category {cfg.category}"
    labels = {
        "alertname": cfg.name,
        "service": service,
        "severity": cfg.severity,
        "generator": GENERATOR,
    }
    if cfg.evaluator:
        labels["evaluator"] = cfg.evaluator
    else:
        labels["category"] = str(cfg.category)
    if cfg.cohorts is not None:
        labels["cohort"] = cohort
        notes = _cohort(rule, state, what, service, cohort)
    elif cfg.baseline is not None:
        notes = _regression(rule, state, what, service)
    else:
        notes = _absolute(rule, state, what, service)
    return Alert(
        rule=cfg.name,
        service=service,
        status=status,
        labels=labels,
        annotations=notes,
        starts_at=datetime.fromtimestamp(state.started_at, tz=UTC),
        ends_at=ends_at,
        generator_url=generator_url,
    )


def _absolute(rule: Rule, state: RuleState, what: str, service: str) -> dict[str, str]:
    cfg = rule.config
    current = state.current
    lower, upper = state.bounds
    return {
        "summary": (
            f"{what} defect rate on {service} is {current.mean:.1%} "
            f"({current.defects:g}/{current.samples} in {cfg.window})"
        ),
        "description": absolute_story(rule, state),
        "defect_rate": f"{current.mean:.4f}",
        "lower_bound": f"{lower:.4f}",
        "upper_bound": f"{upper:.4f}",
        "samples": str(current.samples),
    }


def absolute_story(rule: Rule, state: RuleState) -> str:
    cfg = rule.config
    lower, upper = state.bounds
    return (
        f"{state.current.defects:g}/{state.current.samples} defects, Wilson interval "
        f"[{lower:.3f}, {upper:.3f}] vs max_defect_rate {cfg.max_defect_rate}; min_samples "
        f"{cfg.min_samples}; one false page per {rule.budget}"
    )


def _regression(rule: Rule, state: RuleState, what: str, service: str) -> dict[str, str]:
    current, base = state.current, state.reference
    return {
        "summary": (
            f"{what} {measured(rule.config)} on {service} rose from {base.mean:.2f} "
            f"to {current.mean:.2f}"
        ),
        "description": regression_story(rule, state),
        "defect_rate": f"{current.mean:.4f}",
        "baseline_defect_rate": f"{base.mean:.4f}",
        "increase": f"{current.mean - base.mean:.4f}",
        "p_value": f"{state.p_value:.3g}",
        "samples": str(current.samples),
        "baseline_samples": str(base.samples),
        "false_page_every": _budget(rule),
    }


def regression_story(rule: Rule, state: RuleState) -> str:
    """ "defect rate 0.49 over 30m against 0.40 over the previous 24h (600 / 86,400
    verdicts), +0.09, p < 0.001 (window test, ...)"; a sequential rule names the verdicts of
    its evidence."""
    cfg = rule.config
    assert cfg.baseline is not None
    current, base = state.current, state.reference
    span = (
        f"over the last {current.samples:,} verdicts" if rule.sequential else f"over {cfg.window}"
    )
    test = "sequential test" if rule.sequential else "window test"
    return (
        f"{measured(cfg)} {current.mean:.2f} {span} against {base.mean:.2f} over the previous "
        f"{cfg.baseline.window} ({current.samples:,} / {base.samples:,} verdicts), "
        f"{current.mean - base.mean:+.2f}, {p_text(state.p_value)} "
        f"({test}, one false page per {_budget(rule)})"
    )


def _cohort(rule: Rule, state: RuleState, what: str, service: str, name: str) -> dict[str, str]:
    cfg = rule.config
    current, rest = state.current, state.reference
    return {
        "summary": (
            f"{what} {measured(cfg)} of {by(cfg)} {name} on {service} is "
            f"{current.mean:.2f} against {rest.mean:.2f} for the rest"
        ),
        "description": cohort_story(rule, state, service, name),
        "defect_rate": f"{current.mean:.4f}",
        "rest_defect_rate": f"{rest.mean:.4f}",
        "increase": f"{current.mean - rest.mean:.4f}",
        "p_value": f"{state.p_value:.3g}",
        "samples": str(current.samples),
        "rest_samples": str(rest.samples),
        "false_page_every": _budget(rule),
    }


def cohort_story(rule: Rule, state: RuleState, service: str, name: str) -> str:
    """ "defect rate 0.46 for version v2 against 0.21 for the rest of shop over 30m
    (412 / 1,650 verdicts), +0.25, p < 1e-05"."""
    cfg = rule.config
    current, rest = state.current, state.reference
    return (
        f"{measured(cfg)} {current.mean:.2f} for {by(cfg)} {name} against "
        f"{rest.mean:.2f} for the rest of {service} over {cfg.window} "
        f"({current.samples:,} / {rest.samples:,} verdicts), "
        f"{current.mean - rest.mean:+.2f}, {p_text(state.p_value)}"
    )


def p_text(p: float) -> str:
    return f"p = {p:.3f}" if p >= 0.001 else f"p < {_ceil_power(p)}"


def _ceil_power(p: float) -> str:
    exponent = -3
    while p < 10.0 ** (exponent - 1) and exponent > -12:
        exponent -= 1
    return f"{10.0**exponent:g}"


def measured(cfg: AlertRule) -> str:
    return "mean defect score" if cfg.measure == "scores" else "defect rate"


def by(cfg: AlertRule) -> str:
    assert cfg.cohorts is not None
    return cfg.cohorts.by


def _budget(rule: Rule) -> str:
    return rule.budget
