"""`rag-monitor check-config FILE [--probe]`: the file's problems, or the effective
configuration with a summary of what will run."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from monitor.alerts.kinds.pick import summary
from monitor.audit.access import TOKEN_KEY, open_labels_problem
from monitor.config import (
    AttributeSource,
    Config,
    ConfigError,
    EvaluatorConfig,
    dump_yaml,
    effective_config,
    is_external,
    is_loopback_host,
    load_config,
    mask_url,
    parse_duration,
)
from monitor.config._audit import LABELS
from monitor.config._receivers import OTLP_PROTOCOLS
from monitor.conventions import SHIPPED, Source
from monitor.evaluators.registry import evaluator_problems, needs_context, resolved
from monitor.exporters.metrics_port import (
    check_metrics_port,
    load_web_security,
    web_config_asks,
)
from monitor.judge.definitions import needs_judge
from monitor.shared.placeholders import recursion


def judge_credentials(config: Config, environ: Mapping[str, str]) -> list[str]:
    """The variable to set for each judge without the credentials litellm will look for
    (imports litellm only when a judge is configured)."""
    if not needs_judge(entry.name for entry in config.evaluators):
        return []
    from monitor.judge.access import credential_problems

    return credential_problems(config, environ)


def metrics_port(config: Config, environ: Mapping[str, str]) -> list[str]:
    """What would stop `run` at the metrics port (its web config, `/debug/records`)."""
    try:
        check_metrics_port(config.exporters.prometheus)
    except ConfigError as exc:
        return exc.problems
    return []


def label_senders(config: Config, environ: Mapping[str, str]) -> list[str]:
    """`audit.labels.http` where a sender could post labels with no credential (on any
    address: a loopback one is shared by every container of a pod)."""
    prometheus = config.exporters.prometheus
    try:
        asks = web_config_asks(prometheus)
    except ConfigError:
        return []  # `metrics_port` names what is wrong with the web config
    problem = open_labels_problem(config.audit, prometheus.endpoint, asks)
    return [] if problem is None else [problem]


def convention_keys(config: Config, environ: Mapping[str, str]) -> list[str]:
    """Each user convention's attribute whose `{placeholder}` could fill in its own name
    (`app.{app.kind}`), or whose braces do not pair (`monitor/shared/placeholders.py`)."""
    problems = []
    for k, entry in enumerate(config.extraction.conventions):
        for part, value in entry:
            sources = value if isinstance(value, list) else []
            for n, source in enumerate(sources):
                if not isinstance(source, AttributeSource):
                    continue
                why = recursion(source.attribute)
                if why is not None:
                    where = f"extraction.conventions.{k}.{part}.{n}.attribute"
                    problems.append(f"{where}: {why}")
    return problems


def shadows_ahead(config: Config, environ: Mapping[str, str]) -> list[str]:
    """Each `evaluators[].next` whose `until` has passed: a shadow that would never score,
    so the switch it is meant to measure would be measured by nothing. Refused here, before
    a deployment; `run` only says so (a restart after `until` must not stop the monitor)."""
    now = time.time()
    return [
        f"evaluators.{i}.next.until: {entry.next.until.isoformat()} has passed: the next "
        "revision would never score in shadow, so the switch would be measured by nothing; "
        "set a time ahead (the shadow scores until then), or remove next"
        for i, entry in enumerate(config.evaluators)
        if entry.next is not None and entry.next.until_s <= now
    ]


# What `check-config` checks beyond the file itself; `run` and `replay` check the judges
# and the conventions' keys (`run` finds the metrics port's problems when it opens it, and
# logs a shadow whose time has passed).
CHECK_CONFIG = (metrics_port, label_senders, judge_credentials, convention_keys, shadows_ahead)


def check_config(path: Path, flag_env: tuple[str, ...], probe: bool = False) -> int:
    """Problems on stderr (exit 1); on success the effective configuration on stdout, as
    YAML with defaults filled in and secrets masked, preceded by a summary in comments.
    `RAG_MONITOR_*` variables that nothing reads are named on stderr either way.
    With `probe`, each judge evaluator judges one sample record first (its own prompt, its
    answer read as at run time); a failure is a problem."""
    try:
        config = load_config(
            path,
            evaluator_check=evaluator_problems,
            on_unread=lambda line: print(line, file=sys.stderr),
            read_elsewhere=flag_env,
            checks=CHECK_CONFIG,
            warn=config_warnings,
        )
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        for line in exc.warnings:
            print(f"warning: {line}", file=sys.stderr)
        return 1
    probed: list[str] = []
    if probe:
        failed, probed = _probe(config)
        for line in failed:
            print(line, file=sys.stderr)
        if failed:
            return 1
    for line in config_warnings(config):
        print(f"warning: {line}", file=sys.stderr)
    summary = "\n".join(f"# {line}" for line in [f"{path}: ok", *probed, *_explain(config)])
    effective = effective_config(config)
    effective["evaluators"] = [_evaluator_defaults(entry) for entry in effective["evaluators"]]
    print(f"{summary}\n{dump_yaml(effective)}", end="")
    return 0


def _probe(config: Config) -> tuple[list[str], list[str]]:
    """What `--probe` finds, both ways: a line per failure, and a summary line per judge
    evaluator that gave a verdict and for the fleet's counters when every rule read them."""
    failed: list[str] = []
    answered: list[str] = []
    if needs_judge(entry.name for entry in config.evaluators):
        from monitor.evaluators.probe import probe as probe_judges

        for result in asyncio.run(probe_judges(config)):
            if result.outcome == "ok":
                answered.append(f"{result} (a verdict read)")
            else:
                failed.append(str(result))
    if config.alerts.fleet is not None:
        from monitor.alerts.fleet import FleetReader
        from monitor.telemetry import create_telemetry

        fleet = FleetReader(config.alerts.fleet, config.alerts.rules, create_telemetry())
        problems = asyncio.run(fleet.probe())
        failed += problems
        if not problems:
            answered.append(f"alerts.fleet: every fleet rule's counters read from {fleet.shown}")
    return failed, answered


def config_warnings(config: Config) -> list[str]:
    """What a valid config says that is likely not meant, one `path.to.key: why` line each:
    an SLO row that fires while the service meets its objective (a burn rate below 1), a
    judge call allowed longer than the evaluation deadline, an audit whose judge reference is
    never checked on the anchors, and what `convention_warnings` finds."""
    lines = []
    for i, rule in enumerate(config.alerts.rules):
        if rule.slo is None:
            continue
        window = parse_duration(rule.slo.window)
        for k, row in enumerate(rule.slo.burn_rates):
            if row.factor(window) < 1:
                lines.append(
                    f"alerts.rules.{i}.slo.burn_rates.{k}: fires at burn rate "
                    f"{row.factor(window):.3g}, below 1: it fires while the service still "
                    f"meets its objective {rule.slo.objective:g}"
                )
    audit = config.audit
    if audit.enabled and audit.reference != LABELS and not audit.anchors.enabled:
        lines.append(
            f"audit.anchors.enabled: the reference {audit.reference} is not checked on the "
            "anchors, so its verdicts are taken as the truth unchecked; enable the anchor "
            "check to withhold the estimate while the judge gets them wrong"
        )
    judge, pipeline = config.judge.timeout_s, config.pipeline.evaluation_timeout_s
    if needs_judge(entry.name for entry in config.evaluators) and judge > pipeline:
        from monitor.judge.client import longest_call_s

        lines.append(
            f"judge.timeout_s: {judge:g}s is above pipeline.evaluation_timeout_s {pipeline:g}s: "
            f"a verdict is cut by the judge's own settings (up to {longest_call_s(config.judge):g}s "
            f"with retries), not at {pipeline:g}s, and holds its batch that long; raise "
            "pipeline.evaluation_timeout_s to the deadline you mean, or lower judge.timeout_s"
        )
    lines += context_rule_warnings(config)
    return lines + credential_warnings(config) + convention_warnings(config)


def context_rule_warnings(config: Config) -> list[str]:
    """Rules written on an evaluator that skips records without context, and none on the
    share it skips: a release that stops tracing its documents reads as fewer defects, never
    a page (the embedded defaults carry `context_missing_regression` for this)."""
    rules = config.alerts.rules
    guarded = {rule.evaluator for rule in rules if rule.measure == "no_context"}
    watched = sorted(
        {rule.evaluator for rule in rules if rule.evaluator and rule.measure != "no_context"}
    )
    return [
        f"alerts.rules: no rule pages when records reach {name} without their context (it "
        "skips them, so the defect rate it reads falls rather than rises); add the default "
        f"{{name: context_missing_regression, evaluator: {name}, measure: no_context, "
        "baseline: {window: 24h}, severity: page}"
        for name in watched
        if name not in guarded and needs_context(name)
    ]


# Below this a token is guessed, not kept secret (`openssl rand -hex 32` gives 64).
MIN_TOKEN_CHARS = 16


def credential_warnings(config: Config) -> list[str]:
    """A bearer token that crosses the network in the clear (a receiver or the metrics port
    off loopback without TLS), or is too short to be a secret."""
    lines = []
    otlp = config.receivers.otlp
    if otlp.auth_token is not None:
        for name in OTLP_PROTOCOLS:
            receiver = getattr(otlp, name)
            host = receiver.endpoint.rpartition(":")[0]
            if receiver.enabled and otlp.tls is None and not is_loopback_host(host):
                lines.append(
                    f"receivers.otlp.{name}.endpoint: senders present the bearer token over "
                    f"plain {'gRPC' if name == 'grpc' else 'HTTP'} on {host}, reachable from "
                    "other hosts: anyone on the path reads it; set receivers.otlp.tls, or "
                    "listen on loopback (127.0.0.1)"
                )
    labels, prometheus = config.audit.labels, config.exporters.prometheus
    if labels.http and labels.token is not None and not prometheus.loopback:
        tls = False
        if prometheus.web_config_file is not None:
            with contextlib.suppress(ConfigError):  # `metrics_port` names what is wrong
                tls = load_web_security(prometheus.web_config_file)[1] is not None
        if not tls:
            lines.append(
                f"{TOKEN_KEY}: label senders present the bearer token over plain HTTP on "
                f"{prometheus.endpoint}, reachable from other hosts: anyone on the path reads "
                "it; give the metrics port TLS (tls_server_config in its web config), or "
                "listen on loopback (127.0.0.1)"
            )
    tokens = [("receivers.otlp.auth_token_env", otlp.auth_token), (TOKEN_KEY, labels.token)]
    for key, token in tokens:
        if token is not None and len(token) < MIN_TOKEN_CHARS:
            lines.append(
                f"{key}: the token is {len(token)} characters, too short to be a secret "
                f"(at least {MIN_TOKEN_CHARS}; `openssl rand -hex 32` makes one)"
            )
    return lines


# Attribute names, lower-cased without separators, that hold one trace's or request's own
# id: a conversation keyed on one makes every trace a conversation of its own.
_OWN_IDS = ("traceid", "spanid", "requestid")


def _shipped_events() -> dict[str, str]:
    """Event name → the shipped convention that reads it (its log events and every place of
    it that is an event's field)."""
    owners: dict[str, str] = {}
    for convention in SHIPPED:
        names = {*convention.log_events, *convention.detail_events}
        for place in fields(convention):
            value = getattr(convention, place.name)
            if isinstance(value, tuple):
                names |= {s.event for s in value if isinstance(s, Source) and s.event}
        for name in names:
            owners.setdefault(name, convention.name)
    return owners


def convention_warnings(config: Config) -> list[str]:
    """A convention of the user's that takes over a shipped one's spans (it names a shipped
    convention's role attribute as its own kind, or matches the spans carrying it: every
    span of that convention) or events (it reads an event a shipped convention reads), or
    whose conversation is an attribute holding the trace's own id."""
    lines = []
    owners = {kind.attribute: c.name for c in SHIPPED for kind in c.kinds}
    events = _shipped_events()
    for i, entry in enumerate(config.extraction.conventions):
        if entry.kind is not None and entry.kind.attribute in owners:
            lines.append(
                f"extraction.conventions.{i}.kind.attribute: {entry.kind.attribute} is the "
                f"role attribute of the shipped convention {owners[entry.kind.attribute]}; "
                "yours is read first and takes over its spans' roles"
            )
        match = entry.match
        for attribute in match.attributes if match is not None else ():
            if attribute in owners and match is not None:
                lines.append(
                    f"extraction.conventions.{i}.match.attributes: {attribute} is on every "
                    f"span of the shipped convention {owners[attribute]}; this match gives "
                    f"all of them the role {match.role}"
                )
        for part in ("input", "output", "documents"):
            for n, source in enumerate(getattr(entry, part)):
                if source.event in events:
                    lines.append(
                        f"extraction.conventions.{i}.{part}.{n}.event: {source.event} is an "
                        f"event the shipped convention {events[source.event]} reads; yours is "
                        "read first and takes over what those events hold"
                    )
        for n, source in enumerate(entry.conversation):
            key = source.field or source.attribute  # a JSON object's member, where named
            if "".join(ch for ch in key.lower() if ch.isalnum()).endswith(_OWN_IDS):
                lines.append(
                    f"extraction.conventions.{i}.conversation.{n}: {key} holds "
                    "a trace's own id, so every trace would be a conversation of its own; "
                    "name the attribute your app writes its session id in"
                )
    return lines


def _evaluator_defaults(entry: dict[str, Any]) -> dict[str, Any]:
    """An `evaluators[]` entry with the values its evaluator applies where the file gave
    none, so that `check-config` shows what will run rather than `null`."""
    filled = dict(entry)
    if filled.get("sample_rate") is None:
        filled["sample_rate"] = 1.0
    applied = resolved(EvaluatorConfig.model_validate(entry)).model_dump(mode="json")
    for key in ("threshold", "severity_threshold", "language", "second_stage"):
        if filled.get(key) is None:
            filled[key] = applied[key]
    return filled


def _explain(config: Config) -> list[str]:
    r = config.receivers
    lines = []
    if r.otlp.grpc.enabled:
        lines.append(f"OTLP/gRPC receiver on {r.otlp.grpc.endpoint}")
    if r.otlp.http.enabled:
        lines.append(f"OTLP/HTTP receiver on {r.otlp.http.endpoint}")
    if r.otlp.auth_token is not None:
        lines.append("OTLP senders must present a bearer token")
    if r.kafka.enabled:
        lines.append(
            f"Kafka receiver: topics {', '.join(r.kafka.topics)}, group {r.kafka.group_id}"
        )
    lines.append(
        f"sampling rate {config.sampling.rate:g} ({len(config.sampling.overrides)} overrides)"
    )
    for entry in config.evaluators:
        rate = "" if entry.sample_rate is None else f", sample_rate {entry.sample_rate:g}"
        language = resolved(entry).language
        said = "" if language is None else f", language {language}"
        lines.append(f"evaluator {entry.name}{rate}{said}")
    external = config.external_verdicts
    if external.enabled:
        senders = ", ".join(external.services) if external.services else "every service"
        names = ", ".join(external.evaluators) if external.evaluators else "any evaluator"
        lines.append(
            f"an app's own verdicts (external:, guardrail:) read from {senders}: {names}, "
            f"at most {external.max_evaluators_per_service} a service"
        )
    audit = config.audit
    if audit.enabled:
        lines.append(
            f"audit: {audit.evaluator}'s defect rate corrected by {audit.reference} on "
            f"{audit.share:g} of its records, over {audit.window}"
        )
    if audit.labels.http:
        token = audit.labels.token_env
        who = f"with the bearer token in {token}" if token else "with the web config's credentials"
        lines.append(f"labels posted to /audit/labels {who} only, loopback senders included")
    if audit.anchors.enabled:
        where = audit.anchors.file or "the shipped anchors"
        lines.append(f"judges checked on {where} every {audit.anchors.every}")
    prometheus = config.exporters.prometheus
    secured = " (TLS/basic auth from the web config)" if prometheus.web_config_file else ""
    lines.append(f"metrics on {prometheus.endpoint}{secured}")
    if config.exporters.results_file:
        lines.append(f"results appended to {config.exporters.results_file}")
    otlp = config.exporters.otlp
    if otlp.endpoint:
        form = "log records" if otlp.signal == "logs" else "span events"
        lines.append(f"evaluation events as OTLP {form} to {otlp.endpoint} ({otlp.protocol})")
    for rule in config.alerts.rules:
        line = summary(rule, config.alerts.false_page_every)
        if rule.evaluator is not None and is_external(rule.evaluator):
            line += f" on the app's own judge {rule.evaluator}"
        lines.append(line)
        if rule.boost is not None:
            lines.append(
                f"alert {rule.name}: {rule.evaluator} sampled at {rule.boost.sample_rate:g}"
                f" while p < {rule.boost.while_p_below:g}"
            )
    if config.alerts.fleet is not None:
        lines.append(
            f"alerts judged on the fleet's counters in {mask_url(config.alerts.fleet.prometheus_url)}"
        )
    return lines
