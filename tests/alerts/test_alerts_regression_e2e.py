"""End to end: a real `rag-monitor run` stays quiet on a steady hallucinated share and
pages through real Alertmanager when that share rises 2.5x.

The monitor runs as a process with a regression rule on the embedded `local_groundedness`
(its default threshold: nothing tuned), the windows shortened to 30 s current and 3 min
baseline and every other setting at its default (min_samples 100 and 500, min_increase
0.03, confidence 0.99999, evaluation every 15 s). A RAG service sends OpenInference-shaped
traces through the OpenTelemetry SDK over OTLP/HTTP at a steady 10 requests/s, answers
drawn from the generated set in tests/_rag_answers.py. A separate process cannot take an
injected clock, so the traffic itself is paced in real time; every check waits on a
condition (the rule's sample gauges, the webhook), none sleeps for a window.
"""

from __future__ import annotations

import math
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests._rag_answers import Answer, answers
from tests._servers import alertmanager, free_port, need, rag_monitor, webhook
from tests._wait import wait_until

RULE = "hallucination_regression"
PER_S = 10
HEALTHY_SHARE = 0.2


class Service:
    """The RAG service: one trace per request (root, retriever, LLM spans) via the SDK."""

    def __init__(self, otlp_http_port: int) -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{otlp_http_port}/v1/traces")
        self.provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=8192))
        self.tracer = self.provider.get_tracer("shop")
        pool = answers()
        self.faithful = [a for a in pool if not a.hallucinated]
        self.hallucinated = [a for a in pool if a.hallucinated]
        self.sent = 0

    def request(self, item: Answer) -> None:
        with self.tracer.start_as_current_span(
            "rag.request",
            attributes={
                "openinference.span.kind": "CHAIN",
                "http.route": "/ask",
                "input.value": item.question,
            },
        ) as root:
            documents: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
            for i, text in enumerate(item.context):
                documents[f"retrieval.documents.{i}.document.id"] = f"kb/{i}.md"
                documents[f"retrieval.documents.{i}.document.content"] = text
            with self.tracer.start_as_current_span(
                "retrieve", attributes={**documents, "input.value": item.question}
            ):
                pass
            with self.tracer.start_as_current_span(
                "generate",
                attributes={
                    "openinference.span.kind": "LLM",
                    "input.value": item.question,
                    "output.value": item.answer,
                },
            ):
                pass
            root.set_attribute("output.value", item.answer)

    def traffic(self, share: float, until: Any, within_s: float) -> None:
        """Sends PER_S requests a second, `share` of them hallucinated (evenly spread),
        until `until()` is true; fails after `within_s` seconds."""
        start = time.monotonic()
        tick = start
        while not until():
            assert time.monotonic() - start < within_s, f"not within {within_s} s"
            for _ in range(PER_S // 2):
                n = self.sent
                self.sent += 1
                hallucinated = math.floor((n + 1) * share) > math.floor(n * share)
                pool = self.hallucinated if hallucinated else self.faithful
                self.request(pool[n % len(pool)])
            tick += 0.5  # pacing the traffic, not waiting for a result
            time.sleep(max(0.0, tick - time.monotonic()))

    def close(self) -> None:
        self.provider.shutdown()


def metric(port: int, name: str, *needles: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and all(n in line for n in needles):
            return float(line.rsplit(" ", 1)[1])
    return None


def _write_config(config: Path, ports: dict[str, int], alerts: dict[str, Any]) -> None:
    """The monitor both tests run: OTLP/HTTP in, metrics out, local_groundedness, `alerts`."""
    config.write_text(
        yaml.safe_dump(
            {
                "receivers": {
                    "otlp": {
                        "grpc": {"enabled": False},
                        "http": {"endpoint": f"127.0.0.1:{ports['otlp']}"},
                    }
                },
                "exporters": {"prometheus": {"endpoint": f"127.0.0.1:{ports['metrics']}"}},
                "evaluators": [{"name": "local_groundedness"}],
                "alerts": alerts,
            }
        )
    )


def test_steady_share_is_quiet_and_a_rise_pages_through_alertmanager(tmp_path: Path) -> None:
    need("prometheus-alertmanager")
    ports = {"metrics": free_port(), "otlp": free_port()}
    config = tmp_path / "monitor.yaml"
    with webhook() as hook, alertmanager(tmp_path, hook.url) as am:
        _write_config(
            config,
            ports,
            {
                "alertmanager": {"url": am},
                "rules": [
                    {
                        "name": RULE,
                        "evaluator": "local_groundedness",
                        "window": "30s",
                        "baseline": {"window": "3m"},
                        "severity": "page",
                    }
                ],
            },
        )
        with rag_monitor(tmp_path, config, ports["metrics"]):
            service = Service(ports["otlp"])
            try:
                _scenario(service, hook, ports["metrics"])
            finally:
                service.close()


def _scenario(service: Service, hook: Any, port: int) -> None:
    def samples(window: str) -> float:
        return metric(port, "rag_monitor_alert_samples", f'window="{window}"') or 0.0

    def pages() -> list[dict[str, Any]]:
        return [a for a in hook.alerts() if a["labels"].get("alertname") == RULE]

    # Steady share until the rule can judge (both windows hold min_samples) ...
    service.traffic(
        HEALTHY_SHARE, lambda: samples("baseline") >= 500 and samples("current") >= 100, 300
    )
    # ... and for four more evaluations after that: quiet.
    ready_at = service.sent
    service.traffic(HEALTHY_SHARE, lambda: service.sent >= ready_at + 60 * PER_S, 120)
    assert pages() == []
    assert metric(port, "rag_monitor_alert_firing", f'rule="{RULE}"') == 0
    baseline = metric(port, "rag_monitor_defect_rate_baseline", f'rule="{RULE}"')
    assert baseline is not None and abs(baseline - HEALTHY_SHARE) < 0.05

    # The hallucinated share rises 2.5x: paged through Alertmanager.
    service.traffic(HEALTHY_SHARE * 2.5, lambda: bool(pages()), 180)
    (page, *_) = pages()
    assert page["status"] == "firing"
    assert page["labels"]["service"] == "shop"
    assert page["labels"]["severity"] == "page"
    description = page["annotations"]["description"]
    assert description.startswith("defect rate 0.")
    assert "over 30s against 0.2" in description and "over the previous 3m (" in description
    assert float(page["annotations"]["increase"]) >= 0.03
    assert float(page["annotations"]["p_value"]) <= 1e-5


def test_a_firing_alert_survives_sigterm_and_the_next_process_resolves_it(
    tmp_path: Path,
) -> None:
    """`alerts.state_file` across a graceful restart: SIGTERM sends nothing, the next
    process is firing from its first evaluation and sends the resolve itself."""
    need("prometheus-alertmanager")
    ports = {"metrics": free_port(), "otlp": free_port()}
    config = tmp_path / "monitor.yaml"
    state = tmp_path / "state" / "alerts.state"
    rule = "hallucination_rate"
    with webhook() as hook, alertmanager(tmp_path, hook.url) as am:
        _write_config(
            config,
            ports,
            {
                "alertmanager": {"url": am},
                "state_file": str(state),
                "evaluation_interval_s": 0.5,
                "rules": [
                    {
                        "name": rule,
                        "evaluator": "local_groundedness",
                        "max_defect_rate": 0.1,
                        "min_samples": 10,
                    }
                ],
            },
        )

        def sent(status: str) -> list[dict[str, Any]]:
            return [
                a
                for a in hook.alerts()
                if a["labels"].get("alertname") == rule and a["status"] == status
            ]

        def evaluated() -> float:
            return sum(
                metric(ports["metrics"], "rag_monitor_evaluations_total", f'outcome="{o}"') or 0
                for o in ("pass", "fail")
            )

        with rag_monitor(tmp_path, config, ports["metrics"]):
            service = Service(ports["otlp"])
            try:
                for item in (service.hallucinated * 3)[:30]:
                    service.request(item)
                service.provider.force_flush()
                wait_until(lambda: bool(sent("firing")), 120, "the alert at the webhook")
            finally:
                service.close()
        assert state.exists()
        assert sent("resolved") == []  # SIGTERM resolves nothing

        with rag_monitor(tmp_path, config, ports["metrics"]):
            assert metric(ports["metrics"], "rag_monitor_alert_state_loads_total") == 1
            wait_until(
                lambda: metric(ports["metrics"], "rag_monitor_alert_firing", f'rule="{rule}"') == 1,
                30,
                "the restored alert firing after an evaluation",
            )
            service = Service(ports["otlp"])
            try:
                for item in (service.faithful * 20)[:600]:
                    service.request(item)
                service.provider.force_flush()
                wait_until(lambda: evaluated() == 600, 180, "600 faithful answers evaluated")
                (resolved, *_) = wait_until(lambda: sent("resolved"), 60, "the resolve")
            finally:
                service.close()
        assert resolved["labels"] == sent("firing")[0]["labels"]
