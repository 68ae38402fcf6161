"""The sections an alert rule writes (`baseline` and its `reference`, `cohorts`, `slo` and
its `burn_rates`, `boost`) and the values rules share (a label name, a category, a
false-page budget)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Discriminator, Field, Tag, model_validator

from monitor.config._fields import Duration, Rate, Section, duration_between, parse_duration


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
    history (monitor/evidence/history.py): its level over the trailing `window`, and with
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
            "must be 1 to 128 ASCII letters (A-Z, a-z), digits, '_', '.', ':' or '-' (it is "
            "the alertname Alertmanager routes on); a name in another script goes in a comment"
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
