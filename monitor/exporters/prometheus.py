"""Prometheus: the metrics sink and the HTTP endpoint (`/metrics`, `/healthz`, `/readyz`).

`/metrics` serves the monitor's own registry in the text format, or in OpenMetrics when
the scraper asks for it (only OpenMetrics carries the trace-id exemplars on the defect
counters).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import exposition
from prometheus_client.openmetrics import exposition as openmetrics

from monitor.evaluators.base import EvalResult
from monitor.records import RagRecord
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)


class MetricsSink:
    """Counts every finished evaluation (DESIGN.md metrics table)."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._t = telemetry

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def emit(self, record: RagRecord, results: dict[str, EvalResult]) -> None:
        t = self._t
        service = t.service_cap(record.service)
        route = t.route_cap(record.route)
        exemplar = {"trace_id": record.trace_id} if record.trace_id else None
        for name, result in results.items():
            outcome = result.outcome
            t.child(t.evaluations, service, route, name, outcome).inc(
                exemplar=exemplar if outcome == "fail" else None
            )
            if outcome != "error" and result.normalized is not None:
                t.child(t.evaluation_score, service, name).observe(result.normalized)
            if outcome != "error" and result.safety:
                for category, severity in result.safety.items():
                    t.child(t.safety_evaluations, service, category, severity).inc(
                        exemplar=exemplar if severity != "very_low" else None
                    )


class HealthServer:
    """aiohttp app on `exporters.prometheus.endpoint`."""

    def __init__(
        self, telemetry: Telemetry, endpoint: str, ready: Callable[[], tuple[bool, str]]
    ) -> None:
        self._t = telemetry
        host, _, port = endpoint.rpartition(":")
        self._host = host.strip("[]")
        self._port = int(port)
        self._ready = ready
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        sockets = site._server.sockets if site._server is not None else []  # type: ignore[union-attr]
        self.bound_port = sockets[0].getsockname()[1] if sockets else self._port
        log.info("metrics on http://%s:%s/metrics", self._host, self.bound_port)

    async def shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        accept = request.headers.get("Accept", "")
        if "application/openmetrics-text" in accept:
            body = openmetrics.generate_latest(self._t.registry)
            content_type = openmetrics.CONTENT_TYPE_LATEST
        else:
            body = exposition.generate_latest(self._t.registry)
            content_type = exposition.CONTENT_TYPE_LATEST
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, reason = self._ready()
        return web.Response(text=f"{reason}\n", status=200 if ready else 503)
