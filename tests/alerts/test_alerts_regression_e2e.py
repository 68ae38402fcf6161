"""End to end: a real `rag-monitor run` judges a regression rule on default settings and
its page reaches real Alertmanager with the labels and the description it states.

The monitor runs as a process with a regression rule on the embedded `local_groundedness`
(its default threshold: nothing tuned), the windows shortened to 30 s current and 3 min
baseline and every other setting at its default (min_samples 100 and 500, min_increase
0.03, one false page per 90d, the sequential test, evaluation every 15 s). A RAG service sends
OpenInference-shaped traces through the OpenTelemetry SDK over OTLP/HTTP at a steady `PER_S`
requests a second (harness/rag_service.py). A separate process cannot take an injected
clock, so the traffic itself is paced in real time; every check waits on a condition (the
rule's sample gauges, the webhook), none sleeps for a window.

This test is wiring: once the rule can judge, every answer is hallucinated, which pages at
the next evaluation in every run. What it asserted in real time before (a steady share is
quiet; a x2.5 rise pages soon) is judged on simulated time over seeded runs with this
rule and stream: the scorecard's `sidecar tests` row (`harness/simulated_sidecar_tests.py`,
`tests/alerts/test_scorecard.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.rag_service import Service, metric, write_config
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

    # Steady share until the rule can judge (both windows hold min_samples): the level it
    # learned is the share.
    service.traffic(
        HEALTHY_SHARE, lambda: samples("baseline") >= 500 and samples("current") >= 100, 300
    )
    baseline = metric(port, "rag_monitor_defect_rate_baseline", f'rule="{RULE}"')
    assert baseline is not None and abs(baseline - HEALTHY_SHARE) < 0.05

    # Every answer hallucinated: paged through Alertmanager.
    service.traffic(1.0, lambda: bool(pages()), 180)
    (page, *_) = pages()
    assert page["status"] == "firing"
    assert page["labels"]["service"] == "shop"
    assert page["labels"]["severity"] == "page"
    description = page["annotations"]["description"]
    assert description.startswith("defect rate ")
    assert float(description.split()[2]) > 0.5, description
    # The default test is sequential: the description names its evidence, not the window.
    assert "verdicts against 0.2" in description
    assert "expected from the previous 3m (" in description
    assert description.endswith("(sequential test, one false page per 90d)")
    assert float(page["annotations"]["increase"]) >= 0.03
    assert float(page["annotations"]["p_value"]) <= 1e-5
