"""A canary through the whole pipeline: one service runs two versions at once, each sending
its traces through the OpenTelemetry SDK with its own `service.version` resource attribute
over OTLP/HTTP to the monitor's real receiver, trace stage and embedded
`local_groundedness`. The cohort rule of the issue (`cohorts: {by: version}`, every other
key at its default) judges both versions, stays quiet while they hallucinate at the same
share (evenly spread: the same counts), and pages a webhook naming version `v2` alone when
every v2 answer is hallucinated.

The alert engine reads an injected clock (the traffic of a 30-minute window is sent in
seconds); every other component is the one `rag-monitor run` builds, and every check waits
on a condition.

This test is wiring. How soon a version's smaller rise (x2.5) pages against the rest, and
that versions of the same rate page nothing, is judged on simulated time over seeded runs:
the scorecard's `sidecar tests` row (`harness/simulated_sidecar_tests.py`,
`tests/alerts/test_scorecard.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from harness.rag_service import Service
from harness.servers import webhook
from harness.wait import wait_until_async
from monitor.alerts import AlertEngine
from monitor.config import Config, load_config
from monitor.exporters.alertmanager import AlertSender
from monitor.service import Service as Monitor
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock

pytestmark = pytest.mark.e2e

RULE = """
alerts:
  rules:
    - name: hallucination_canary
      evaluator: local_groundedness
      cohorts: {by: version}
      severity: page
"""
HEALTHY_SHARE = 0.2
# Per phase: past min_samples (100) on each side.
PER_VERSION = 120


async def test_a_worse_version_pages_for_its_cohort_only(tmp_path: Path) -> None:
    path = tmp_path / "rule.yaml"
    path.write_text(RULE)
    rules = load_config(path, environ={}).alerts.rules
    config = Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"endpoint": "127.0.0.1:0"}}
            },
            "evaluators": [{"name": "local_groundedness"}],
            "pipeline": {"processes": 0},
        }
    )
    clock = Clock()
    with webhook() as hook:
        telemetry = create_telemetry()
        sender = AlertSender(telemetry, webhooks=[(hook.url, {})])
        engine = AlertEngine(rules, telemetry, [sender], evaluation_interval_s=1.0, clock=clock)
        monitor = Monitor(config, telemetry=telemetry, serve_http=False, extra_sinks=[engine])
        await monitor.start()
        try:
            port = monitor.receivers[0].http.port  # type: ignore[attr-defined]
            stable, canary = Service(port, "v1"), Service(port, "v2")

            def send(share_stable: float, share_canary: float) -> None:
                stable.send(PER_VERSION, share_stable)
                canary.send(PER_VERSION, share_canary)
                assert stable.provider.force_flush() and canary.provider.force_flush()

            def samples(cohort: str) -> float:
                value = telemetry.registry.get_sample_value(
                    "rag_monitor_alert_cohort_samples",
                    {"service": "shop", "rule": "hallucination_canary", "cohort": cohort},
                )
                return value or 0.0

            def firing(cohort: str) -> float | None:
                return telemetry.registry.get_sample_value(
                    "rag_monitor_alert_firing",
                    {
                        "service": "shop",
                        "rule": "hallucination_canary",
                        "severity": "page",
                        "cohort": cohort,
                    },
                )

            async def judged(done: Callable[[], bool], what: str) -> None:
                await wait_until_async(done, 120, what)

            # Both versions at the same hallucinated share: judged, and quiet.
            send(HEALTHY_SHARE, HEALTHY_SHARE)
            await judged(
                lambda: samples("v1") >= PER_VERSION and samples("v2") >= PER_VERSION,
                "both versions' verdicts in their windows",
            )
            await judged(lambda: firing("v2") is not None, "an evaluation of both cohorts")
            assert (firing("v1"), firing("v2")) == (0, 0)
            assert hook.alerts() == []

            # A new window: every v2 answer hallucinated, v1's share as it was.
            clock.now += 31 * 60
            send(HEALTHY_SHARE, 1.0)
            await judged(lambda: bool(hook.alerts()), "a page")
            await judged(
                lambda: samples("v1") >= PER_VERSION and samples("v2") >= PER_VERSION,
                "the second phase's verdicts in their windows",
            )
            assert firing("v2") == 1 and firing("v1") == 0
            page = hook.alerts()[0]
            assert page["status"] == "firing"
            assert page["labels"]["alertname"] == "hallucination_canary"
            assert (page["labels"]["service"], page["labels"]["cohort"]) == ("shop", "v2")
            assert "for version v2 against 0.2" in page["annotations"]["description"]
            assert float(page["annotations"]["p_value"]) <= 1e-5
            assert {a["labels"]["cohort"] for a in hook.alerts()} == {"v2"}
            stable.close()
            canary.close()
        finally:
            await monitor.shutdown(10)


def test_rule_of_the_issue_loads_with_its_defaults(tmp_path: Path) -> None:
    path = tmp_path / "rule.yaml"
    path.write_text(RULE)
    (rule,) = load_config(path, environ={}).alerts.rules
    dumped = yaml.safe_load(yaml.safe_dump(rule.model_dump()))
    assert dumped["cohorts"] == {"by": "version"}
    assert (dumped["window"], dumped["min_samples"], dumped["min_increase"]) == ("30m", 100, 0.03)
