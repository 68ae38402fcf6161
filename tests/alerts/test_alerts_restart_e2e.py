"""End to end: a firing alert kept in `alerts.state_file` survives a graceful restart of a
real `rag-monitor run`, and the next process resolves it through real Alertmanager.

Traffic comes from the SDK-driven RAG service in harness/rag_service.py; every check waits on
a condition (the monitor's metrics, the webhook).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.rag_service import Service, metric, write_config
from harness.servers import alertmanager, need, rag_monitor, webhook
from harness.wait import wait_until

# A real `rag-monitor run` and Alertmanager: wiring, whatever the file costs.
pytestmark = pytest.mark.e2e


def test_a_firing_alert_survives_sigterm_and_the_next_process_resolves_it(
    tmp_path: Path,
) -> None:
    """`alerts.state_file` across a graceful restart: SIGTERM sends nothing, the next
    process is firing from its first evaluation and sends the resolve itself."""
    need("prometheus-alertmanager")
    config = tmp_path / "monitor.yaml"
    state = tmp_path / "state" / "alerts.state"
    rule = "hallucination_rate"
    with webhook() as hook, alertmanager(tmp_path, hook.url) as am:
        write_config(
            config,
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

        def evaluated(port: int) -> float:
            return sum(
                metric(port, "rag_monitor_evaluations_total", f'outcome="{o}"') or 0
                for o in ("pass", "fail")
            )

        with rag_monitor(tmp_path, config) as ports:
            assert ports.http is not None
            service = Service(ports.http)
            try:
                for item in (service.hallucinated * 3)[:30]:
                    service.request(item)
                service.provider.force_flush()
                wait_until(lambda: bool(sent("firing")), 120, "the alert at the webhook")
            finally:
                service.close()
        assert state.exists()
        assert sent("resolved") == []  # SIGTERM resolves nothing

        with rag_monitor(tmp_path, config) as ports:
            assert ports.http is not None
            assert metric(ports.metrics, "rag_monitor_alert_state_loads_total") == 1
            wait_until(
                lambda: metric(ports.metrics, "rag_monitor_alert_firing", f'rule="{rule}"') == 1,
                30,
                "the restored alert firing after an evaluation",
            )
            service = Service(ports.http)
            try:
                # Enough that the upper bound, at the level of a look every 0.5 s for a
                # false page a quarter, falls below the threshold.
                for item in (service.faithful * 40)[:1200]:
                    service.request(item)
                service.provider.force_flush()
                wait_until(
                    lambda: evaluated(ports.metrics) == 1200, 180, "1200 faithful answers evaluated"
                )
                (resolved, *_) = wait_until(lambda: sent("resolved"), 60, "the resolve")
            finally:
                service.close()
        assert resolved["labels"] == sent("firing")[0]["labels"]
