"""End to end: hallucinated traffic pages through real Alertmanager, and real Prometheus
reaches the same verdict with the shipped rules.

Real components: Prometheus (Debian `prometheus`, scraping the monitor's /metrics every
second and evaluating deploy/prometheus/rules.yml unchanged), Alertmanager (Debian
`prometheus-alertmanager`, delivering to a webhook receiver started by the test), and the
monitor itself (the `Service` the CLI runs, built from deploy/monitor.yaml's
`hallucination_rate` rule, with the embedded `local_groundedness` evaluator). Records are
fed into the service in-process, as a receiver would. The only test double is the choice
of the evaluator's pass mark (see `separating_threshold`).
"""

from __future__ import annotations

import asyncio
import secrets
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.config import Config
from monitor.evaluators.base import BuildContext, EvaluatorSpec, build
from monitor.records import RagRecord, parse_record
from monitor.service import Service
from tests._alerting import DEPLOY, alertmanager, free_port, http_json, need, prometheus, webhook

pytestmark = pytest.mark.asyncio

CONTEXT = (
    "The Eiffel Tower was completed in 1889 as the entrance arch of the World's Fair in Paris. "
    "It is 330 metres tall and was designed by the engineering company of Gustave Eiffel."
)
QUESTION = "When was the Eiffel Tower completed and who designed it?"
GOOD = "The Eiffel Tower was completed in 1889 and was designed by the company of Gustave Eiffel."
BAD = "It was built by the Romans in 45 BC and is painted bright green every winter by volunteers."


def record(answer: str, fed: list[str]) -> RagRecord:
    trace_id = secrets.token_hex(16)
    fed.append(trace_id)
    return parse_record(
        {
            "request_id": trace_id,
            "trace_id": trace_id,
            "span_id": secrets.token_hex(8),
            "service": "shop",
            "route": "/ask",
            "request": QUESTION,
            "retrieved_context": [{"content": CONTEXT, "doc_uri": "kb://eiffel"}],
            "response": answer,
        }
    )


async def separating_threshold() -> float:
    """A `threshold` that makes GOOD pass and BAD fail with the embedded evaluator.

    This test is about alerting, not detector quality, so it places the pass mark between
    the two answers' scores (the detector's own tests judge its accuracy)."""
    evaluator = build(EvaluatorSpec(name="local_groundedness"), BuildContext())
    good, bad = [
        (await evaluator.evaluate(record(answer, []))).normalized for answer in (GOOD, BAD)
    ]
    assert good is not None and bad is not None and good > bad, (good, bad)
    return (good + bad) / 2


def monitor_config(metrics_port: int, am_url: str, threshold: float) -> Config:
    shipped = yaml.safe_load((DEPLOY / "monitor.yaml").read_text())
    rule = next(r for r in shipped["alerts"]["rules"] if r["name"] == "hallucination_rate")
    return Config.model_validate(
        {
            "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
            "exporters": {"prometheus": {"endpoint": f"127.0.0.1:{metrics_port}"}},
            "evaluators": [{"name": "local_groundedness", "threshold": threshold}],
            "alerts": {
                "rules": [rule],
                "alertmanager": {"url": am_url},
                "evaluation_interval_s": 0.5,
            },
        }
    )


def prometheus_config(metrics_port: int, am_url: str) -> str:
    return yaml.safe_dump(
        {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(DEPLOY / "prometheus/rules.yml")],
            "alerting": {
                "alertmanagers": [{"static_configs": [{"targets": [am_url.split("//")[1]]}]}]
            },
            "scrape_configs": [
                {
                    "job_name": "rag-monitor",
                    "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
                }
            ],
        }
    )


async def poll(check: Callable[[], Any], within_s: float, what: str) -> Any:
    """Poll a blocking check (HTTP to another process) off the event loop."""
    deadline = time.monotonic() + within_s
    last: Any = None
    while time.monotonic() < deadline:
        last = await asyncio.to_thread(check)
        if last:
            return last
        await asyncio.sleep(0.25)
    raise AssertionError(f"timed out after {within_s}s waiting for {what}; last: {last!r}")


def query(prom: str, expr: str) -> list[dict[str, Any]]:
    result = http_json(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    return list(result["data"]["result"])


def prometheus_alerts(prom: str, name: str) -> list[dict[str, Any]]:
    alerts = http_json(f"{prom}/api/v1/alerts")["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == name and a["state"] == "firing"]


def openmetrics(url: str) -> str:
    req = urllib.request.Request(
        url, headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        return str(resp.read().decode())


async def feed(service: Service, answer: str, n: int, fed: list[str]) -> None:
    for _ in range(n):
        await service.stage.put(record(answer, fed), "test")


async def drained(service: Service, total: int) -> None:
    for _ in range(2400):
        if service.stage.completed >= total:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"only {service.stage.completed} of {total} records evaluated in 120s")


async def test_hallucinations_page_through_alertmanager_and_prometheus_agrees(
    tmp_path: Path,
) -> None:
    need("prometheus")
    need("prometheus-alertmanager")
    metrics_port = free_port()
    fed: list[str] = []
    with webhook() as hook, alertmanager(tmp_path, hook.url) as am:
        threshold = await separating_threshold()
        service = Service(monitor_config(metrics_port, am, threshold), with_receivers=False)
        await service.start()
        try:
            with prometheus(
                tmp_path, prometheus_config(metrics_port, am), "--enable-feature=exemplar-storage"
            ) as prom:
                # One verdict of each kind first, so Prometheus sees both series start small.
                await feed(service, GOOD, 1, fed)
                await feed(service, BAD, 1, fed)
                await poll(
                    lambda: (
                        len(query(prom, 'rag_monitor_evaluations_total{outcome=~"pass|fail"}')) == 2
                    ),
                    30,
                    "first scrape of both outcomes",
                )
                # Far above 10 % but only 2 samples: nobody is paged.
                assert not prometheus_alerts(prom, "RagHallucinationRateHigh")

                await feed(service, BAD, 40, fed)
                await drained(service, 42)

                # The fail counter carries a fed trace id as an OpenMetrics exemplar.
                text = await asyncio.to_thread(
                    openmetrics, f"http://127.0.0.1:{metrics_port}/metrics"
                )
                fail_lines = [
                    line
                    for line in text.splitlines()
                    if line.startswith("rag_monitor_evaluations_total{")
                    and 'outcome="fail"' in line
                ]
                assert fail_lines and all(' # {trace_id="' in line for line in fail_lines)
                assert fail_lines[0].split('trace_id="')[1].split('"')[0] in fed

                # The sidecar's alert reaches the webhook through Alertmanager.
                def sidecar(status: str) -> list[dict[str, Any]]:
                    return [
                        a
                        for a in hook.alerts()
                        if a["labels"].get("alertname") == "hallucination_rate"
                        and a["status"] == status
                    ]

                (firing, *_) = await poll(
                    lambda: sidecar("firing"), 60, "sidecar alert at the webhook"
                )
                assert firing["labels"]["service"] == "shop"
                assert firing["labels"]["generator"] == "rag-monitor"
                assert firing["labels"]["severity"] == "warning"
                assert firing["generatorURL"].endswith(f":{metrics_port}/metrics")

                # Prometheus, with the shipped rules over the scraped counters, says the same.
                (prom_alert, *_) = await poll(
                    lambda: prometheus_alerts(prom, "RagHallucinationRateHigh"),
                    60,
                    "Prometheus alert",
                )
                assert prom_alert["labels"]["service"] == "shop"
                assert prom_alert["labels"]["evaluator"] == "local_groundedness"
                await poll(
                    lambda: [
                        a
                        for a in hook.alerts()
                        if a["labels"]["alertname"] == "RagHallucinationRateHigh"
                    ],
                    60,
                    "Prometheus alert at the webhook",
                )
                # The exemplar made it into Prometheus too (what Grafana links to traces).
                now = time.time()
                exemplars = await asyncio.to_thread(
                    http_json,
                    f"{prom}/api/v1/query_exemplars?"
                    + urllib.parse.urlencode(
                        {
                            "query": 'rag_monitor_evaluations_total{outcome="fail"}',
                            "start": now - 300,
                            "end": now + 5,
                        }
                    ),
                )
                ids = {e["labels"]["trace_id"] for s in exemplars["data"] for e in s["exemplars"]}
                assert ids and ids <= set(fed)

                # Good traffic: the rate falls, the upper bounds drop below 10 %, both resolve.
                for _ in range(8):
                    await feed(service, GOOD, 100, fed)
                    await asyncio.sleep(0.5)
                await drained(service, 842)
                (resolved, *_) = await poll(
                    lambda: sidecar("resolved"), 60, "sidecar resolution at the webhook"
                )
                assert resolved["labels"] == firing["labels"]
                await poll(
                    lambda: not prometheus_alerts(prom, "RagHallucinationRateHigh"),
                    60,
                    "Prometheus alert resolving",
                )
                (rate,) = await asyncio.to_thread(
                    query, prom, 'rag_monitor:evaluation_defect_rate:ratio10m{service="shop"}'
                )
                sidecar_rate = service.telemetry.registry.get_sample_value(
                    "rag_monitor_defect_rate", {"service": "shop", "rule": "hallucination_rate"}
                )
                assert sidecar_rate == pytest.approx(41 / 842)
                assert float(rate["value"][1]) == pytest.approx(sidecar_rate, abs=0.02)
        finally:
            await service.shutdown(5)
