"""The alert rules' configuration: one class per kind of rule (regression, cohort,
absolute, SLO), each with its own keys and their defaults, and the sections they take
(baseline, cohorts, slo, boost). Which kind a rule is follows from the one key that makes
it (`baseline`, `cohorts`, `max_defect_rate` or `slo`); a key of another kind is refused
naming the kind it belongs to."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    model_validator,
)

from monitor.config._fields import (
    Duration,
    Rate,
    Refused,
    Section,
    duration_between,
    parse_duration,
)


class AlertReference(Section):
    """A reference the user names instead of the trailing level: `pinned`, an ISO 8601
    interval (`2026-11-01T00:00Z/2026-11-08T00:00Z`) whose level (with the season on top)
    is the expectation, kept once learned."""

    pinned: str

    @model_validator(mode="after")
    def _interval(self) -> AlertReference:
        pinned_period(self.pinned)
        return self


def pinned_period(text: str) -> tuple[float, float]:
    """(start, end) seconds of an ISO 8601 interval `START/END`; ValueError naming what is
    wrong. A time without a zone is UTC."""
    start_text, sep, end_text = text.partition("/")
    if not sep:
        raise ValueError(f"pinned: {text!r} is not START/END (ISO 8601 times)")
    times = []
    for part in (start_text, end_text):
        try:
            stamp = datetime.fromisoformat(part.strip())
        except ValueError:
            raise ValueError(f"pinned: {part!r} is not an ISO 8601 time") from None
        times.append((stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp())
    if times[1] - times[0] < 3600:
        raise ValueError(f"pinned: {text!r} must span at least an hour, start before end")
    return times[0], times[1]


class AlertBaseline(Section):
    """A regression rule's reference: what the service usually shows, learned from its
    history (monitor/alerts/history.py): its level over the trailing `window`, and with
    `season` the usual offset of this hour of the day (`day`) and day of the week (`week`)."""

    window: Duration = "24h"
    min_samples: int = Field(default=500, gt=0)
    # Default: `week` for a baseline of an hour or more, `none` for a shorter one.
    season: Literal["none", "day", "week"] = "week"
    # A rise that lasts this long becomes the service's new normal: its alert resolves,
    # saying so, and what it held out of the baseline joins it.
    accept_after: Duration = "7d"
    # What the current window is compared with: the trailing level (and season), the same
    # hours one week before, or a pinned period.
    reference: Annotated[
        Annotated[Literal["trailing", "last_week"], Tag("named")]
        | Annotated[AlertReference, Tag("pinned")],
        # A mapping is a pinned reference, anything else a name: only that form's problems
        # are reported, not why the value is not the other.
        Discriminator(lambda v: "pinned" if isinstance(v, dict | AlertReference) else "named"),
    ] = "trailing"

    @model_validator(mode="before")
    @classmethod
    def _default_season(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("season") is None:
            try:
                short = parse_duration(str(data.get("window", "24h"))) < 3600
            except ValueError:
                return data  # the window's own check names it
            return {**data, "season": "none" if short else "week"}
        return data

    @model_validator(mode="after")
    def _season_fits(self) -> AlertBaseline:
        window = parse_duration(self.window)
        if self.season != "none" and window < 3600:
            raise ValueError(
                f"season: a {self.season} season is learned hour by hour, so baseline.window "
                f"must be at least 1h (it is {self.window}); set season: none for a shorter "
                "baseline"
            )
        if self.reference == "last_week" and self.season == "none":
            raise ValueError(
                "reference: last_week compares hour with hour, a week back: it needs a "
                "seasonal history (season: day or week)"
            )
        if parse_duration(self.accept_after) < window:
            raise ValueError(
                f"accept_after: {self.accept_after} is shorter than baseline.window "
                f"({self.window}); a rise must last at least a baseline window to become "
                "the new normal"
            )
        return self


class AlertCohorts(Section):
    """A cohort rule's split of each service: by the records' `version` (resource
    `service.version`), request `model` or `route`."""

    by: Literal["version", "model", "route"]


# Alert and rule names are label values (`alertname`, `rule`): plain and short.
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


def _label_name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError(
            "must be 1 to 128 letters, digits, '_', '.', ':' or '-' (it is a label value)"
        )
    return value


LabelName = Annotated[str, AfterValidator(_label_name)]


class AlertBurnRate(Section):
    """One row of an SLO rule's multiwindow, multi-burn-rate table: the rule fires at
    `severity` while the error budget burns at least this fast over both `long` and `short`.
    The speed is `burn_rate` (a multiple of the rate that spends exactly the budget over the
    SLO's window), or `budget`: the share of the whole window's budget spent in `long` (the
    SRE workbook's form: `budget: 0.02` over `long: 1h` of a 28d window is a burn rate of
    0.02 x 672 = 13.44)."""

    budget: float | None = Field(default=None, gt=0, le=1)
    burn_rate: float | None = Field(default=None, gt=0)
    long: Annotated[Duration, duration_between("1m", "3650d", "a burn rate's window")]
    short: Annotated[Duration, duration_between("1m", "3650d", "a burn rate's window")]
    # The alert's `severity` label while this row holds: written like a rule's.
    severity: LabelName = "page"

    @model_validator(mode="after")
    def _one_speed(self) -> AlertBurnRate:
        if (self.budget is None) == (self.burn_rate is None):
            raise ValueError("budget: exactly one of budget or burn_rate")
        if parse_duration(self.short) >= parse_duration(self.long):
            raise ValueError(f"short: {self.short} must be shorter than long ({self.long})")
        return self

    def factor(self, window_s: float) -> float:
        """The burn rate this row fires at, for an SLO over `window_s` seconds."""
        if self.burn_rate is not None:
            return self.burn_rate
        assert self.budget is not None
        return self.budget * window_s / parse_duration(self.long)


# The SRE workbook's recommended table (chapter "Alerting on SLOs"): 2 % of the budget in
# 1h (confirmed over 5m) and 5 % in 6h (30m) page, 10 % in 3d (6h) is a ticket.
SLO_BURN_RATES = (
    AlertBurnRate(budget=0.02, long="1h", short="5m", severity="page"),
    AlertBurnRate(budget=0.05, long="6h", short="30m", severity="page"),
    AlertBurnRate(budget=0.10, long="3d", short="6h", severity="ticket"),
)
SLO_WINDOW = "28d"
# The most burn-rate rows an SLO rule takes: each is judged at every evaluation, on the
# event loop (the SRE workbook's tables have three or four).
MAX_BURN_RATES = 10
# The slowest burn rate a row may fire at: below it a row pages a service that spends a
# hundredth of its budget, on the noise of any healthy stream (check-config warns below 1,
# a service that meets its objective).
MIN_BURN_RATE = 0.01


class AlertSlo(Section):
    """A service-level objective on an evaluator or category: `objective` of the verdicts
    pass over `window` (0.77: at most 23 % defects, the error budget). The rule pages on the
    budget's burn rate (`burn_rates`, rows listed most urgent first) and shows what is left
    of the budget (monitor/alerts/kinds/slo.py)."""

    objective: float = Field(gt=0, lt=1)
    window: Annotated[Duration, duration_between("1h", "3650d", "the SLO's window")] = SLO_WINDOW
    burn_rates: list[AlertBurnRate] = Field(default=list(SLO_BURN_RATES), max_length=MAX_BURN_RATES)

    @model_validator(mode="after")
    def _rows_fit(self) -> AlertSlo:
        window = parse_duration(self.window)
        if not self.burn_rates:
            raise ValueError("burn_rates: at least one row")
        for k, row in enumerate(self.burn_rates):
            if parse_duration(row.long) > window:
                raise ValueError(
                    f"burn_rates.{k}.long: {row.long} is longer than the SLO's window {self.window}"
                )
            if row.factor(window) < MIN_BURN_RATE:
                speed = "burn_rate" if row.burn_rate is not None else "budget"
                raise ValueError(
                    f"burn_rates.{k}.{speed}: fires at burn rate {row.factor(window):.3g}, below "
                    f"{MIN_BURN_RATE:g}: it would page a service that spends its error budget a "
                    "hundred times slower than it lasts"
                )
        budget = 1 - self.objective
        if all(row.factor(window) * budget >= 1 for row in self.burn_rates):
            raise ValueError(
                f"burn_rates: no row can ever fire at objective {self.objective:g}: each "
                f"needs a defect rate above 1 (burn rate x error budget {budget:g}); give "
                "rows a burn_rate below 1 / (1 - objective)"
            )
        return self


# How rarely a rule may page on a service that did not change, unless a rule says otherwise.
FALSE_PAGE_EVERY = "90d"
# A budget shorter than an hour is no budget: the sequential test stakes up to a minute of
# time per batch of verdicts and a window test may be wrong at each look with probability
# evaluation_interval_s / false_page_every (at most 5m / 1h); past ten years a rule would
# never page.
FalsePageEvery = Annotated[
    Duration, duration_between("1h", "3650d", "a rule's false-page budget in time")
]


class AlertBoost(Section):
    """Evidence-driven sampling: while a rule's evidence for a service builds (its p-value
    below `while_p_below`, or the alert firing), the rule's evaluator samples that service
    at `sample_rate` instead of its own rate (budgets still cap it)."""

    sample_rate: Rate
    while_p_below: float = Field(default=0.05, gt=0, lt=1)


# What a category rule counts: a safety category the safety evaluators grade.
Category = Literal["hate_unfairness", "sexual", "violence", "self_harm", "jailbreak"]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


# -- the rule kinds --------------------------------------------------------------------


class RuleBase(Section):
    """What a rule of every kind has. A kind's class adds the key that makes a rule of that
    kind (`form`) and its own keys with their defaults; it answers None for the keys of the
    other kinds (class attributes), so code that reads any rule reads every key by name."""

    # The kind's word (the tag of `AlertRule`), its name in messages (`noun` rules, and
    # `called` for one rule), the key that makes a rule of it.
    kind: ClassVar[str]
    noun: ClassVar[str]
    called: ClassVar[str]
    form: ClassVar[str]
    # Why this kind refuses a key of another kind, where there is more to say than
    # `REFUSALS` does.
    refusals: ClassVar[Mapping[str, str]] = {}

    name: LabelName
    evaluator: str | None = None
    category: Category | None = None
    # What a verdict adds: 1 for a fail (`verdicts`), or 1 - its normalised score (`scores`).
    measure: Literal["verdicts", "scores"] = "verdicts"
    severity: LabelName = "warning"

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
        if all(data.get(kind.form) is None for kind in RULE_KINDS.values()):
            out[cls.form] = Refused(None, NO_KIND)
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
        forms = {kind.form: kind for kind in owners}
        if key in forms:
            whose = f"{key} makes {forms[key].called}"
        else:
            nouns = [kind.noun for kind in owners]
            listed = ", ".join(nouns[:-1]) + " and " + nouns[-1] if len(nouns) > 1 else nouns[0]
            whose = f"{key} is a key of {listed} rules"
        why = cls.refusals.get(key) or REFUSALS.get(key) or f"{cls.called} takes no {key}"
        rule = f"rule {name}" if isinstance(name, str) else "this rule"
        return f"{why} ({whose}; {rule} is {cls.called}, by its {cls.form})"

    @model_validator(mode="after")
    def _one_source(self) -> RuleBase:
        if (self.evaluator is None) == (self.category is None):
            raise ValueError("evaluator: exactly one of evaluator or category is required")
        if self.measure == "scores" and self.evaluator is None:
            raise ValueError("measure: scores are an evaluator's; a category rule counts verdicts")
        return self


class _RiseRule(RuleBase):
    """A rule that pages on a rise: a regression rule (over the service's own history) or
    a cohort rule (over the rest of its service). The defaults come from
    bench/alert_regression.py (see monitor/alerts/README.md)."""

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
    form = "baseline"

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
    form = "cohorts"

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
    form = "max_defect_rate"

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
    form = "slo"
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
    **{kind.form: ONE_KIND for kind in RULE_KINDS.values()},
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
            if data.get(kind.form) is not None:
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
