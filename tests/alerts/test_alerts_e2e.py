"""End to end: hallucinated traffic pages through real Alertmanager, and real Prometheus
reaches the same verdict with the shipped rules.

Real components: Prometheus (Debian `prometheus`, scraping the monitor's /metrics every
second and evaluating deploy/prometheus/rules.yml unchanged), Alertmanager (Debian
`prometheus-alertmanager`, delivering to a webhook receiver started by the test), and the
monitor itself (`rag-monitor run --config tmp.yaml` in a subprocess, with
deploy/monitor.yaml's `hallucination_rate` rule and the embedded `local_groundedness`
evaluator), fed RAG traces by the OpenTelemetry SDK over OTLP/HTTP. The absolute rule and
its Prometheus mirror `RagHallucinationRateHigh` ship commented out (a healthy service's
rate is the detector's bias, not a known number); the test runs them uncommented, as a
user who knows the rate would. The only thing the test picks is the evaluator's pass mark
(see `separating_threshold`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from harness.deploy_examples import uncommented
from harness.otlp import asked
from harness.servers import (
    DEPLOY,
    MonitorPorts,
    alertmanager,
    http_json,
    need,
    prometheus,
    rag_monitor,
    start_on_a_port,
    webhook,
)
from harness.wait import wait_until
from monitor.config import EvaluatorConfig
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.records import parse_record

CONTEXT = (
    "The Eiffel Tower was completed in 1889 as the entrance arch of the World's Fair in Paris. "
    "It is 330 metres tall and was designed by the engineering company of Gustave Eiffel."
)
QUESTION = "When was the Eiffel Tower completed and who designed it?"
GOOD = "The Eiffel Tower was completed in 1889 and was designed by the company of Gustave Eiffel."
BAD = "It was built by the Romans in 45 BC and is painted bright green every winter by volunteers."


def separating_threshold() -> float:
    """A `threshold` that makes GOOD pass and BAD fail with the embedded evaluator.

    This test is about alerting, not detector quality, so it places the pass mark between
    the two answers' scores (the detector's own tests judge its accuracy)."""
    evaluator = build(EvaluatorConfig(name="local_groundedness"), BuildContext())

    def score(answer: str) -> float | None:
        rec = parse_record(
            {"request": QUESTION, "retrieved_context": [{"content": CONTEXT}], "response": answer}
        )
        return asyncio.run(evaluator.evaluate(rec)).normalized

    good, bad = score(GOOD), score(BAD)
    assert good is not None and bad is not None and good > bad, (good, bad)
    return (good + bad) / 2


class App:
    """The RAG service: one OpenInference-shaped trace per request, sent by the OTel SDK."""

    def __init__(self, otlp_http_port: int) -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{otlp_http_port}/v1/traces")
        self.provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=8192))
        self.tracer = self.provider.get_tracer("shop")
        self.trace_ids: list[str] = []

    def requests(self, answer: str, n: int) -> None:
        for _ in range(n):
            # Each a user's own wording: the same question over and over is one piece of
            # evidence to the rules.
            question = asked(QUESTION, len(self.trace_ids))
            with self.tracer.start_as_current_span(
                "rag.request",
                attributes={
                    "openinference.span.kind": "CHAIN",
                    "http.route": "/ask",
                    "input.value": question,
                },
            ) as root:
                with self.tracer.start_as_current_span(
                    "retrieve",
                    attributes={
                        "openinference.span.kind": "RETRIEVER",
                        "input.value": question,
                        "retrieval.documents.0.document.id": "kb/eiffel.md",
                        "retrieval.documents.0.document.content": CONTEXT,
                    },
                ):
                    pass
                with self.tracer.start_as_current_span(
                    "generate",
                    attributes={
                        "openinference.span.kind": "LLM",
                        "input.value": question,
                        "output.value": answer,
                    },
                ):
                    pass
                root.set_attribute("output.value", answer)
                self.trace_ids.append(f"{root.get_span_context().trace_id:032x}")
        assert self.provider.force_flush()

    def close(self) -> None:
        self.provider.shutdown()


def monitor_config(path: Path, ports: dict[str, int], am_url: str, threshold: float) -> None:
    text = uncommented((DEPLOY / "monitor.yaml").read_text(), "# - name: hallucination_rate")
    shipped = yaml.safe_load(text)
    rule = next(r for r in shipped["alerts"]["rules"] if r["name"] == "hallucination_rate")
    config = {
        "receivers": {
            "otlp": {
                "grpc": {"enabled": False},
                "http": {"endpoint": f"127.0.0.1:{ports['otlp']}"},
            }
        },
        "trace_assembly": {"idle_timeout_s": 30},
        "exporters": {"prometheus": {"endpoint": f"127.0.0.1:{ports['metrics']}"}},
        "evaluators": [{"name": "local_groundedness", "threshold": threshold}],
        "alerts": {"rules": [rule], "alertmanager": {"url": am_url}, "evaluation_interval_s": 0.5},
    }
    path.write_text(yaml.safe_dump(config))


def prometheus_config(tmp: Path, metrics_port: int, am_url: str) -> str:
    rules = tmp / "rules.yml"
    shipped = (DEPLOY / "prometheus/rules.yml").read_text()
    rules.write_text(uncommented(shipped, "# - alert: RagHallucinationRateHigh"))
    return yaml.safe_dump(
        {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
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


def poll(check: Callable[[], Any], within_s: float, what: str) -> Any:
    return wait_until(check, within_s, what, interval_s=0.25)


def query(prom: str, expr: str) -> list[dict[str, Any]]:
    result = http_json(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    return list(result["data"]["result"])


def prometheus_alerts(prom: str, name: str) -> list[dict[str, Any]]:
    alerts = http_json(f"{prom}/api/v1/alerts")["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == name and a["state"] == "firing"]


def scrape(port: int, openmetrics: bool = False) -> str:
    accept = "application/openmetrics-text; version=1.0.0" if openmetrics else "text/plain"
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=5) as resp:
        if openmetrics:
            assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        return str(resp.read().decode())


def sample(text: str, prefix: str, *needles: str) -> float:
    """Sum of the samples whose line starts with `prefix` and contains every needle."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(prefix) and all(n in line for n in needles):
            total += float(line.split("}")[1].split()[0])
    return total


def evaluated(port: int) -> float:
    return sample(scrape(port), "rag_monitor_evaluations_total{", 'evaluator="local_groundedness"')


def test_hallucinations_page_through_alertmanager_and_prometheus_agrees(tmp_path: Path) -> None:
    need("prometheus")
    need("prometheus-alertmanager")
    # The OTLP port is chosen by the monitor; the metrics port is fixed in the config, since
    # the alert's generatorURL is built from the configured endpoint (checked below): one
    # the kernel hands out as unused, another if a process takes it first.
    config = tmp_path / "tmp.yaml"
    with (
        webhook() as hook,
        alertmanager(tmp_path, hook.url) as am,
        contextlib.ExitStack() as stack,
    ):

        def started(metrics_port: int) -> tuple[dict[str, int], MonitorPorts]:
            ports = {"metrics": metrics_port, "otlp": 0}
            monitor_config(config, ports, am, separating_threshold())
            return ports, stack.enter_context(rag_monitor(tmp_path, config, metrics_port))

        ports, bound = start_on_a_port(started)
        with (
            prometheus(
                tmp_path,
                prometheus_config(tmp_path, ports["metrics"], am),
                "--enable-feature=exemplar-storage",
            ) as prom,
        ):
            assert bound.http is not None
            app = App(bound.http)
            try:
                _scenario(app, hook, prom, ports["metrics"])
            finally:
                app.close()


def _scenario(app: App, hook: Any, prom: str, metrics_port: int) -> None:
    # One verdict of each kind first, so Prometheus sees both series start small.
    app.requests(GOOD, 1)
    app.requests(BAD, 1)
    poll(lambda: evaluated(metrics_port) == 2, 60, "the first two evaluations")
    poll(
        lambda: len(query(prom, 'rag_monitor_evaluations_total{outcome=~"pass|fail"}')) == 2,
        30,
        "first scrape of both outcomes",
    )
    # Far above the threshold but only 2 samples: nobody is paged.
    assert not prometheus_alerts(prom, "RagHallucinationRateHigh")

    app.requests(BAD, 40)
    poll(lambda: evaluated(metrics_port) == 42, 60, "42 evaluations")

    # The fail counter carries a fed trace id as an OpenMetrics exemplar.
    fail_lines = [
        line
        for line in scrape(metrics_port, openmetrics=True).splitlines()
        if line.startswith("rag_monitor_evaluations_total{") and 'outcome="fail"' in line
    ]
    assert fail_lines and all(' # {trace_id="' in line for line in fail_lines)
    assert fail_lines[0].split('trace_id="')[1].split('"')[0] in app.trace_ids[1:]

    # The sidecar's alert reaches the webhook through Alertmanager.
    def sidecar(status: str) -> list[dict[str, Any]]:
        return [
            a
            for a in hook.alerts()
            if a["labels"].get("alertname") == "hallucination_rate" and a["status"] == status
        ]

    (firing, *_) = poll(lambda: sidecar("firing"), 60, "sidecar alert at the webhook")
    assert firing["labels"]["service"] == "shop"
    assert firing["labels"]["generator"] == "rag-monitor"
    assert firing["labels"]["severity"] == "page"  # deploy/monitor.yaml's
    assert firing["generatorURL"].endswith(f":{metrics_port}/metrics")

    # Prometheus, with the shipped rules over the scraped counters, says the same.
    (prom_alert, *_) = poll(
        lambda: prometheus_alerts(prom, "RagHallucinationRateHigh"), 60, "Prometheus alert"
    )
    assert prom_alert["labels"]["service"] == "shop"
    assert prom_alert["labels"]["evaluator"] == "local_groundedness"
    poll(
        lambda: [
            a for a in hook.alerts() if a["labels"]["alertname"] == "RagHallucinationRateHigh"
        ],
        60,
        "Prometheus alert at the webhook",
    )
    # The exemplar made it into Prometheus too (what Grafana links to traces).
    now = time.time()
    exemplars = http_json(
        f"{prom}/api/v1/query_exemplars?"
        + urllib.parse.urlencode(
            {
                "query": 'rag_monitor_evaluations_total{outcome="fail"}',
                "start": now - 300,
                "end": now + 5,
            }
        )
    )
    ids = {e["labels"]["trace_id"] for s in exemplars["data"] for e in s["exemplars"]}
    assert ids and ids <= set(app.trace_ids)

    # Good traffic: the rate falls, the upper bounds drop below it (the sidecar, judging
    # every 0.5 s, takes each look at a stricter level than Prometheus, every minute, for
    # the same budget; 41 of 442 is far under 0.5 at either level), both resolve.
    for _ in range(4):
        app.requests(GOOD, 100)
        time.sleep(0.5)
    poll(lambda: evaluated(metrics_port) == 442, 120, "442 evaluations")
    (resolved, *_) = poll(lambda: sidecar("resolved"), 60, "sidecar resolution at the webhook")
    assert resolved["labels"] == firing["labels"]
    poll(
        lambda: not prometheus_alerts(prom, "RagHallucinationRateHigh"),
        60,
        "Prometheus alert resolving",
    )

    errors = sample(scrape(metrics_port), "rag_monitor_evaluations_total{", 'outcome="error"')
    assert errors == 0, "evaluation errors are not samples and would skew the expected rate"

    # The gauge moves on the engine's evaluation tick, so it catches up shortly after.
    def sidecar_rate_now() -> float:
        return sample(scrape(metrics_port), "rag_monitor_defect_rate{", 'rule="hallucination_rate"')

    poll(lambda: sidecar_rate_now() == pytest.approx(41 / 442), 30, "sidecar rate of 41/442")
    sidecar_rate = sidecar_rate_now()

    # Once Prometheus has scraped everything, its fleet-wide rate is the sidecar's rate.
    def prometheus_rate() -> float:
        (rate,) = query(prom, 'rag_monitor:evaluation_defect_rate:ratio10m{service="shop"}')
        return float(rate["value"][1])

    poll(
        lambda: abs(prometheus_rate() - sidecar_rate) < 0.01,
        30,
        "Prometheus rate to match the sidecar's",
    )
