"""One test across the fleet: three `rag-monitor run` replicas share one service's traffic,
a real Prometheus scrapes them all, and every replica judges the fleet's verdicts, read
from Prometheus (`alerts.fleet`), with the same regression rule; a real Alertmanager
delivers to a webhook.

A healthy fleet (a tenth of the answers hallucinated) fills every replica's baseline with
the fleet's verdicts; when every answer on every replica is hallucinated, one alert
reaches the webhook: the replicas page with the same labels, so
Alertmanager sends it once. Each replica alone sees a third of the verdicts; its own
windows hold the fleet's (checked on its /metrics). When the fleet recovers the alert
resolves once, after every replica stopped firing: with `alerts.fleet` no replica sends a
resolve, and the alert ends when none re-sends it.

This test is wiring. That the fleet rule pages nothing on a healthy fleet's verdicts is
judged on simulated time over seeded starts: the scorecard's `sidecar tests` row
(`harness/simulated_sidecar_tests.py`, `tests/alerts/test_scorecard.py`); the fleet's
pages against a single sidecar's on the same traffic are `bench/alert_fleet.py`'s.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from harness.rag_service import (
    FLEET_RULE,
    Service,
    metric,
    scrape_targets_config,
    write_config,
    write_targets,
)
from harness.servers import alertmanager, need, prometheus, rag_monitor, webhook
from harness.wait import Deadline

pytestmark = pytest.mark.e2e

RULE = FLEET_RULE["name"]
REPLICAS = 3
PER_REPLICA_S = 4  # requests a second each replica receives


def replica_config(path: Path, metrics_port: int, prom: str, am: str) -> None:
    fleet = {"prometheus_url": prom, "selector": 'job="rag-monitor"', "query_interval_s": 1}
    alerts = {
        "evaluation_interval_s": 1,
        "alertmanager": {"url": am},
        "fleet": fleet,
        "rules": [FLEET_RULE],
    }
    write_config(path, alerts, metrics_port, processes=0)


def send(services: list[Service], share: float, seconds: float) -> None:
    """`PER_REPLICA_S` requests a second to each replica for `seconds` (pacing the traffic,
    not waiting for a result)."""
    tick = time.monotonic()
    for _ in range(round(seconds)):
        for service in services:
            service.send(PER_REPLICA_S, share)
            service.provider.force_flush()
        tick += 1.0
        time.sleep(max(0.0, tick - time.monotonic()))


def test_three_replicas_page_once_for_a_fleet_wide_rise_and_never_on_a_healthy_fleet(
    tmp_path: Path,
) -> None:
    need("prometheus")
    need("prometheus-alertmanager")
    # Prometheus first (the replicas read the fleet from it), scraping the replicas the
    # targets file names once they have bound their ports.
    targets = tmp_path / "targets.json"
    write_targets(targets, [])
    with (
        webhook() as hook,
        alertmanager(tmp_path, hook.url) as am,
        prometheus(tmp_path, scrape_targets_config(targets)) as prom,
        contextlib.ExitStack() as stack,
    ):
        replicas = []
        for i in range(REPLICAS):
            home = tmp_path / f"replica{i}"
            home.mkdir()
            replica_config(home / "monitor.yaml", 0, prom, am)
            replicas.append(stack.enter_context(rag_monitor(home, home / "monitor.yaml")))
        metrics = [replica.metrics for replica in replicas]
        write_targets(targets, metrics)
        services = [Service(r.http) for r in replicas if r.http is not None]
        for service in services:
            stack.callback(service.close)

        def pages() -> list[dict[str, Any]]:
            return [
                a
                for a in hook.alerts()
                if a["labels"].get("alertname") == RULE and a["status"] == "firing"
            ]

        def resolved() -> list[tuple[dict[str, Any], float]]:
            """Resolved notifications of the rule, with when each arrived."""
            return [
                (a, at)
                for body, at in zip(hook.bodies, hook.received, strict=True)
                for a in body.get("alerts", [])
                if a["labels"].get("alertname") == RULE and a["status"] == "resolved"
            ]

        def baseline(port: int) -> float:
            return metric(port, "rag_monitor_alert_samples", 'window="baseline"') or 0.0

        # A healthy fleet until every replica's baseline holds the fleet's verdicts (each
        # replica receives a third of them).
        deadline = Deadline(240)
        while min(baseline(p) for p in metrics) < 150:
            assert not deadline.passed(), f"baselines never filled in {deadline.describe()}"
            send(services, 0.1, 5)
        assert all(
            metric(p, "rag_monitor_alert_fleet_reads_total", 'outcome="ok"') for p in metrics
        )
        for p in metrics:
            # Its windows (the baseline and the current window after it) hold about three
            # times the verdicts it produced itself; alone they would hold at most its own.
            held = baseline(p) + (
                metric(p, "rag_monitor_alert_samples", f'rule="{RULE}"', 'window="current"') or 0.0
            )
            own = sum(
                metric(p, "rag_monitor_evaluations_total", f'outcome="{o}"') or 0.0
                for o in ("pass", "fail")
            )
            assert held > 2 * own, (held, own)
        assert pages() == []
        assert all(metric(p, "rag_monitor_alert_firing", f'rule="{RULE}"') == 0 for p in metrics)

        # Every answer of the fleet hallucinated: one page.
        deadline = Deadline(120)
        while not pages():
            assert not deadline.passed(), f"no page within {deadline.describe()} of the rise"
            send(services, 1.0, 2)

        def firing() -> list[bool]:
            return [metric(p, "rag_monitor_alert_firing", f'rule="{RULE}"') == 1 for p in metrics]

        deadline = Deadline(60)
        while not all(firing()):  # the rise goes on until every replica judged it
            assert not deadline.passed(), f"not every replica firing: {firing()}"
            send(services, 1.0, 1)
        send(services, 1.0, 5)  # every replica has sent its page by now
        (page,) = pages()
        assert page["labels"]["service"] == "shop"
        assert "sequential test, one false page per 1h" in page["annotations"]["description"]

        # The fleet recovers: the alert resolves once, and only after every replica
        # stopped firing (no replica sends a resolve; the alert ends when none re-sends it).
        last_firing = time.monotonic()
        deadline = Deadline(180)
        while not resolved():
            assert not deadline.passed(), f"no resolve within {deadline.describe()} of the recovery"
            send(services, 0.1, 1)
            if any(firing()):
                last_firing = time.monotonic()
        (notice,) = resolved()
        assert notice[1] > last_firing
        send(services, 0.1, 5)
        assert len(pages()) == 1 and len(resolved()) == 1  # one voice: no flapping
