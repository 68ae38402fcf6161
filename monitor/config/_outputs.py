"""What leaves the pipeline: `alerts` (rules, Alertmanager, webhooks) and `exporters`
(the Prometheus metrics port, OTLP evaluation events, the results file)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from monitor.config._fields import (
    SECRET,
    Duration,
    Endpoint,
    HostPortOrUrl,
    HttpUrl,
    Rate,
    Seconds,
    Section,
    at_least,
    at_most,
    duration_between,
    http_url,
    is_loopback_host,
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
    history (monitor/alerts/evidence/history.py): its level over the trailing `window`, and with
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
SLO_MIN_SAMPLES = 30
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


# The oldest a conversation grows before its verdicts are judged, however busy it is
# (monitor/alerts/evidence/conversations.py): it bounds how long a sequential test waits on one.
CONVERSATION_MAX_AGE = "6h"
# The bytes all alert rules' conversations and remembered requests may hold together, and
# its bounds: above the ceiling the state file they are saved in would no longer load within
# the Helm chart's 512 MiB (`monitor/alerts/state.py`); below the floor a few hundred
# conversations fill it.
CONVERSATION_BUDGET = 32 * 1024 * 1024
CONVERSATION_BUDGET_FLOOR = 1024 * 1024

# Regression- and cohort-rule defaults, from bench/alert_regression.py (see
# docs/alerts.md).
REGRESSION_MIN_INCREASE = 0.03
REGRESSION_WINDOW = "30m"
REGRESSION_MIN_SAMPLES = 100
REGRESSION_TEST = "sequential"
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


class AlertRule(Section):
    name: LabelName
    evaluator: str | None = None
    category: Category | None = None
    # Exactly one form: an absolute `max_defect_rate`, a `baseline` to regress against,
    # `cohorts` compared with the rest of their service, or an `slo` and its error budget.
    max_defect_rate: Rate | None = None
    baseline: AlertBaseline | None = None
    cohorts: AlertCohorts | None = None
    slo: AlertSlo | None = None
    # The smallest rise worth a page; a rise below half of it is judged as no rise.
    min_increase: float | None = Field(default=None, gt=0, lt=1)
    # Regression rules: the sequential test or the fixed-window z-test (monitor/alerts).
    test: Literal["window", "sequential"] | None = None
    # What a verdict adds: 1 for a fail (`verdicts`), or 1 - its normalised score (`scores`).
    measure: Literal["verdicts", "scores"] = "verdicts"
    window: Duration = "10m"
    min_samples: int = Field(default=30, gt=0)
    # This rule's false-page budget (default `alerts.false_page_every`).
    false_page_every: FalsePageEvery | None = None
    severity: LabelName = "warning"
    boost: AlertBoost | None = None

    _removed: ClassVar[Mapping[str, str]] = {
        "confidence": "replaced by false_page_every, how rarely the rule may page on a "
        "service that did not change (for example 90d; alerts.false_page_every sets it for "
        "every rule)"
    }

    @model_validator(mode="before")
    @classmethod
    def _regression_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if data.get("baseline") is not None or data.get("cohorts") is not None:
            data = {
                "window": REGRESSION_WINDOW,
                "min_samples": REGRESSION_MIN_SAMPLES,
                "min_increase": REGRESSION_MIN_INCREASE,
                **data,
            }
        if data.get("baseline") is not None:
            data = {"test": REGRESSION_TEST, **data}
        slo = data.get("slo")
        if isinstance(slo, dict):
            # An SLO rule's window is its objective's: what the budget is counted over.
            window = slo.get("window", SLO_WINDOW)
            data = {"window": window, "min_samples": SLO_MIN_SAMPLES, **data}
        return data

    @model_validator(mode="after")
    def _one_source(self) -> AlertRule:
        if (self.evaluator is None) == (self.category is None):
            raise ValueError("evaluator: exactly one of evaluator or category is required")
        forms = [self.max_defect_rate, self.baseline, self.cohorts, self.slo]
        if sum(form is not None for form in forms) != 1:
            raise ValueError(
                "max_defect_rate: exactly one of max_defect_rate, baseline or cohorts, or an slo"
            )
        if self.slo is not None:
            self._slo_fits(self.slo)
        if self.max_defect_rate is not None and self.min_increase is not None:
            raise ValueError(
                "min_increase: only a rule with a baseline or cohorts takes min_increase"
            )
        if self.baseline is None and self.test is not None:
            raise ValueError("test: only a rule with a baseline takes a test")
        if self.measure == "scores" and self.evaluator is None:
            raise ValueError("measure: scores are an evaluator's; a category rule counts verdicts")
        if self.boost is not None and (
            self.evaluator is None or self.max_defect_rate is not None or self.slo is not None
        ):
            raise ValueError(
                "boost: only a regression or cohort rule on an evaluator raises its sampling"
            )
        if self.baseline is not None and parse_duration(self.baseline.window) <= parse_duration(
            self.window
        ):
            raise ValueError(
                f"baseline.window: {self.baseline.window} must be longer than window {self.window}"
            )
        return self

    def _slo_fits(self, slo: AlertSlo) -> None:
        if self.min_increase is not None:
            raise ValueError(
                "min_increase: an SLO rule pages on its error budget's burn rate, not on a rise"
            )
        if parse_duration(self.window) != parse_duration(slo.window):
            raise ValueError(
                f"window: an SLO rule's window is its slo.window ({slo.window}); leave window out"
            )
        if self.false_page_every is not None:
            raise ValueError(
                "false_page_every: an SLO rule's burn rates are thresholds, not a test with a "
                "false-page budget; its objective and burn_rates say when it fires"
            )


class AlertFleet(Section):
    """Judge the fleet's verdicts as one stream: every replica reads the summed counters of
    all replicas from Prometheus and runs its rules on them (monitor/alerts/fleet.py)."""

    # The Prometheus that scrapes every replica (its HTTP API, e.g. http://prometheus:9090).
    prometheus_url: HttpUrl
    # PromQL label matchers that select the fleet's series, e.g. `job="rag-monitor"`.
    selector: str = ""
    query_interval_s: Annotated[
        Seconds,
        at_least(0.5, "each query reads every replica"),
        at_most(300, "the fleet's verdicts reach the rules this late"),
    ] = 15.0
    timeout_s: Annotated[
        Seconds, at_least(0.1, "a query needs a moment"), at_most(60, "a read waits this long")
    ] = 5.0
    # The largest answer read from Prometheus; a larger one is refused, unread.
    max_response_bytes: int = Field(default=8 * 1024 * 1024, ge=64 * 1024)

    _may_be_empty: ClassVar[frozenset[str]] = frozenset({"selector"})

    @field_validator("selector")
    @classmethod
    def _matchers(cls, selector: str) -> str:
        if selector.strip() and not _SELECTOR.fullmatch(selector):
            raise ValueError(
                'expected PromQL label matchers such as job="rag-monitor", '
                'namespace=~"prod-.*" (comma-separated, values in quotes)'
            )
        return selector


_MATCHER = (
    r"""\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*"""
)
_SELECTOR = re.compile(f"{_MATCHER}(,{_MATCHER})*,?\\s*")


class Alertmanager(Section):
    url: HttpUrl | None = None


class Webhook(Section):
    url: HttpUrl
    headers: Annotated[dict[str, str], SECRET] = {}


# A page's companion that names the slice carrying its excess is sent as the page's
# alertname with this suffix (`monitor.alerts.attribution`).
WHERE_SUFFIX = "_where"


# The rule a config that writes no `alerts.rules` gets, while it runs local_groundedness:
# the hallucination rate against the service's own trailing 24h (no threshold to tune). It
# pages by log line and the `alert_firing` gauge until a receiver (`alertmanager.url`,
# `webhooks`) is set; `rules: []` turns it off.
DEFAULT_RULES: tuple[dict[str, Any], ...] = (
    {
        "name": "hallucination_regression",
        "evaluator": "local_groundedness",
        "baseline": {},
        "severity": "page",
    },
)


class Alerts(Section):
    rules: list[AlertRule] = []
    # How rarely a rule may page on a service that did not change, per rule and service.
    false_page_every: FalsePageEvery = FALSE_PAGE_EVERY
    fleet: AlertFleet | None = None
    alertmanager: Alertmanager = Alertmanager()
    webhooks: list[Webhook] = []
    evaluation_interval_s: Annotated[
        Seconds,
        at_least(0.5, "each evaluation may write the state file"),
        at_most(300, "a rule judged less often pages late"),
    ] = 15.0
    # Where the rules' windows and firing states are kept across restarts (none: in memory).
    state_file: str | None = None
    # A conversation closes once it has been quiet this long: from then on its verdicts
    # teach the history how verdicts cluster, and a later verdict starts a new one. A
    # conversation closes at CONVERSATION_MAX_AGE whatever its idle time, so a longer one
    # would never be reached.
    conversation_idle: Annotated[
        Duration,
        duration_between(
            "0s", CONVERSATION_MAX_AGE, "a conversation is judged once it is this old anyway"
        ),
    ] = "10m"
    # What all rules' conversations (and the requests they remember) may hold in memory,
    # and so in the state file; past it the oldest are forgotten first, counted.
    conversation_budget_bytes: int = CONVERSATION_BUDGET
    # The link a page gives each trace it lists, `{trace_id}` replaced by the trace's id
    # (a Grafana Tempo or Jaeger URL).
    trace_url: str | None = None

    @field_validator("conversation_budget_bytes")
    @classmethod
    def _budget_within_bounds(cls, value: int) -> int:
        if value > CONVERSATION_BUDGET:
            raise ValueError(
                f"must be at most {CONVERSATION_BUDGET} (32 MiB): the state file holding more "
                "would not load within the Helm chart's 512 MiB"
            )
        if value < CONVERSATION_BUDGET_FLOOR:
            raise ValueError(
                f"must be at least {CONVERSATION_BUDGET_FLOOR} (1 MiB): a smaller budget "
                "forgets conversations before they close"
            )
        return value

    @field_validator("trace_url")
    @classmethod
    def _names_the_trace(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if "{trace_id}" not in value:
            raise ValueError(
                "must contain {trace_id}, which each listed trace's id replaces, e.g. "
                "http://tempo:3200/trace/{trace_id}"
            )
        # Checked as a page's reader will follow it: with a trace's id in place.
        http_url(value.replace("{trace_id}", "0" * 32))
        return value

    @model_validator(mode="after")
    def _names_apart(self) -> Alerts:
        """A rule's name is its alertname, its state's key and its Where alert's stem."""
        names = [rule.name for rule in self.rules]
        problems = []
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            problems.append(f"rules: named twice: {', '.join(twice)}")
        for name in sorted(set(names)):
            if name.endswith(WHERE_SUFFIX) and name.removesuffix(WHERE_SUFFIX) in names:
                problems.append(
                    f"rules: {name} is the name of {name.removesuffix(WHERE_SUFFIX)}'s Where "
                    "alert (the alert naming the slice a page's rise is in); rename it"
                )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @model_validator(mode="after")
    def _one_voice(self) -> Alerts:
        if self.fleet is not None and self.webhooks:
            raise ValueError(
                "webhooks: with alerts.fleet every replica judges the same stream, and only "
                "Alertmanager merges their notifications into one; send pages through "
                "alerts.alertmanager.url (its receivers can call the webhooks)"
            )
        return self


class PrometheusExporter(Section):
    endpoint: Endpoint = "0.0.0.0:9464"
    # TLS and basic auth for the metrics port, in the Prometheus exporter-toolkit format
    # (`monitor.exporters.web_config`: read and checked by the metrics server and by
    # `check-config`); re-read when it or a file it names changes.
    web_config_file: str | None = None
    # Serve /debug/records: the last N records extracted and the last N traces that gave
    # none, with the reason (0 = off: the page shows user text, redacted). Only on a
    # loopback endpoint or behind a web config that asks for credentials.
    debug_records: int = Field(default=0, ge=0, le=10_000)

    @property
    def loopback(self) -> bool:
        """Whether the metrics port listens on a loopback address only."""
        return is_loopback_host(self.endpoint.rpartition(":")[0])

    @model_validator(mode="after")
    def _text_only_where_asked(self) -> PrometheusExporter:
        if self.debug_records and self.web_config_file is None and not self.loopback:
            raise ValueError(
                f"debug_records: /debug/records shows record text (questions, documents, "
                f"answers) and the metrics endpoint {self.endpoint} is reachable from other "
                "hosts with no web config; bind exporters.prometheus.endpoint to a loopback "
                "address (127.0.0.1), set exporters.prometheus.web_config_file with "
                "basic_auth_users, or leave debug_records at 0"
            )
        return self


class OtlpExporter(Section):
    endpoint: HostPortOrUrl | None = None
    protocol: Literal["grpc", "http/protobuf"] = "grpc"
    # How evaluation events travel: as span events on a span in the evaluated trace, or
    # as log records carrying the evaluated span's ids (the GenAI conventions' events).
    signal: Literal["spans", "logs"] = "spans"


class Exporters(Section):
    prometheus: PrometheusExporter = PrometheusExporter()
    otlp: OtlpExporter = OtlpExporter()
    results_file: str | None = None
    # Add what was extracted (query, history, context documents, response), redacted as
    # `redaction` says, to each results line under "extracted".
    results_include_text: bool = False
    # Evaluators' explanations quote and paraphrase the record's text (an unsupported
    # sentence, a judge's reasoning): off, results lines and evaluation events leave them
    # out; on, they carry them redacted as `redaction` says.
    include_explanations: bool = False
