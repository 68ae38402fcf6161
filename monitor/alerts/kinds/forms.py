"""Which kind judges a rule: the one place that reads a rule's form."""

from __future__ import annotations

from typing import Protocol

from monitor.alerts.kinds import Kind
from monitor.alerts.kinds.absolute import Absolute
from monitor.alerts.kinds.cohorts import Cohorts
from monitor.alerts.kinds.regression import Regression
from monitor.alerts.kinds.slo import Slo
from monitor.alerts.rule import Rule
from monitor.config import AlertRule


class Form(Protocol):
    """A kind's class: builds the kind of a rule, and says in one line what a rule of that
    form watches (`check-config`'s summary)."""

    def __call__(self, rule: Rule, interval_s: float) -> Kind: ...

    @staticmethod
    def summary(config: AlertRule, budget: str) -> str: ...


FORMS: dict[str, Form] = {
    "baseline": Regression,
    "cohorts": Cohorts,
    "max_defect_rate": Absolute,
    "slo": Slo,
}


def form_of(config: AlertRule) -> Form:
    """The class of the kind of a rule, by its form (`max_defect_rate`, `baseline`,
    `cohorts` or `slo`)."""
    for form, cls in FORMS.items():
        if getattr(config, form) is not None:
            return cls
    raise ValueError(f"rule {config.name} has no form")


def kind_for(rule: Rule, interval_s: float) -> Kind:
    """The kind that judges `rule`."""
    return form_of(rule.config)(rule, interval_s)


def summary(config: AlertRule, default_budget: str) -> str:
    """`alert NAME: what it pages on (...)`, as `check-config` prints it."""
    budget = f"one false page per {config.false_page_every or default_budget}"
    return f"alert {config.name}: {form_of(config).summary(config, budget)}"
