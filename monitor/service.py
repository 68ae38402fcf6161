"""Builds the pipeline from a `Config` and runs its lifecycle.

receivers → (trace assembly) → EvaluationStage (sampler, budget, evaluators) → sinks.
Start order is downstream first (sinks, then the stage, then receivers) and shutdown is
upstream first (receivers stop taking input, the stage drains until the deadline, sinks
flush), so nothing accepted is dropped by the order of operations.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Sequence
from typing import Protocol

from monitor.config import Config
from monitor.evaluators.base import BuildContext, Evaluator, EvaluatorSpec, build
from monitor.exporters.prometheus import HealthServer, MetricsSink
from monitor.exporters.results_file import ResultsFileSink
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluate import EvaluationStage, ResultSink
from monitor.processors.sampler import Sampler
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


class Component(Protocol):
    """A receiver or server: `start` returns quickly; `shutdown` is idempotent."""

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...


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
            for key, value in (("rubric", entry.rubric), ("api_base", entry.api_base))
            if value is not None
        },
    )


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
        self.config = config
        self.telemetry = telemetry or create_telemetry(
            max_services=config.pipeline.max_services, max_routes=config.pipeline.max_routes
        )
        context = self._build_context()
        evaluators: list[tuple[Evaluator, object]] = []
        for i, entry in enumerate(config.evaluators):
            evaluators.append((build(_spec(config, i), context), entry))
        sampler = Sampler(config.sampling, {e.name: e.sample_rate for e in config.evaluators})
        self.results_sink = (
            ResultsFileSink(config.exporters.results_file, self.telemetry)
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
            sampler,
            BudgetGate(config.budget),
            sinks,
            self.telemetry,
            queue_size=config.pipeline.queue_size,
            workers=config.pipeline.workers,
            evaluation_timeout_s=config.pipeline.evaluation_timeout_s,
        )
        self.receivers: list[Component] = self._build_receivers() if with_receivers else []
        self.http = (
            HealthServer(self.telemetry, config.exporters.prometheus.endpoint, self.ready)
            if serve_http
            else None
        )
        self._started = False

    # -- wiring: each capability adds its components here --------------------------------

    def _build_context(self) -> BuildContext:
        """Shared resources for evaluator factories (e.g. the judge client)."""
        from monitor.evaluators.judges import create_judge_client

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
        """Input components, fed into `self.stage`."""
        receivers: list[Component] = []
        otlp = self.config.receivers.otlp
        if otlp.grpc.enabled or otlp.http.enabled:
            from monitor.receivers.otlp import OtlpReceivers

            receivers.append(OtlpReceivers(self.config, self.stage, self.telemetry))
        kafka = self.config.receivers.kafka
        if kafka.enabled:
            from monitor.receivers.kafka import KafkaReceiver

            receivers.append(
                KafkaReceiver(
                    kafka,
                    self.stage,
                    self.telemetry,
                    drain_timeout_s=self.config.pipeline.shutdown_timeout_s,
                    max_in_flight=self.config.pipeline.queue_size + 2 * kafka.max_poll_records,
                    assembly=self.config.trace_assembly,
                    route_attribute=self.config.receivers.otlp.route_attribute,
                )
            )
        return receivers

    # -- lifecycle ---------------------------------------------------------------------

    def ready(self) -> tuple[bool, str]:
        if not self._started or not self.stage.accepting:
            return False, "not started"
        for receiver in self.receivers:
            check = getattr(receiver, "ready", None)
            if check is not None:
                ok, reason = check()
                if not ok:
                    return False, f"{type(receiver).__name__}: {reason}"
        return True, "ready"

    async def start(self) -> None:
        await self.stage.start()
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
            await self.stage.shutdown(0)
            if self.http is not None:
                await self.http.shutdown()
            raise
        self._started = True

    async def shutdown(self, deadline_s: float | None = None) -> int:
        """Stop intake, drain, flush. Returns the number of records abandoned at the deadline."""
        deadline = self.config.pipeline.shutdown_timeout_s if deadline_s is None else deadline_s
        for receiver in self.receivers:
            try:
                await receiver.shutdown()
            except Exception:
                log.exception("receiver %s failed to shut down", type(receiver).__name__)
        abandoned = await self.stage.shutdown(deadline)
        if self.http is not None:
            await self.http.shutdown()
        self._started = False
        return abandoned
