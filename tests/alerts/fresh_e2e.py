"""What the fresh-start end-to-end tests share (`test_alerts_fresh_e2e.py`,
`test_alerts_fresh_changeover_e2e.py`): a freshly started `rag-monitor run` (its embedded
`local_groundedness`, a regression rule on tiny windows, `WIRING_RULE`, judged every
second) fed by a RAG service through the OpenTelemetry SDK over OTLP/HTTP
(harness/rag_service.py), `PER_S` requests a second, each user asking in words of their
own. Pages go to a webhook receiver, as `alerts.webhooks` sends them. The tests are in two
files so that the suite's workers (`--dist loadfile`) run them side by side.

These tests are wiring: the rise they send (every answer hallucinated) pages within
seconds in every run on simulated time, so nothing in them races a statistic. How soon a
fresh start or a changeover pages a rise near the information limit, and that healthy or
bursty traffic pages nothing, is the scorecard's `sidecar tests` row
(`harness/simulated_sidecar_tests.py`, compared by `tests/alerts/test_scorecard.py`).

A separate process cannot take an injected clock, so the traffic is paced in real time and
every check waits on a condition (the sidecar's metrics, the webhook).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.rag_service import Service, metric, paced

RULE = "fresh_regression"
PER_S = 8
HEALTHY_SHARE = 0.2
BASELINE_MIN_SAMPLES = 60
MIN_SAMPLES = 30
# The other evaluator revision: its pass mark above some faithful answers' scores
# (harness/rag_answers.py's faithful answers score 0.82 to 0.90, hallucinated ones at most
# 0.37 with the shipped detector), so it reads the same traffic higher.
STRICTER = 0.83


def rule_config(hook: str, state_file: Path | None = None) -> dict[str, Any]:
    alerts: dict[str, Any] = {
        "webhooks": [{"url": hook}],
        "evaluation_interval_s": 1,
        "rules": [
            {
                "name": RULE,
                "evaluator": "local_groundedness",
                "window": "10s",
                "min_samples": MIN_SAMPLES,
                "baseline": {"window": "1m", "min_samples": BASELINE_MIN_SAMPLES},
                "false_page_every": "1h",
            }
        ],
    }
    if state_file is not None:
        alerts["state_file"] = str(state_file)
    return alerts


class Sidecar:
    """What a test reads of the running monitor on its metrics port."""

    def __init__(self, port: int, hook: Any) -> None:
        self.port = port
        self.hook = hook

    def samples(self, window: str) -> float:
        return metric(self.port, "rag_monitor_alert_samples", f'window="{window}"') or 0.0

    def baseline(self) -> float:
        return metric(self.port, "rag_monitor_defect_rate_baseline", f'rule="{RULE}"') or 0.0

    def pages(self) -> list[dict[str, Any]]:
        return [
            a
            for a in self.hook.alerts()
            if a["labels"].get("alertname") == RULE and a["status"] == "firing"
        ]


def ready(service: Service, sidecar: Sidecar, learned: bool = False) -> None:
    """Healthy traffic until the rule can judge (its window and its level hold their
    min_samples). With `learned`, until the level holds more than min_samples: a fresh
    rule judges against its first min_samples verdicts before, and a changeover translates
    the history's level, not those."""
    least = BASELINE_MIN_SAMPLES + 1 if learned else BASELINE_MIN_SAMPLES
    paced(
        [(service, HEALTHY_SHARE)],
        lambda: sidecar.samples("baseline") >= least and sidecar.samples("current") >= MIN_SAMPLES,
        120,
        PER_S,
    )


def rise_pages(service: Service, sidecar: Sidecar) -> dict[str, Any]:
    """Every answer hallucinated until the page reaches the webhook: the page."""
    paced([(service, 1.0)], lambda: bool(sidecar.pages()), 120, PER_S)
    (page, *_) = sidecar.pages()
    assert page["status"] == "firing"
    # The rise's page: it judged the hallucinated answers against the healthy level.
    assert float(page["annotations"]["defect_rate"]) > 0.5, page["annotations"]
    return dict(page)
