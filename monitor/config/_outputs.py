"""What leaves the pipeline: `alerts` (rules, Alertmanager, webhooks) and `exporters`
(the Prometheus metrics port, OTLP evaluation events, the results file). The rules
themselves, one class per kind, are in `_rules.py`."""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from monitor.config._fields import (
    SECRET,
    Duration,
    Endpoint,
    HostPortOrUrl,
    HttpUrl,
    Refused,
    Seconds,
    Section,
    at_least,
    at_most,
    duration_between,
    http_url,
    is_loopback_host,
)
from monitor.config._rule_sections import FALSE_PAGE_EVERY, FalsePageEvery, LabelName
from monitor.config._rules import AlertRule

# The oldest a conversation grows before its verdicts are judged, however busy it is
# (monitor/evidence/conversations.py): it bounds how long a sequential test waits
# on one.
CONVERSATION_MAX_AGE = "6h"
# The bytes all alert rules' conversations and remembered requests may hold together, and
# its bounds: above the ceiling the state file they are saved in would no longer load within
# the Helm chart's 512 MiB (`monitor/alerts/state.py`); below the floor a few hundred
# conversations fill it.
CONVERSATION_BUDGET = 32 * 1024 * 1024
CONVERSATION_BUDGET_FLOOR = 1024 * 1024


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


# A page's Where alert (it names the slice carrying the excess) is sent as the page's
# alertname with this suffix (`monitor.alerts.attribution`).
WHERE_SUFFIX = "_where"


# The rules a config that writes no `alerts.rules` gets, while it runs local_groundedness:
# the hallucination rate, and the share of records with no context, each against the
# service's own trailing 24h (no threshold to tune). It
# pages by log line and the `alert_firing` gauge until a receiver (`alertmanager.url`,
# `webhooks`) is set; `rules: []` turns it off.
DEFAULT_RULES: tuple[dict[str, Any], ...] = (
    {
        "name": "hallucination_regression",
        "evaluator": "local_groundedness",
        "baseline": {},
        "severity": "page",
    },
    # The records that lost their context (the retrieval's documents no longer reach the
    # trace) are skipped by groundedness, not failed: their share against the service's own
    # history pages as the regression it is.
    {
        "name": "context_missing_regression",
        "evaluator": "local_groundedness",
        "measure": "no_context",
        "baseline": {},
        "severity": "page",
    },
)


# The severities the shipped routing knows (deploy/alertmanager/alertmanager.yml): `page`
# reaches on-call, `ticket` the team's queue.
SEVERITIES = ("page", "ticket")


def _unrouted(severity: str, known: list[str]) -> str:
    """Why `severity` is refused, naming the nearest of `known`."""
    close = difflib.get_close_matches(severity, known, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (
        f"{severity!r} is not a severity the routing knows ({', '.join(known)}); {hint}the "
        "shipped Alertmanager config routes page to on-call and ticket to the team's queue, "
        "and anything else to the fallback receiver; a severity your routing does route goes "
        "into alerts.severities"
    )


class Alerts(Section):
    rules: list[AlertRule] = []
    # The `severity` values the routing behind the receivers knows; a rule naming another is
    # refused (a misspelt one would reach whoever the routing's fallback names).
    severities: list[LabelName] = list(SEVERITIES)
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

    @model_validator(mode="before")
    @classmethod
    def _severities_written(cls, data: Any) -> Any:
        """A severity written in a rule (or an SLO row) that the routing does not know is
        held in its place (`Refused`), so the rule's other problems come with it."""
        if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
            return data
        known = data.get("severities", list(SEVERITIES))
        if not isinstance(known, list) or not known or not all(isinstance(k, str) for k in known):
            return data  # `severities`' own check names what is wrong

        def checked(entry: Any) -> Any:
            severity = entry.get("severity") if isinstance(entry, dict) else None
            if not isinstance(severity, str) or severity in known:
                return entry
            return {**entry, "severity": Refused(severity, _unrouted(severity, known))}

        rules = []
        for rule in data["rules"]:
            rule = checked(rule)
            slo = rule.get("slo") if isinstance(rule, dict) else None
            if isinstance(slo, dict) and isinstance(slo.get("burn_rates"), list):
                rows = [checked(row) for row in slo["burn_rates"]]
                rule = {**rule, "slo": {**slo, "burn_rates": rows}}
            rules.append(rule)
        return {**data, "rules": rules}

    @model_validator(mode="after")
    def _severities_routed(self) -> Alerts:
        """Each rule's severity (an SLO rule's, each row's) is one the routing knows: those
        left at their default, and the rules given as objects."""
        if not self.severities:
            raise ValueError("severities: empty; list the severity labels your routing knows")
        problems = []
        for i, rule in enumerate(self.rules):
            rows = rule.slo.burn_rates if rule.slo is not None else ()
            named = [(f"rules.{i}.slo.burn_rates.{k}", row.severity) for k, row in enumerate(rows)]
            for where, severity in named or [(f"rules.{i}", rule.severity)]:
                if severity not in self.severities:
                    problems.append(f"{where}.severity: {_unrouted(severity, self.severities)}")
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
