"""Builds the alerting and OTLP-event sinks from a `Config` (called by `monitor.service`)."""

from __future__ import annotations

import socket

from monitor.alerts.engine import AlertEngine, Notifier
from monitor.alerts.state import StateFile
from monitor.config import Config
from monitor.evaluators.base import Severity
from monitor.exporters.alertmanager import AlertSender
from monitor.processors.evaluate import ResultSink
from monitor.telemetry import Telemetry


def alert_and_event_sinks(config: Config, telemetry: Telemetry) -> list[ResultSink]:
    """The alert engine (when `alerts.rules` is set) and OTLP events (when
    `exporters.otlp.endpoint` is set)."""
    sinks: list[ResultSink] = []
    alerts = config.alerts
    if alerts.rules:
        notifiers: list[Notifier] = []
        if alerts.alertmanager.url or alerts.webhooks:
            notifiers.append(
                AlertSender(
                    telemetry,
                    alertmanager_url=alerts.alertmanager.url,
                    webhooks=[(hook.url, hook.headers) for hook in alerts.webhooks],
                )
            )
        thresholds: dict[str, Severity] = {
            e.name: e.severity_threshold
            for e in config.evaluators
            if e.severity_threshold is not None
        }
        port = config.exporters.prometheus.endpoint.rpartition(":")[2]
        sinks.append(
            AlertEngine(
                alerts.rules,
                telemetry,
                notifiers,
                severity_thresholds=thresholds,
                evaluation_interval_s=alerts.evaluation_interval_s,
                generator_url=f"http://{socket.gethostname()}:{port}/metrics",
                state_file=StateFile(alerts.state_file, telemetry) if alerts.state_file else None,
            )
        )
    otlp = config.exporters.otlp
    if otlp.endpoint:
        from monitor.exporters.otlp_events import OtlpEventsSink, create_exporter

        sinks.append(OtlpEventsSink(create_exporter(otlp.endpoint, otlp.protocol), telemetry))
    return sinks
