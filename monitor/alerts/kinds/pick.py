"""Which kind judges a rule: the one place that reads which of the four a rule is."""

from __future__ import annotations

from typing import Protocol

from monitor.alerts.kinds import RuleKind
from monitor.alerts.kinds.absolute import Absolute
from monitor.alerts.kinds.cohorts import Cohorts
from monitor.alerts.kinds.judge_changed import JudgeChanged
from monitor.alerts.kinds.regression import Regression
from monitor.alerts.kinds.slo import Slo
from monitor.alerts.rule import Rule, terms_of
from monitor.config import AlertRule, JudgeChangedRule
from monitor.evidence import Terms


class KindClass(Protocol):
    """A kind's class: builds the kind of a rule, and says in one line what a rule of that
    kind watches (`check-config`'s summary)."""

    def __call__(self, rule: Rule, interval_s: float) -> RuleKind: ...

    @staticmethod
    def summary(config: AlertRule, terms: Terms, budget: str) -> str: ...


# The rule key that makes a rule of each kind (`kind_key` of its config class).
KINDS: dict[str, KindClass] = {
    "baseline": Regression,
    "cohorts": Cohorts,
    "max_defect_rate": Absolute,
    "slo": Slo,
}
# Kinds of the rules the engine makes itself (`rule.rules_of`), no user's.
MADE: dict[str, KindClass] = {"judge_changed": JudgeChanged}


def kind_class(config: AlertRule | JudgeChangedRule) -> KindClass:
    """The class of the kind of a rule, by its config class's key (`KINDS`, `MADE`)."""
    return {**KINDS, **MADE}[config.kind_key]


def kind_for(rule: Rule, interval_s: float) -> RuleKind:
    """The kind that judges `rule`."""
    return kind_class(rule.config)(rule, interval_s)


def summary(config: AlertRule, default_budget: str) -> str:
    """`alert NAME: what it pages on (...)`, as `check-config` prints it."""
    budget = f"one false page per {config.false_page_every or default_budget}"
    terms = terms_of(config, config.false_page_every or default_budget)
    return f"alert {config.name}: {kind_class(config).summary(config, terms, budget)}"
