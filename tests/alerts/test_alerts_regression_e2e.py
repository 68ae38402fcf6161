"""End to end: a real `rag-monitor run` stays quiet on a steady hallucinated share and
pages through real Alertmanager when that share rises 2.5x.

The monitor runs as a process with a regression rule on the embedded `local_groundedness`
(its default threshold: nothing tuned), the windows shortened to 30 s current and 3 min
baseline and every other setting at its default (min_samples 100 and 500, min_increase
0.03, one false page per 90d, the sequential test, evaluation every 15 s). A RAG service sends
OpenInference-shaped
traces through the OpenTelemetry SDK over OTLP/HTTP at a steady `PER_S` requests a second
(harness/rag_service.py). A separate process cannot take an injected clock, so the traffic
itself is paced in real time; every check waits on a condition (the rule's sample gauges,
the webhook), none sleeps for a window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.rag_service import PER_S, Service, metric, write_config
from harness.servers import alertmanager, need, rag_monitor, webhook

# A real `rag-monitor run` and Alertmanager: wiring, whatever the file costs.
pytestmark = pytest.mark.e2e

RULE = "hallucination_regression"
HEALTHY_SHARE = 0.2


def test_steady_share_is_quiet_and_a_rise_pages_through_alertmanager(tmp_path: Path) -> None:
    need("prometheus-alertmanager")
    config = tmp_path / "monitor.yaml"
    with webhook() as hook, alertmanager(tmp_path, hook.url) as am:
        write_config(
            config,
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
        with rag_monitor(tmp_path, config) as ports:
            assert ports.http is not None
            service = Service(ports.http)
            try:
                _scenario(service, hook, ports.metrics)
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
    # The default test is sequential: the description names its evidence, not the window.
    assert "verdicts against 0.2" in description
    assert "expected from the previous 3m (" in description
    assert description.endswith("(sequential test, one false page per 90d)")
    assert float(page["annotations"]["increase"]) >= 0.03
    assert float(page["annotations"]["p_value"]) <= 1e-5
