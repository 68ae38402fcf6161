"""End to end, as a user first tries a regression rule (`tests/alerts/fresh_e2e.py` says
how): a freshly started sidecar, with no history and no state file, judges from its first
minute and its page reaches the webhook with the service's label and the rise's
annotations.

What this test asserted in real time before, now judged on simulated time over seeded
runs with its rule and stream (the scorecard's `sidecar tests` row,
`harness/simulated_sidecar_tests.py`, `tests/alerts/test_scorecard.py`): a fresh start's
first minutes are quiet, a burst of one client's identical failing requests is one piece
of evidence and pages nothing, and a x2.5 rise after about 200 s pages within 3 times its
information limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.rag_service import Service, write_config
from harness.servers import rag_monitor, webhook
from tests.alerts.fresh_e2e import HEALTHY_SHARE, Sidecar, ready, rise_pages, rule_config

# A real sidecar fed in real time: the e2e tier.
pytestmark = pytest.mark.e2e


def test_a_fresh_sidecar_judges_from_its_first_minute_and_its_page_reaches_the_webhook(
    tmp_path: Path,
) -> None:
    config = tmp_path / "monitor.yaml"
    with webhook() as hook:
        write_config(config, rule_config(hook.url))
        with rag_monitor(tmp_path, config) as ports:
            assert ports.http is not None
            service = Service(ports.http, own_wording=True)
            try:
                sidecar = Sidecar(ports.metrics, hook)
                ready(service, sidecar)
                page = rise_pages(service, sidecar)
            finally:
                service.close()
    assert page["labels"]["service"] == "shop"
    assert page["labels"]["alertname"] == "fresh_regression"
    notes = page["annotations"]
    assert float(notes["increase"]) >= 0.03
    # Judged against the healthy level it learned in its first minute.
    assert abs(float(notes["baseline_defect_rate"]) - HEALTHY_SHARE) < 0.1, notes
    assert notes["false_page_every"] == "1h"
