"""The pipeline built from a `Config`: which components there are and what each one needs
running while it runs. Nothing here starts anything; `monitor.service` runs the result.

receivers → trace stage → evaluation stage (its worker pool, the judge client) → sinks (metrics,
results file, alert engine, OTLP events). Every component also needs the metrics port, served
from before the first component starts until after the last one stopped (a draining pipeline
is still scraped)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from monitor.alerts.engine import AlertEngine
from monitor.alerts.fleet import FleetReader
from monitor.alerts.rule import severity_thresholds
from monitor.alerts.state import StateFile, StateFormat
from monitor.audit import saved
from monitor.audit.access import LabelAccess, label_access
from monitor.audit.anchors import AnchorCheck, JudgeChanges, load_anchors
from monitor.audit.labels import PATH as LABELS_PATH
from monitor.audit.labels import LabelEndpoint, LabelFile
from monitor.audit.sink import PATH as AUDIT_PATH
from monitor.audit.sink import AuditSink
from monitor.boosts import SamplingBoosts
from monitor.component import Component, Notifier, ResultSink
from monitor.config import Config, EvaluatorConfig, parse_duration
from monitor.conventions import verdict_events_of
from monitor.evaluators import releases
from monitor.evaluators.base import CpuScorer, Evaluator
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build, check_evaluators
from monitor.evaluators.revision import revision
from monitor.exporters.alertmanager import AlertSender
from monitor.exporters.debug_records import PATH as DEBUG_PATH
from monitor.exporters.debug_records import TRACES_PATH as DEBUG_TRACES_PATH
from monitor.exporters.debug_records import DebugRecords
from monitor.exporters.extracted import Redact
from monitor.exporters.firing_alerts import PATH as ALERTS_PATH
from monitor.exporters.firing_alerts import FiringAlertsPage
from monitor.exporters.metrics_port import HealthServer, web_config_asks
from monitor.exporters.prometheus import MetricsSink
from monitor.exporters.results_file import ResultsFileSink
from monitor.extraction import (
    conventions_from_config,
    log_events_taken,
    vocabularies_from_config,
)
from monitor.judge.definitions import needs_judge
from monitor.pool import ProcessPool
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation import (
    PRELOAD,
    EvaluationStage,
    Settings,
    carried_upgrades,
    other_revisions,
    worker_initializer,
)
from monitor.processors.sampler import Sampler, sampling_position
from monitor.processors.sampling_rates import SamplingRateGauge
from monitor.processors.trace import FairShares, TraceStage
from monitor.receivers.otlp import OtlpReceivers
from monitor.records import RagRecord
from monitor.records.limits import SizeLimits
from monitor.telemetry import Telemetry, telemetry_for

if TYPE_CHECKING:
    from monitor.judge.client import JudgeClient

log = logging.getLogger(__name__)
Readiness = Callable[[], tuple[bool, str]]
# Something to say while ready (None: nothing); it never makes the monitor unready.
Notice = Callable[[], str | None]


@dataclass(eq=False)
class Node:
    """A component and the components it needs running while it runs (its consumers and
    the services it calls): those start before it and stop after it."""

    name: str
    component: Component
    needs: list[Node] = field(default_factory=list)


@dataclass(eq=False)
class Pipeline:
    config: Config
    telemetry: Telemetry
    trace: TraceStage
    stage: EvaluationStage
    sinks: list[ResultSink]
    nodes: list[Node]
    receivers: list[Component] = field(default_factory=list)
    judge: JudgeClient | None = None
    results_sink: ResultsFileSink | None = None
    http: HealthServer | None = None
    # Named checks `/readyz` runs besides the pipeline's own (the Kafka receiver's).
    readiness: list[tuple[str, Readiness]] = field(default_factory=list)
    # What a ready `/readyz` also says (a fleet rule that has not read for a while).
    notices: list[Notice] = field(default_factory=list)


def _uncounted(kind: str, count: int) -> None:
    """Redactions of exported text are not counted (the judge client counts its own)."""


def build_pipeline(
    config: Config,
    ready: Readiness,
    *,
    telemetry: Telemetry | None = None,
    serve_http: bool = True,
    with_receivers: bool = True,
    extra_sinks: Sequence[ResultSink] = (),
    wall_clock: Callable[[], float] = time.time,
    monotonic_clock: Callable[[], float] = time.monotonic,
) -> Pipeline:
    """Every component of `config`'s pipeline, connected, none started. `ready`: what
    `/readyz` answers. The clocks (tests inject their own): `wall_clock`, seconds since the
    epoch, for the alert engine, the audit, the anchor check and the other revisions'
    `until`; `monotonic_clock` for the budgets' windows."""
    check_evaluators(config)
    telemetry = telemetry or telemetry_for(config)
    nodes: list[Node] = []

    def add(name: str, component: Component, *needs: Node | None) -> Node:
        node = Node(name, component, [n for n in needs if n is not None])
        nodes.append(node)
        return node

    http = (
        HealthServer(
            telemetry,
            config.exporters.prometheus.endpoint,
            ready,
            web_config_file=config.exporters.prometheus.web_config_file,
        )
        if serve_http
        else None
    )
    metrics_port = add("metrics port", http) if http is not None else None

    # The one judge client of the process, shared by every judge evaluator; its module
    # (and the LLM client library behind it) is imported only when a judge is configured.
    judge: JudgeClient | None = None
    judge_timeout_s: float | None = None
    if needs_judge(e.name for e in config.evaluators):
        from monitor.evaluators.judges import create_judge_client
        from monitor.judge.client import longest_call_s

        judge = create_judge_client(config, telemetry)
        judge_timeout_s = longest_call_s(config.judge)
    judge_node = add("judge client", judge, metrics_port) if judge is not None else None

    redact: Redact | None = None
    if config.redaction.enabled:
        # User text leaves the process only redacted, and only where the user asked (the
        # redaction module, with its phone-number tables, is imported only then).
        from monitor.records.redaction import Redactor

        redact = Redactor(config.redaction, _uncounted)
    results_sink = (
        ResultsFileSink(
            config.exporters.results_file,
            telemetry,
            include_text=config.exporters.results_include_text,
            include_explanations=config.exporters.include_explanations,
            redact=redact,
        )
        if config.exporters.results_file
        else None
    )
    sinks: list[ResultSink] = [MetricsSink(telemetry)]
    if results_sink is not None:
        sinks.append(results_sink)
    # Alert rules with a boost raise their evaluator's sampling here; the sampler follows
    # it (and the effective-rate gauge after the sampler), and marks in each decision what
    # only a boost sampled, which the budget admits only while the base sample keeps room.
    boosts = SamplingBoosts()
    sampler = Sampler(config.sampling, _evaluator_rates(config), boosts)
    SamplingRateGauge(sampler, telemetry, boosts)
    notices: list[Notice] = []
    # The judges whose last anchor check paged a change: the alert rules' pages say so.
    changes = JudgeChanges() if config.audit.anchors.enabled else None
    engine, more = _alerts_and_events(config, telemetry, boosts, redact, wall_clock, notices)
    sinks.extend(more)
    sinks.extend(extra_sinks)
    audit = _audit(config, telemetry, sampler, http, wall_clock, changes)
    if audit is not None:
        sinks.append(audit)
    sink_nodes = [add(type(sink).__name__, sink, metrics_port) for sink in sinks]
    if audit is not None and config.audit.labels.file is not None:
        labels = LabelFile(config.audit.labels.file, audit)
        add("audit labels file", labels, sink_nodes[sinks.index(audit)])

    budget = BudgetGate(config.budget, monotonic_clock)
    stage = _evaluation_stage(
        config, telemetry, judge, sinks, budget, judge_timeout_s, wall_clock, engine
    )
    stage_node = add("evaluation stage", stage, *sink_nodes, judge_node, metrics_port)
    if config.audit.anchors.enabled and judge is None:
        log.warning("audit.anchors.enabled: no judge evaluator is configured; nothing to check")
    elif engine is not None and changes is not None:  # an engine pages: anchors make one
        anchors_judge, anchors = _anchor_check(config, telemetry, budget, changes, engine)
        anchors_judge_node = add("anchors' judge client", anchors_judge, metrics_port)
        add("anchor check", anchors, anchors_judge_node, sink_nodes[sinks.index(engine)])
    if engine is not None and changes is not None:
        engine.evaluator_note = changes.note
    if http is not None and engine is not None:
        # The firing alerts with where each says the excess is, in JSON.
        page = FiringAlertsPage(engine.attribution.firing_alerts, engine.screened_senders)
        http.add_route(ALERTS_PATH, page.handle)

    debug_size = config.exporters.prometheus.debug_records
    debug = DebugRecords(debug_size, redact) if debug_size and http is not None else None
    if http is not None and debug is not None:
        http.add_route(DEBUG_PATH, debug.handle, text=True)
        http.add_route(DEBUG_TRACES_PATH + "{trace_id}", debug.handle_trace, text=True)
    trace = TraceStage(
        config.trace_assembly,
        sampler,
        stage,
        telemetry,
        route_attribute=config.receivers.otlp.route_attribute,
        route_in_sampling=any(o.route is not None for o in config.sampling.overrides),
        observer=debug,
        limits=SizeLimits(**config.record_limits.model_dump()),
        shares=FairShares(config.pipeline.queue_size, config.pipeline.max_services),
        log_events=log_events_taken(
            conventions_from_config(config.extraction.conventions),
            verdict_events_of(vocabularies_from_config(config.external_verdicts.vocabularies)),
        ),
    )
    trace_node = add("trace stage", trace, stage_node, metrics_port)

    built = Pipeline(config, telemetry, trace, stage, sinks, nodes, [], judge, results_sink, http)
    built.notices = notices
    if with_receivers:
        otlp = config.receivers.otlp
        if otlp.grpc.enabled or otlp.http.enabled:
            otlp_receivers = OtlpReceivers(config, trace, telemetry)
            built.receivers.append(otlp_receivers)
            add("OTLP receivers", otlp_receivers, trace_node, metrics_port)
        kafka = config.receivers.kafka
        if kafka.enabled:
            # kafka-python is loaded only by deployments that consume Kafka.
            from monitor.receivers.kafka import KafkaReceiver

            receiver = KafkaReceiver(
                kafka,
                trace,
                telemetry,
                max_in_flight=config.pipeline.queue_size + 2 * kafka.max_poll_records,
            )
            built.readiness.append(("Kafka receiver", receiver.ready))
            built.receivers.append(receiver)
            add("Kafka receiver", receiver, trace_node, metrics_port)
    return built


def _evaluator_rates(config: Config) -> dict[str, float | None]:
    """Each evaluator's `sample_rate`; an audit's reference judge samples `audit.share` of
    what the audited evaluator samples (the same hash under a lower rate: a subset)."""
    rates = {e.name: e.sample_rate for e in config.evaluators}
    audit = config.audit
    if audit.evaluator is not None and audit.reference in rates:
        rates[audit.reference] = _rate(rates[audit.evaluator]) * audit.share
    return rates


def _rate(sample_rate: float | None) -> float:
    return 1.0 if sample_rate is None else sample_rate


def _audit(
    config: Config,
    telemetry: Telemetry,
    sampler: Sampler,
    http: HealthServer | None,
    clock: Callable[[], float],
    checks: JudgeChanges | None,
) -> AuditSink | None:
    """The audit sink (with an evaluator and a reference), its page and its label endpoint."""
    audit = config.audit
    if audit.evaluator is None:
        return None
    detector = _rate(_evaluator_rates(config)[audit.evaluator])
    audited = detector * audit.share  # as the sampler computes the reference's rate

    def share(record: RagRecord) -> bool | None:
        base = sampler.base_rate(record.service, record.route)
        position = sampling_position(record.sampling_key)
        return None if position >= base * detector else position < base * audited

    # The window and the records awaiting a label are kept beside the alert rules' state.
    path = config.alerts.state_file
    kept = StateFormat("audit", *saved.STATE_FORMAT)
    state = StateFile(path + saved.SUFFIX, telemetry, kept) if path else None
    web = config.exporters.prometheus
    # `GET /audit`'s awaiting ids are behind the labels' guard, whether labels are posted or
    # not (a token named in audit.labels.token_env, or the web config's credentials).
    asks = web_config_asks(web) if http is not None else False
    guard = (
        label_access(audit, web.endpoint, asks)
        if http is not None and audit.labels.http
        else LabelAccess(audit.labels.token, asks)
    )
    sink = AuditSink(audit, telemetry, share, state=state, clock=clock, access=guard, checks=checks)
    if http is not None:
        http.add_route(AUDIT_PATH, sink.handle)
        if audit.labels.http:  # a token is asked by the endpoint, else by the web config
            handle = LabelEndpoint(sink, telemetry, guard).handle
            public, guarded = guard.token is not None, guard.by_web_config
            http.add_route(LABELS_PATH, handle, method="POST", public=public, guarded=guarded)
    return sink


def _anchor_check(
    config: Config,
    telemetry: Telemetry,
    budget: BudgetGate,
    changes: JudgeChanges,
    engine: AlertEngine,
) -> tuple[JudgeClient, AnchorCheck]:
    """Each judge evaluator on the anchors, through a judge client of their own that caches
    nothing (a cached verdict would hide a judge that changed); the engine pages."""
    from monitor.evaluators.judges import create_judge_client

    judge = config.judge.model_copy(update={"cache_size": 0})
    uncached = config.model_copy(update={"judge": judge})
    client = create_judge_client(uncached, telemetry)
    assert client is not None  # a judge is configured
    context = BuildContext(judge=client, judge_model=config.judge.model)
    judges = [
        e for e in (build(entry, context) for entry in config.evaluators) if e.kind == "judge"
    ]
    anchors = config.audit.anchors
    check = AnchorCheck(
        judges,
        load_anchors(anchors.file),
        budget,
        telemetry,
        engine.report,
        changes=changes,
        every_s=parse_duration(anchors.every),
        alpha=anchors.alpha,
    )
    return client, check


def _evaluation_stage(
    config: Config,
    telemetry: Telemetry,
    judge: JudgeClient | None,
    sinks: Sequence[ResultSink],
    budget: BudgetGate,
    judge_timeout_s: float | None = None,
    clock: Callable[[], float] = time.time,
    engine: AlertEngine | None = None,
) -> EvaluationStage:
    """The evaluators (and their other revisions still scored: configured, or the previous
    release's that this one carries, which shadow themselves where `engine`'s restored
    baselines hold them), and the worker pool that extracts sampled traces and runs the
    CPU scorers (with no CPU scorer, extraction runs in a thread of this process); a judge
    is cut at the longer of `pipeline.evaluation_timeout_s` and `judge_timeout_s`."""
    context = BuildContext(judge=judge, judge_model=config.judge.model)
    evaluators: list[tuple[Evaluator, EvaluatorConfig]] = []
    cpu_entries: list[EvaluatorConfig] = []
    for entry in config.evaluators:
        evaluator = build(entry, context)
        evaluators.append((evaluator, entry))
        if isinstance(evaluator, CpuScorer):
            cpu_entries.append(entry)
    others, cpu_others = other_revisions(config, context, clock())
    if engine is not None and config.alerts.rules:
        carried = releases.previous()
        upgrades, cpu_upgrades = carried_upgrades(
            config, context, None if carried is None else carried.released()
        )
        others.update(upgrades.scorers)
        cpu_others.extend(cpu_upgrades)
        engine.restored.append(lambda held: upgrades.decide(held, clock()))
    pipeline = config.pipeline
    revisions = {entry.name: revision(entry, config.judge) for entry in config.evaluators}
    settings = Settings(
        route_attribute=config.receivers.otlp.route_attribute,
        limits=SizeLimits(**config.record_limits.model_dump()),
        evaluate_suspect=pipeline.evaluate_suspect_records,
        conventions=conventions_from_config(config.extraction.conventions),
        # The question's topic, for the alert rules' attribution: only where the
        # detector runs anyway (its word vectors are the topics').
        topics=bool(config.alerts.rules and cpu_entries),
        revisions=revisions,
        verdicts=config.external_verdicts.enabled,
        vocabularies=vocabularies_from_config(config.external_verdicts.vocabularies),
        verdict_threshold=config.external_verdicts.threshold,
        extraction_budget_s=pipeline.extraction_timeout_s,
    )
    pool = (
        ProcessPool(
            pipeline.processes,
            pipeline.evaluation_timeout_s,
            telemetry,
            initializer=worker_initializer(cpu_entries, settings, others=cpu_others),
            preload=PRELOAD,
            role="evaluation worker process",
        )
        if pipeline.processes > 0 and cpu_entries
        else None
    )
    return EvaluationStage(
        evaluators,
        budget,
        sinks,
        telemetry,
        queue_size=pipeline.queue_size,
        queue_bytes=pipeline.queue_bytes,
        workers=pipeline.workers,
        evaluation_timeout_s=pipeline.evaluation_timeout_s,
        extraction_timeout_s=pipeline.extraction_timeout_s,
        cpu_pool=pool,
        settings=settings,
        revisions=revisions,
        judge_timeout_s=judge_timeout_s,
        others=others,
        external=config.external_verdicts,
        clock=clock,
    )


def _notifiers(config: Config, telemetry: Telemetry) -> list[Notifier]:
    """Where alerts go (`alerts.alertmanager.url`, `alerts.webhooks`)."""
    alerts = config.alerts
    if not (alerts.alertmanager.url or alerts.webhooks):
        return []
    webhooks = [(hook.url, hook.headers) for hook in alerts.webhooks]
    sender = AlertSender(telemetry, alertmanager_url=alerts.alertmanager.url, webhooks=webhooks)
    return [sender]


def _alerts_and_events(
    config: Config,
    telemetry: Telemetry,
    boosts: SamplingBoosts,
    redact: Redact | None,
    clock: Callable[[], float],
    notices: list[Notice],
) -> tuple[AlertEngine | None, list[ResultSink]]:
    """The alert engine (when `alerts.rules` is set), and the sinks: it and OTLP events
    (when `exporters.otlp.endpoint` is set); what `/readyz` should say of them goes to
    `notices`."""
    sinks: list[ResultSink] = []
    alerts, engine = config.alerts, None
    if alerts.rules or config.audit.anchors.enabled:  # the anchor check pages through it
        state_file = StateFile(alerts.state_file, telemetry) if alerts.state_file else None
        fleet = (
            FleetReader(alerts.fleet, alerts.rules, telemetry, severity_thresholds(config), clock)
            if alerts.fleet is not None
            else None
        )
        if fleet is not None:
            notices.append(fleet.stale)
        engine = AlertEngine.from_config(
            config,
            telemetry,
            _notifiers(config, telemetry),
            clock=clock,
            state_file=state_file,
            boosts=boosts,
            fleet=fleet,
        )
        sinks.append(engine)
    otlp = config.exporters.otlp
    if otlp.endpoint:
        # The OpenTelemetry exporters are loaded only by deployments that export events.
        from monitor.exporters.otlp_events import OtlpEventsSink, create_exporter

        exporter = create_exporter(otlp.endpoint, otlp.protocol, signal=otlp.signal)
        explanations = config.exporters.include_explanations
        sinks.append(
            OtlpEventsSink(exporter, telemetry, include_explanations=explanations, redact=redact)
        )
    return engine, sinks
