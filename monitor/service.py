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
import time
from collections.abc import Callable, Sequence

from monitor.component import Component
from monitor.config import Config
from monitor.evaluators.base import BuildContext, CpuScorer, Evaluator, EvaluatorSpec
from monitor.evaluators.judges import create_judge_client
from monitor.evaluators.registry import build, check_evaluators
from monitor.exporters.debug_records import PATH as DEBUG_PATH
from monitor.exporters.debug_records import DebugRecords
from monitor.exporters.prometheus import HealthServer, MetricsSink
from monitor.exporters.results_file import ResultsFileSink
from monitor.judge.redaction import Redactor
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluate import CpuPool, EvaluationStage, ResultSink
from monitor.processors.sampler import Sampler
from monitor.processors.trace import TraceStage
from monitor.receivers.otlp import OtlpReceivers
from monitor.records import SizeLimits
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


def _spec(cfg: Config, index: int) -> EvaluatorSpec:
    entry = cfg.evaluators[index]
    return EvaluatorSpec(
        name=entry.name,
        sample_rate=entry.sample_rate,
        threshold=entry.threshold,
        severity_threshold=entry.severity_threshold,
        model=entry.model,
        prompt=entry.prompt,
        options={
            key: value
            for key, value in (
                ("rubric", entry.rubric),
                ("api_base", entry.api_base),
                ("tlm", entry.tlm),
            )
            if value is not None
        },
    )


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
    ) -> None:
        check_evaluators(config)
        self.config = config
        self.telemetry = telemetry or create_telemetry(
            max_services=config.pipeline.max_services, max_routes=config.pipeline.max_routes
        )
        context = self._build_context()
        evaluators: list[tuple[Evaluator, object]] = []
        cpu_specs: list[EvaluatorSpec] = []
        for i, entry in enumerate(config.evaluators):
            spec = _spec(config, i)
            evaluator = build(spec, context)
            evaluators.append((evaluator, entry))
            if isinstance(evaluator, CpuScorer):
                cpu_specs.append(spec)
        processes = config.pipeline.processes
        pool = (
            CpuPool(cpu_specs, processes, config.pipeline.evaluation_timeout_s, self.telemetry)
            if processes > 0 and cpu_specs
            else None
        )
        # User text leaves the process only redacted, and only where the user asked.
        redact = Redactor(config.redaction, _uncounted) if config.redaction.enabled else None
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
        sinks: list[ResultSink] = [MetricsSink(self.telemetry)]
        if self.results_sink is not None:
            sinks.append(self.results_sink)
        sinks.extend(self._build_sinks())
        sinks.extend(extra_sinks)
        self.stage = EvaluationStage(
            evaluators,  # type: ignore[arg-type]
            BudgetGate(config.budget),
            sinks,
            self.telemetry,
            queue_size=config.pipeline.queue_size,
            queue_bytes=config.pipeline.queue_bytes,
            workers=config.pipeline.workers,
            evaluation_timeout_s=config.pipeline.evaluation_timeout_s,
            cpu_pool=pool,
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
            extractor=pool,
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

    # -- wiring: each capability adds its components here --------------------------------

    def _build_context(self) -> BuildContext:
        """Shared resources for evaluator factories (e.g. the judge client)."""
        resources = {"telemetry": self.telemetry, "config": self.config}
        judge = create_judge_client(self.config, self.telemetry)
        if judge is not None:
            resources["judge"] = judge
        return BuildContext(resources=resources)

    def _build_sinks(self) -> list[ResultSink]:
        """Sinks beyond metrics and the results file (alert engine, OTLP events)."""
        from monitor.alerts.build import alert_and_event_sinks

        return alert_and_event_sinks(self.config, self.telemetry)

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
                drain_timeout_s=self.config.pipeline.shutdown_timeout_s,
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

    async def start(self) -> None:
        await self.stage.start()
        await self.trace.start()
        if self.http is not None:
            await self.http.start()
        started: list[Component] = []
        try:
            for receiver in self.receivers:
                await receiver.start()
                started.append(receiver)
        except Exception:
            for receiver in reversed(started):
                await receiver.shutdown()
            await self.trace.shutdown(0)
            await self.stage.shutdown(0)
            if self.http is not None:
                await self.http.shutdown()
            raise
        self._started = True

    async def shutdown(self, deadline_s: float | None = None) -> int:
        """Stop intake, drain, flush. Returns the number of records abandoned at the
        deadline (`pipeline.shutdown_timeout_s` unless given; `math.inf` waits for all); a
        sampled trace abandoned before its records were extracted counts as one."""
        deadline = self.config.pipeline.shutdown_timeout_s if deadline_s is None else deadline_s
        started = time.monotonic()
        for receiver in self.receivers:
            try:
                await receiver.shutdown()
            except Exception:
                log.exception("receiver %s failed to shut down", type(receiver).__name__)
        await self.trace.shutdown(max(0.0, deadline - (time.monotonic() - started)))
        abandoned = await self.stage.shutdown(max(0.0, deadline - (time.monotonic() - started)))
        # Records the trace stage could not hand on before the deadline are abandoned too
        # (counted once the evaluation stage stopped accepting them).
        abandoned += self.trace.abandoned
        if self.http is not None:
            await self.http.shutdown()
        self._started = False
        return abandoned
