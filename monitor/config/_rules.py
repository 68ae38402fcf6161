"""The alert rules' configuration: one class per kind of rule (regression, cohort,
absolute, SLO), each with its own keys and their defaults. Which kind a rule is follows
from the one key that makes it (`baseline`, `cohorts`, `max_defect_rate` or `slo`); a key
of another kind is refused naming the kind it belongs to. The sections rules write are in
`_rule_sections.py`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, Discriminator, Field, Tag, TypeAdapter, model_validator

from monitor.config._fields import Duration, Rate, Refused, Section, parse_duration
from monitor.config._rule_sections import (
    SLO_WINDOW,
    AlertBaseline,
    AlertBoost,
    AlertCohorts,
    AlertSlo,
    Category,
    FalsePageEvery,
    LabelName,
)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


class RuleBase(Section):
    """What a rule of every kind has. A kind's class adds the key that makes a rule of that
    kind (`kind_key`) and its own keys with their defaults; it answers None for the keys of the
    other kinds (class attributes), so code that reads any rule reads every key by name."""

    # The kind's word (the tag of `AlertRule`), its name in messages (`noun` rules, and
    # `called` for one rule), the key that makes a rule of it.
    kind: ClassVar[str]
    noun: ClassVar[str]
    called: ClassVar[str]
    kind_key: ClassVar[str]
    # Why this kind refuses a key of another kind, where there is more to say than
    # `REFUSALS` does.
    refusals: ClassVar[Mapping[str, str]] = {}

    name: LabelName
    evaluator: str | None = None
    category: Category | None = None
    # What a verdict adds: 1 for a fail (`verdicts`), or 1 - its normalised score (`scores`);
    # `no_context`: what a record adds, 1 when the evaluator skipped it for lack of context
    # (the retrieval's documents did not reach the trace), 0 when it scored it.
    measure: Literal["verdicts", "scores", "no_context"] = "verdicts"
    severity: LabelName = "page"

    _removed: ClassVar[Mapping[str, str]] = {
        "confidence": "replaced by false_page_every, how rarely the rule may page on a "
        "service that did not change (for example 90d; alerts.false_page_every sets it for "
        "every rule)"
    }

    @model_validator(mode="before")
    @classmethod
    def _keys_of_other_kinds(cls, data: Any) -> Any:
        """A key of another kind is refused, saying whose it is; one written null says
        nothing and is left out (a file that lists every rule key, null where the kind
        takes none, loads). A rule with no key that makes a kind is refused at this kind's."""
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key in cls.model_fields or key not in RULE_KEYS:
                out[key] = value
            elif value is not None:
                out[key] = Refused(value, cls._refusal(key, data.get("name")))
        if all(data.get(kind.kind_key) is None for kind in RULE_KINDS.values()):
            out[cls.kind_key] = Refused(None, NO_KIND)
        return out

    @classmethod
    def default(cls, key: str) -> Any:
        """What a rule of this kind that does not write `key` gets (`min_increase`, or a key
        of a section such as `baseline.window`), read from the classes: the one place each
        default is written. KeyError for a key the kind does not take or must be given."""
        model: type[BaseModel] = cls
        *sections, leaf = key.split(".")
        for section in sections:
            annotation = model.model_fields[section].annotation
            # The section's model, also where the key is optional (`boost`).
            inner = [a for a in (annotation, *get_args(annotation)) if _is_model(a)]
            if not inner:
                raise KeyError(key)
            model = inner[0]
        field = model.model_fields[leaf]
        if field.is_required():
            raise KeyError(f"{key} has no default: a rule of this kind must give it")
        return field.get_default(call_default_factory=True)

    @classmethod
    def _refusal(cls, key: str, name: Any) -> str:
        owners = [kind for kind in RULE_KINDS.values() if key in kind.model_fields]
        makers = {kind.kind_key: kind for kind in owners}
        if key in makers:
            whose = f"{key} makes {makers[key].called}"
        else:
            nouns = [kind.noun for kind in owners]
            listed = ", ".join(nouns[:-1]) + " and " + nouns[-1] if len(nouns) > 1 else nouns[0]
            whose = f"{key} is a key of {listed} rules"
        why = cls.refusals.get(key) or REFUSALS.get(key) or f"{cls.called} takes no {key}"
        rule = f"rule {name}" if isinstance(name, str) else "this rule"
        return f"{why} ({whose}; {rule} is {cls.called}, by its {cls.kind_key})"

    @property
    def memory_s(self) -> float:
        """How long a page outlives what last entered it, beyond the rule's windows (none:
        what enters it is counted in them)."""
        return 0.0

    @model_validator(mode="after")
    def _one_source(self) -> RuleBase:
        if (self.evaluator is None) == (self.category is None):
            raise ValueError("evaluator: exactly one of evaluator or category is required")
        if self.measure != "verdicts" and self.evaluator is None:
            measured = "scores are" if self.measure == "scores" else f"{self.measure} is"
            raise ValueError(f"measure: {measured} an evaluator's; a category rule counts verdicts")
        return self


class _RiseRule(RuleBase):
    """A rule that pages on a rise: a regression rule (over the service's own history) or
    a cohort rule (over the rest of its service). The defaults come from
    bench/alert_regression.py (see docs/alerts.md)."""

    window: Duration = "30m"
    min_samples: int = Field(default=100, gt=0)
    # The smallest rise worth a page; a rise below half of it is judged as no rise.
    min_increase: float = Field(default=0.03, gt=0, lt=1)
    # This rule's false-page budget (default `alerts.false_page_every`).
    false_page_every: FalsePageEvery | None = None
    boost: AlertBoost | None = None

    @model_validator(mode="after")
    def _boost_on_an_evaluator(self) -> _RiseRule:
        if self.boost is not None and self.evaluator is None:
            raise ValueError(
                "boost: only a regression or cohort rule on an evaluator raises its sampling"
            )
        return self


class RegressionRule(_RiseRule):
    """The defect rate against what the service usually shows (`baseline`)."""

    kind = "regression"
    noun = "regression"
    called = "a regression rule"
    kind_key = "baseline"

    baseline: AlertBaseline
    # The sequential test or the fixed-window z-test (monitor/alerts).
    test: Literal["window", "sequential"] = "sequential"

    cohorts: ClassVar[None] = None
    max_defect_rate: ClassVar[None] = None
    slo: ClassVar[None] = None

    @model_validator(mode="after")
    def _baseline_outlasts_window(self) -> RegressionRule:
        if parse_duration(self.baseline.window) <= parse_duration(self.window):
            raise ValueError(
                f"baseline.window: {self.baseline.window} must be longer than window {self.window}"
            )
        return self


class CohortRule(_RiseRule):
    """Each cohort of a service (`cohorts.by`) against the rest of that service."""

    kind = "cohorts"
    noun = "cohort"
    called = "a cohort rule"
    kind_key = "cohorts"

    cohorts: AlertCohorts

    baseline: ClassVar[None] = None
    test: ClassVar[None] = None
    max_defect_rate: ClassVar[None] = None
    slo: ClassVar[None] = None


class AbsoluteRule(RuleBase):
    """The defect rate against a fixed ceiling (`max_defect_rate`)."""

    kind = "absolute"
    noun = "absolute"
    called = "an absolute rule"
    kind_key = "max_defect_rate"

    max_defect_rate: Rate
    window: Duration = "10m"
    min_samples: int = Field(default=30, gt=0)
    # This rule's false-page budget (default `alerts.false_page_every`).
    false_page_every: FalsePageEvery | None = None

    baseline: ClassVar[None] = None
    cohorts: ClassVar[None] = None
    slo: ClassVar[None] = None
    min_increase: ClassVar[None] = None
    test: ClassVar[None] = None
    boost: ClassVar[None] = None


class SloRule(RuleBase):
    """An objective and its error budget (`slo`), paged on the budget's burn rate."""

    kind = "slo"
    noun = "SLO"
    called = "an SLO rule"
    kind_key = "slo"
    refusals = {
        "min_increase": "an SLO rule pages on its error budget's burn rate, not on a rise",
        "false_page_every": "an SLO rule's burn rates are thresholds, not a test with a "
        "false-page budget; its objective and burn_rates say when it fires",
    }

    slo: AlertSlo
    # The objective's window, what the budget is counted over (written in `slo`).
    window: Duration = SLO_WINDOW
    min_samples: int = Field(default=30, gt=0)

    baseline: ClassVar[None] = None
    cohorts: ClassVar[None] = None
    max_defect_rate: ClassVar[None] = None
    min_increase: ClassVar[None] = None
    test: ClassVar[None] = None
    false_page_every: ClassVar[None] = None
    boost: ClassVar[None] = None

    @model_validator(mode="before")
    @classmethod
    def _window_of_the_objective(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "window" in data:
            return data
        slo = data.get("slo")
        if isinstance(slo, AlertSlo):
            return {**data, "window": slo.window}
        if isinstance(slo, dict):
            return {**data, "window": slo.get("window", SLO_WINDOW)}
        return data

    @model_validator(mode="after")
    def _window_is_the_objectives(self) -> SloRule:
        if parse_duration(self.window) != parse_duration(self.slo.window):
            raise ValueError(
                f"window: an SLO rule's window is its slo.window ({self.slo.window}); leave "
                "window out"
            )
        return self


class JudgeChangedRule(RuleBase):
    """Not written in `alerts.rules`: the anchor check's "the judge changed" page
    (`audit.anchors`), moved by the alert engine's state machine as every rule's page is
    (re-sent, resolved, kept in the state file). One entry per judge evaluator, in the
    place of a service; `every` is the anchor check's interval."""

    kind = "judge_changed"
    noun = "judge-changed"
    called = "the judge-changed rule"
    kind_key = "judge_changed"

    name: LabelName = "RagMonitorJudgeChanged"
    # A judge that moved is looked at within working hours: alerts on its verdicts say so.
    severity: LabelName = "ticket"
    every: Duration = "6h"
    window: Duration = "1m"
    # The evaluators a state file may hold a page of (the config's).
    judges: tuple[str, ...] = ()

    baseline: ClassVar[None] = None
    cohorts: ClassVar[None] = None
    max_defect_rate: ClassVar[None] = None
    slo: ClassVar[None] = None
    min_increase: ClassVar[None] = None
    test: ClassVar[None] = None
    false_page_every: ClassVar[None] = None
    boost: ClassVar[None] = None
    min_samples: int = 1  # one check decides

    @model_validator(mode="before")
    @classmethod
    def _keys_of_other_kinds(cls, data: Any) -> Any:
        return data  # made by the engine, never read from a file

    @model_validator(mode="after")
    def _one_source(self) -> JudgeChangedRule:
        return self  # no verdict is counted: the anchor check reports its checks

    @property
    def memory_s(self) -> float:
        """How long a page outlives the last check that compared its judge: a check that
        stopped (the judge left the config, the budget) resolves it after three intervals,
        and no sooner than an hour (a check of many anchors outlasts a short interval)."""
        return max(3 * parse_duration(self.every), 3600.0)


# Each kind by its word, in the order a rule is read: a rule with the keys of two kinds is
# of the first, and the other's key is refused.
RULE_KINDS: Mapping[str, type[RuleBase]] = {
    kind.kind: kind for kind in (RegressionRule, CohortRule, AbsoluteRule, SloRule)
}
# Every key some kind takes: any other is unknown to every kind.
RULE_KEYS = frozenset(key for kind in RULE_KINDS.values() for key in kind.model_fields)
ONE_KIND = "exactly one of max_defect_rate, baseline or cohorts, or an slo"
NO_KIND = f"{ONE_KIND}: the key that says the rule's kind (absolute, regression, cohort or SLO)"
# Why a kind refuses another kind's key, when that kind says nothing of its own.
REFUSALS: Mapping[str, str] = {
    **{kind.kind_key: ONE_KIND for kind in RULE_KINDS.values()},
    "min_increase": "only a rule with a baseline or cohorts takes min_increase",
    "test": "only a rule with a baseline takes a test",
    "boost": "only a regression or cohort rule on an evaluator raises its sampling",
}


def _kind_of(data: Any) -> str:
    """The tag of a rule's kind: that of the first key that makes one. A rule with none is
    read as an absolute rule, whose `max_defect_rate` it is then refused at (and anything
    but a mapping is refused as one)."""
    if isinstance(data, RuleBase):
        return data.kind
    if isinstance(data, dict):
        for kind in RULE_KINDS.values():
            if data.get(kind.kind_key) is not None:
                return kind.kind
    return AbsoluteRule.kind


# A rule of any kind: what `alerts.rules` holds and what the engine reads.
AlertRule = Annotated[
    Annotated[RegressionRule, Tag(RegressionRule.kind)]
    | Annotated[CohortRule, Tag(CohortRule.kind)]
    | Annotated[AbsoluteRule, Tag(AbsoluteRule.kind)]
    | Annotated[SloRule, Tag(SloRule.kind)],
    Discriminator(_kind_of),
]
_ALERT_RULE: TypeAdapter[AlertRule] = TypeAdapter(AlertRule)


def alert_rule(data: Any) -> AlertRule:
    """A rule of the kind its keys say, from a mapping as a config file writes it."""
    return _ALERT_RULE.validate_python(data)
