"""End to end (`tests/alerts/fresh_e2e.py` says how): an evaluator changeover through a
restart. A fresh sidecar learns a level and keeps it in its `state_file`; restarted with
another `threshold` (another revision of the evaluator, which reads the same traffic
higher) it loads that state, judges the new revision's verdicts against the level carried
over, and its page names the new revision.

What this test asserted in real time before, now judged on simulated time over seeded
runs with its rule and stream (the scorecard's `sidecar tests` row,
`harness/simulated_sidecar_tests.py`, `tests/alerts/test_scorecard.py`): the changeover
pages nothing by itself on healthy traffic, and a x2.5 rise after it pages within 10
times its information limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.rag_service import Service, metric, paced, write_config
from harness.servers import rag_monitor, webhook
from monitor.config import EvaluatorConfig, Judge
from monitor.evaluators.revision import revision
from tests.alerts.fresh_e2e import (
    HEALTHY_SHARE,
    PER_S,
    STRICTER,
    Sidecar,
    ready,
    rise_pages,
    rule_config,
)

# A real sidecar fed in real time: the e2e tier.
pytestmark = pytest.mark.e2e

# What the stricter revision reads of the healthy service: the hallucinated answers and
# the faithful ones scored below its pass mark (7 of the 36 the service cycles through).
STRICTER_READS = HEALTHY_SHARE + (1 - HEALTHY_SHARE) * 7 / 36


def test_a_changeover_through_a_restart_keeps_the_level_and_its_page_names_the_revision(
    tmp_path: Path,
) -> None:
    config = tmp_path / "monitor.yaml"
    state = tmp_path / "alerts.state"
    with webhook() as hook:
        write_config(config, rule_config(hook.url, state))
        with rag_monitor(tmp_path, config) as ports:
            assert ports.http is not None
            service = Service(ports.http, own_wording=True)
            try:
                ready(service, Sidecar(ports.metrics, hook), learned=True)
            finally:
                service.close()
        assert state.exists()
        asked = service.sent

        # The same monitor with another pass mark: another revision of the evaluator.
        evaluator = {"name": "local_groundedness", "threshold": STRICTER}
        write_config(config, rule_config(hook.url, state), evaluator=evaluator)
        with rag_monitor(tmp_path, config) as ports:
            assert ports.http is not None
            assert metric(ports.metrics, "rag_monitor_alert_state_loads_total") == 1
            service = Service(ports.http, own_wording=True)
            # Its users go on asking new questions: the same question again, within the
            # time the rules remember one, would be one piece of evidence with the first.
            service.sent = asked
            try:
                sidecar = Sidecar(ports.metrics, hook)
                # Healthy traffic until the level reads the new revision (the offset
                # measured from its first verdicts) and the window holds its verdicts only.
                paced(
                    [(service, HEALTHY_SHARE)],
                    lambda: (
                        service.sent - asked >= 15 * PER_S
                        and sidecar.baseline() >= (HEALTHY_SHARE + STRICTER_READS) / 2
                    ),
                    120,
                    PER_S,
                )
                page = rise_pages(service, sidecar)
            finally:
                service.close()
    notes = page["annotations"]
    stricter = EvaluatorConfig(name="local_groundedness", threshold=STRICTER)
    assert notes["evaluator_revision"] == revision(stricter, Judge())
    # Judged against the new revision's level, not the old one's 0.20.
    assert abs(float(notes["baseline_defect_rate"]) - STRICTER_READS) < 0.1, notes
