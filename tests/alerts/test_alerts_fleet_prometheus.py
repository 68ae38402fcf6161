"""The fleet reader's good path against a real Prometheus: two replicas' verdict counters,
scraped every second, read back through Prometheus's query API with a selector; what the
replicas count after the first read reaches the rule once, summed over the fleet. The bad
answers are `test_alerts_fleet_reader.py`'s."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from harness.rag_service import scrape_config
from harness.servers import http_json, need, prometheus
from harness.wait import wait_until
from monitor.alerts.fleet import FleetReader
from monitor.config import AlertBaseline, AlertFleet, RegressionRule
from monitor.telemetry import create_telemetry

RULE = RegressionRule(name="regression", evaluator="local_groundedness", baseline=AlertBaseline())


class Replica:
    """A replica's `rag_monitor_evaluations_total`, served on a port of its own, with its
    evaluator's `revision` (`rag_monitor_evaluator_revision_info`; None: an older release
    without it)."""

    def __init__(self, revision: str | None = None) -> None:
        self.registry = CollectorRegistry()
        if revision is not None:
            Gauge(
                "rag_monitor_evaluator_revision_info",
                "revision",
                ("evaluator", "revision"),
                registry=self.registry,
            ).labels("local_groundedness", revision).set(1)
        self.verdicts = Counter(
            "rag_monitor_evaluations",
            "verdicts",
            ("service", "version", "route", "evaluator", "outcome"),
            registry=self.registry,
        )
        registry = self.registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = generate_latest(registry)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, passes: int, fails: int) -> None:
        for outcome, n in (("pass", passes), ("fail", fails)):
            self.verdicts.labels("shop", "1.0", "/ask", "local_groundedness", outcome).inc(n)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def replicas(*revisions: str | None) -> Iterator[list[Replica]]:
    running = [Replica(revision) for revision in revisions]
    try:
        yield running
    finally:
        for replica in running:
            replica.close()


def test_the_fleet_counts_reach_the_rule_once_through_a_real_prometheus(tmp_path: Path) -> None:
    need("prometheus")
    with (
        replicas("r1", None) as (a, b),
        prometheus(tmp_path, scrape_config([a.port, b.port])) as prom,
    ):
        a.count(100, 10)
        b.count(50, 5)

        def scraped() -> bool:
            query = f"{prom}/api/v1/query?query=count(rag_monitor_evaluations_total)"
            result = http_json(query)["data"]["result"]
            return bool(result) and result[0]["value"][1] == "4"

        wait_until(scraped, 60, "Prometheus to scrape both replicas")
        config = AlertFleet(prometheus_url=prom, selector='job="rag-monitor"')
        telemetry = create_telemetry()
        reader = FleetReader(config, [RULE], telemetry)
        got: list[tuple[str, str, str, list[float], str | None]] = []

        async def read_until(total: list[float]) -> None:
            async with aiohttp.ClientSession() as session:
                await reader.read_once(session, lambda *call: got.append(call))
                assert got == []  # the first read learns where the counters stand
                a.count(7, 3)
                b.count(2, 1)
                for _ in range(600):
                    await reader.read_once(session, lambda *call: got.append(call))
                    summed = [
                        sum(h[0] for _, _, _, h, _ in got),
                        sum(h[1] for _, _, _, h, _ in got),
                    ]
                    if summed == total:
                        return
                    await asyncio.sleep(0.1)

        asyncio.run(read_until([9.0, 4.0]))
        assert {(rule, service, cohort) for rule, service, cohort, *_ in got} == {
            ("regression", "shop", "")
        }
        # a's counters joined with its revision; b (no revision exported) counted without.
        by_revision = {r: [0.0, 0.0] for *_, r in got}
        for _, _, _, h, r in got:
            by_revision[r] = [by_revision[r][0] + h[0], by_revision[r][1] + h[1]]
        assert by_revision == {"r1": [7.0, 3.0], None: [2.0, 1.0]}
        assert [sum(h[0] for _, _, _, h, _ in got), sum(h[1] for _, _, _, h, _ in got)] == [
            9.0,
            4.0,
        ]
        ok = telemetry.registry.get_sample_value(
            "rag_monitor_alert_fleet_reads_total", {"outcome": "ok"}
        )
        assert ok is not None and ok >= 2
        assert reader.stale() is None
