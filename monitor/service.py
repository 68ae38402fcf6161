"""Builds the pipeline from a `Config` and runs its lifecycle.

receivers → TraceStage (assembly, sampling, extraction) → EvaluationStage (budget,
evaluators) → sinks. Start order is downstream first (sinks and the evaluation stage,
the trace stage, then receivers) and shutdown is upstream first (receivers stop taking
input, the trace stage releases what it holds, the evaluation stage drains until the
deadline, sinks flush), so nothing accepted is dropped by the order of operations.
"""

from __future__ import annotations

import gc
import logging
import socket
import time
from collections.abc import Callable, Sequence

from monitor.alerts.engine import AlertEngine
from monitor.alerts.state import StateFile
from monitor.component import BatchSink, Component, Notifier, ResultSink
from monitor.config import Config, EvaluatorConfig
from monitor.evaluators.base import CpuScorer, Evaluator
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.judge_definitions import needs_judge
from monitor.evaluators.registry import build, check_evaluators
from monitor.exporters.alertmanager import AlertSender
from monitor.exporters.debug_records import PATH as DEBUG_PATH
from monitor.exporters.debug_records import DebugRecords
from monitor.exporters.prometheus import HealthServer, MetricsSink
from monitor.exporters.results_file import ResultsFileSink
from monitor.pool import Forked, ProcessPool
from monitor.processors._scoring import PRELOAD, scorer_initializer
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluate import EvaluationStage
from monitor.processors.sampler import Sampler
from monitor.processors.trace import TraceStage
from monitor.processors.trace._pooled import PooledExtractor
from monitor.receivers.otlp import OtlpReceivers
from monitor.records import SizeLimits
from monitor.results import Severity
from monitor.telemetry import Telemetry, create_telemetry

log = logging.getLogger(__name__)

# Decoding and assembly allocate a few container objects per span or record, so CPython's
# default young-generation threshold (700) runs a collection every ~150 spans: about a
# quarter of the ingest CPU at 50k spans/s (bench/ingest.py). The workload makes almost no
# reference cycles, so the monitor process collects less often.
GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """Collect the young generation less often (the `run` and `replay` processes)."""
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def _uncounted(kind: str, count: int) -> None:
    """Redactions of exported text are not counted (the judge client counts its own)."""


class Service:
    def __init__(
        self,
        config: Config,
        *,
        telemetry: Telemetry | None = None,
        serve_http: bool = True,
        with_receivers: bool = True,
        extra_sinks: Sequence[ResultSink] = (),
        forked: Forked | None = None,
    ) -> None:
        """`forked`: the lone worker process or the workers' fork server, forked from this
        process (`monitor.pool.fork_here`); without it, the pool starts its own."""
        check_evaluators(config)
        self.config = config
        pipeline = config.pipeline
        self.telemetry = telemetry or create_telemetry(
            max_services=pipeline.max_services,
            max_routes=pipeline.max_routes,
            max_versions=pipeline.max_versions,
            allowed_services=pipeline.allowed_services,
            allowed_routes=pipeline.allowed_routes,
            allowed_versions=pipeline.allowed_versions,
            label_idle_s=pipeline.label_idle_s,
        )
        # The one judge client of the process, shared by every judge evaluator; its module
        # (and the LLM client library behind it) is imported only when a judge is configured.
        self.judge = None
        if needs_judge(e.name for e in config.evaluators):
            from monitor.evaluators.judges import create_judge_client

            self.judge = create_judge_client(config, self.telemetry)
        context = BuildContext(judge=self.judge, judge_model=config.judge.model)
        evaluators: list[tuple[Evaluator, EvaluatorConfig]] = []
        cpu_entries: list[EvaluatorConfig] = []
        for entry in config.evaluators:
            evaluator = build(entry, context)
            evaluators.append((evaluator, entry))
            if isinstance(evaluator, CpuScorer):
                cpu_entries.append(entry)
        processes = config.pipeline.processes
        # The worker processes score records for the evaluation stage and extract sampled
        # traces for the trace stage; the evaluation stage, the last to stop, runs its
        # lifecycle.
        pool = (
            ProcessPool(
                processes,
                config.pipeline.evaluation_timeout_s,
                self.telemetry,
                initializers=[scorer_initializer(cpu_entries)],
                preload=PRELOAD,
                forked=forked,
            )
            if processes > 0 and cpu_entries
            else None
        )
        if pool is None and forked is not None:
            forked.close()
        # User text leaves the process only redacted, and only where the user asked (the
        # redaction module, with its phone-number tables, is imported only then).
        redact = None
        if config.redaction.enabled:
            from monitor.redaction import Redactor

            redact = Redactor(config.redaction, _uncounted)
        self.results_sink = (
            ResultsFileSink(
                config.exporters.results_file,
                self.telemetry,
                include_text=config.exporters.results_include_text,
                redact=redact,
            )
            if config.exporters.results_file
            else None
        )
        sinks: list[ResultSink | BatchSink] = [MetricsSink(self.telemetry)]
        if self.results_sink is not None:
            sinks.append(self.results_sink)
        sinks.extend(self._build_sinks())
        sinks.extend(extra_sinks)
        self.stage = EvaluationStage(
            evaluators,
            BudgetGate(config.budget),
            sinks,
            self.telemetry,
            queue_size=config.pipeline.queue_size,
            queue_bytes=config.pipeline.queue_bytes,
            workers=config.pipeline.workers,
            evaluation_timeout_s=config.pipeline.evaluation_timeout_s,
            cpu_pool=pool,
            evaluate_suspect_records=config.pipeline.evaluate_suspect_records,
        )
        debug_size = config.exporters.prometheus.debug_records
        self.debug = DebugRecords(debug_size, redact) if debug_size and serve_http else None
        self.trace = TraceStage(
            config.trace_assembly,
            Sampler(config.sampling, {e.name: e.sample_rate for e in config.evaluators}),
            self.stage,
            self.telemetry,
            route_attribute=config.receivers.otlp.route_attribute,
            route_in_sampling=any(o.route is not None for o in config.sampling.overrides),
            observer=self.debug,
            # Sampled traces are extracted in the worker processes, when there are any.
            extractor=PooledExtractor(pool) if pool is not None else None,
            limits=SizeLimits(**config.record_limits.model_dump()),
        )
        self._readiness: list[tuple[str, Callable[[], tuple[bool, str]]]] = []
        self.receivers: list[Component] = self._build_receivers() if with_receivers else []
        self.http = (
            HealthServer(
                self.telemetry,
                config.exporters.prometheus.endpoint,
                self.ready,
                web_config_file=config.exporters.prometheus.web_config_file,
            )
            if serve_http
            else None
        )
        if self.http is not None and self.debug is not None:
            self.http.add_route(DEBUG_PATH, self.debug.handle)
        self._started = False
        self.abandoned = 0

    # -- wiring: each capability adds its components here --------------------------------

    def _build_sinks(self) -> list[ResultSink]:
        """Sinks beyond metrics and the results file: the alert engine (when
        `alerts.rules` is set) and OTLP events (when `exporters.otlp.endpoint` is set)."""
        sinks: list[ResultSink] = []
        alerts = self.config.alerts
        if alerts.rules:
            notifiers: list[Notifier] = []
            if alerts.alertmanager.url or alerts.webhooks:
                notifiers.append(
                    AlertSender(
                        self.telemetry,
                        alertmanager_url=alerts.alertmanager.url,
                        webhooks=[(hook.url, hook.headers) for hook in alerts.webhooks],
                    )
                )
            thresholds: dict[str, Severity] = {
                e.name: e.severity_threshold
                for e in self.config.evaluators
                if e.severity_threshold is not None
            }
            port = self.config.exporters.prometheus.endpoint.rpartition(":")[2]
            state_file = StateFile(alerts.state_file, self.telemetry) if alerts.state_file else None
            sinks.append(
                AlertEngine(
                    alerts.rules,
                    self.telemetry,
                    notifiers,
                    severity_thresholds=thresholds,
                    evaluation_interval_s=alerts.evaluation_interval_s,
                    generator_url=f"http://{socket.gethostname()}:{port}/metrics",
                    state_file=state_file,
                )
            )
        otlp = self.config.exporters.otlp
        if otlp.endpoint:
            # The OpenTelemetry exporters are loaded only by deployments that export events.
            from monitor.exporters.otlp_events import OtlpEventsSink, create_exporter

            exporter = create_exporter(otlp.endpoint, otlp.protocol)
            sinks.append(OtlpEventsSink(exporter, self.telemetry))
        return sinks

    def _build_receivers(self) -> list[Component]:
        """Input components, fed into the trace stage."""
        receivers: list[Component] = []
        otlp = self.config.receivers.otlp
        if otlp.grpc.enabled or otlp.http.enabled:
            receivers.append(
                OtlpReceivers(self.config, self.trace, self.telemetry, self.trace.triage)
            )
        kafka = self.config.receivers.kafka
        if kafka.enabled:
            # kafka-python is loaded only by deployments that consume Kafka.
            from monitor.receivers.kafka import KafkaReceiver

            receiver = KafkaReceiver(
                kafka,
                self.trace,
                self.telemetry,
                max_in_flight=self.config.pipeline.queue_size + 2 * kafka.max_poll_records,
            )
            self._readiness.append(("Kafka receiver", receiver.ready))
            receivers.append(receiver)
        return receivers

    # -- lifecycle ---------------------------------------------------------------------

    def reopen_files(self) -> None:
        """Open the results file afresh before its next write (SIGHUP)."""
        if self.results_sink is not None:
            self.results_sink.reopen()
            log.info("results file will be reopened before the next write")

    def ready(self) -> tuple[bool, str]:
        if not self._started or not self.stage.accepting:
            return False, "not started"
        for name, check in self._readiness:
            ok, reason = check()
            if not ok:
                return False, f"{name}: {reason}"
        return True, "ready"

    def _start_order(self) -> list[Component]:
        """What the service runs itself, downstream first (the evaluation stage runs the
        worker pool and the sinks); shutdown goes the other way, except that the metrics
        port stays up until the end, to be scraped while the pipeline drains."""
        judge: list[Component] = [self.judge] if self.judge is not None else []
        http: list[Component] = [self.http] if self.http is not None else []
        return [*judge, self.stage, self.trace, *http, *self.receivers]

    def _shutdown_order(self) -> list[Component]:
        judge: list[Component] = [self.judge] if self.judge is not None else []
        http: list[Component] = [self.http] if self.http is not None else []
        return [*reversed(self.receivers), self.trace, self.stage, *judge, *http]

    async def start(self) -> None:
        started: list[Component] = []
        try:
            for component in self._start_order():
                await component.start()
                started.append(component)
        except Exception:
            for component in reversed(started):
                await component.shutdown(0)
            raise
        self._started = True

    async def shutdown(self, deadline_s: float | None = None) -> None:
        """Stop intake, drain, flush, within `deadline_s` (`pipeline.shutdown_timeout_s`
        unless given; `math.inf` waits for all). `abandoned` then says how many records
        were abandoned at the deadline; a sampled trace abandoned before its records
        were extracted counts as one."""
        deadline = self.config.pipeline.shutdown_timeout_s if deadline_s is None else deadline_s
        started = time.monotonic()
        for component in self._shutdown_order():
            try:
                await component.shutdown(max(0.0, deadline - (time.monotonic() - started)))
            except Exception:
                log.exception("%s failed to shut down", type(component).__name__)
        # Records the trace stage could not hand on before the deadline are abandoned too
        # (counted once the evaluation stage stopped accepting them).
        self.abandoned = self.stage.abandoned + self.trace.abandoned
        self._started = False
