"""What leaves the pipeline: `alerts` (rules, Alertmanager, webhooks) and `exporters`
(the Prometheus metrics port, OTLP evaluation events, the results file)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from monitor.config._fields import (
    SECRET,
    Duration,
    Endpoint,
    Rate,
    Seconds,
    Section,
    at_least,
    is_loopback_host,
    parse_duration,
)


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


# Regression- and cohort-rule defaults, from bench/alert_regression.py (see
# monitor/alerts/README.md).
REGRESSION_MIN_INCREASE = 0.03
REGRESSION_WINDOW = "30m"
REGRESSION_MIN_SAMPLES = 100
REGRESSION_TEST = "sequential"
# How rarely a rule may page on a service that did not change, unless a rule says otherwise.
FALSE_PAGE_EVERY = "90d"


class AlertBoost(Section):
    """Evidence-driven sampling: while a rule's evidence for a service builds (its p-value
    below `while_p_below`, or the alert firing), the rule's evaluator samples that service
    at `sample_rate` instead of its own rate (budgets still cap it)."""

    sample_rate: Rate
    while_p_below: float = Field(default=0.05, gt=0, lt=1)


class AlertRule(Section):
    name: str
    evaluator: str | None = None
    category: str | None = None
    # Exactly one form: an absolute `max_defect_rate`, a `baseline` to regress against, or
    # `cohorts` compared with the rest of their service.
    max_defect_rate: Rate | None = None
    baseline: AlertBaseline | None = None
    cohorts: AlertCohorts | None = None
    # The smallest rise worth a page; a rise below half of it is judged as no rise.
    min_increase: float | None = Field(default=None, gt=0, lt=1)
    # Regression rules: the sequential test or the fixed-window z-test (monitor/alerts).
    test: Literal["window", "sequential"] | None = None
    # What a verdict adds: 1 for a fail (`verdicts`), or 1 - its normalised score (`scores`).
    measure: Literal["verdicts", "scores"] = "verdicts"
    window: Duration = "10m"
    min_samples: int = Field(default=30, gt=0)
    # This rule's false-page budget (default `alerts.false_page_every`).
    false_page_every: Duration | None = None
    severity: str = "warning"
    boost: AlertBoost | None = None

    @model_validator(mode="before")
    @classmethod
    def _regression_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "confidence" in data:
            raise ValueError(
                "confidence: replaced by false_page_every, how rarely the rule may page on a "
                "service that did not change (for example 90d; alerts.false_page_every sets "
                "it for every rule)"
            )
        if data.get("baseline") is not None or data.get("cohorts") is not None:
            data = {
                "window": REGRESSION_WINDOW,
                "min_samples": REGRESSION_MIN_SAMPLES,
                "min_increase": REGRESSION_MIN_INCREASE,
                **data,
            }
        if data.get("baseline") is not None:
            data = {"test": REGRESSION_TEST, **data}
        return data

    @model_validator(mode="after")
    def _one_source(self) -> AlertRule:
        if (self.evaluator is None) == (self.category is None):
            raise ValueError("evaluator: exactly one of evaluator or category is required")
        forms = [self.max_defect_rate, self.baseline, self.cohorts]
        if sum(form is not None for form in forms) != 1:
            raise ValueError("max_defect_rate: exactly one of max_defect_rate, baseline or cohorts")
        if self.max_defect_rate is not None and self.min_increase is not None:
            raise ValueError(
                "min_increase: only a rule with a baseline or cohorts takes min_increase"
            )
        if self.baseline is None and self.test is not None:
            raise ValueError("test: only a rule with a baseline takes a test")
        if self.measure == "scores" and self.evaluator is None:
            raise ValueError("measure: scores are an evaluator's; a category rule counts verdicts")
        if self.boost is not None and (self.evaluator is None or self.max_defect_rate is not None):
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


class AlertFleet(Section):
    """Judge the fleet's verdicts as one stream: every replica reads the summed counters of
    all replicas from Prometheus and runs its rules on them (monitor/alerts/fleet.py)."""

    # The Prometheus that scrapes every replica (its HTTP API, e.g. http://prometheus:9090).
    prometheus_url: str
    # A PromQL label matcher that selects the fleet's series, e.g. `job="rag-monitor"`.
    selector: str = ""
    query_interval_s: Annotated[Seconds, at_least(0.5, "each query reads every replica")] = 15.0
    timeout_s: Annotated[Seconds, at_least(0.1, "a query needs a moment")] = 5.0


class Alertmanager(Section):
    url: str | None = None


class Webhook(Section):
    url: str
    headers: Annotated[dict[str, str], SECRET] = {}


class Alerts(Section):
    rules: list[AlertRule] = []
    # How rarely a rule may page on a service that did not change, per rule and service.
    false_page_every: Duration = FALSE_PAGE_EVERY
    fleet: AlertFleet | None = None
    alertmanager: Alertmanager = Alertmanager()
    webhooks: list[Webhook] = []
    evaluation_interval_s: Annotated[
        Seconds, at_least(0.5, "each evaluation may write the state file")
    ] = 15.0
    # Where the rules' windows and firing states are kept across restarts (none: in memory).
    state_file: str | None = None
    # A conversation's verdicts are judged together once it has been quiet this long.
    conversation_idle: Duration = "10m"
    # The link a page gives each trace it lists, `{trace_id}` replaced by the trace's id
    # (a Grafana Tempo or Jaeger URL).
    trace_url: str | None = None

    @field_validator("trace_url")
    @classmethod
    def _names_the_trace(cls, value: str | None) -> str | None:
        if value is not None and "{trace_id}" not in value:
            raise ValueError(
                "must contain {trace_id}, which each listed trace's id replaces, e.g. "
                "http://tempo:3200/trace/{trace_id}"
            )
        return value

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
    endpoint: str | None = None
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
