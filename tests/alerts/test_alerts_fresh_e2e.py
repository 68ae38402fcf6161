"""End to end on compressed windows, as a user first tries a regression rule
(`tests/alerts/fresh_e2e.py` says how): its first minutes are quiet; a burst of one client's
identical failing requests (same question, same context, no conversation id) is one piece of
evidence and does not page; a 2.5x rise of the hallucinated share after about 200 s pages
within 3 times its information limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.rag_service import Service, paced, write_config
from harness.servers import rag_monitor, webhook
from harness.wait import wait_until
from tests.alerts.fresh_e2e import (
    HEALTHY_SHARE,
    PER_S,
    RISE,
    Sidecar,
    information_limit,
    ready,
    rule_config,
    verdicts_to_page,
)

# A real sidecar fed in real time for minutes: the slow tier.
pytestmark = pytest.mark.e2e

# Identical failing requests of the burst, sent at three times the service's own rate.
BURST = 240
# Seconds of verdicts the level holds when the rise comes: most of its 3m.
WARM = 150


def test_quiet_at_first_a_burst_of_one_request_is_no_page_and_a_rise_pages_soon(
    tmp_path: Path,
) -> None:
    config = tmp_path / "monitor.yaml"
    with webhook() as hook:
        write_config(config, rule_config(hook.url))
        with rag_monitor(tmp_path, config) as ports:
            assert ports.http is not None
            service = Service(ports.http, own_wording=True)
            client = Service(ports.http)
            # One question, one context, one hallucinated answer: the same request each time.
            client.hallucinated = client.hallucinated[:1]
            try:
                _burst_then_rise(service, client, Sidecar(ports.metrics, hook))
            finally:
                service.close()
                client.close()


def _burst_then_rise(service: Service, client: Service, sidecar: Sidecar) -> None:
    ready(service, sidecar)
    baseline = sidecar.baseline()
    assert baseline is not None and abs(baseline - HEALTHY_SHARE) < 0.03

    # The burst, on top of the service's own traffic.
    paced(
        [(service, HEALTHY_SHARE), (client, 1.0), (client, 1.0), (client, 1.0)],
        sidecar.quiet_until(lambda: client.sent >= BURST),
        120,
        PER_S,
    )
    # Healthy traffic until the level holds most of a baseline window (about 200 s from
    # the start): the rule judged the burst all the while it was in its window, and
    # nothing paged.
    paced(
        [(service, HEALTHY_SHARE)],
        sidecar.quiet_until(lambda: sidecar.samples("baseline") >= WARM * PER_S),
        300,
        PER_S,
    )
    assert sidecar.pages() == []

    # The hallucinated share rises 2.5x: paged within 3 times the information limit.
    limit = information_limit(HEALTHY_SHARE, HEALTHY_SHARE * RISE)
    needed = verdicts_to_page(
        service, sidecar, service.sent + client.sent, HEALTHY_SHARE * RISE, 3 * limit
    )
    assert needed <= 3 * limit, (needed, limit)
    (page, *_) = wait_until(sidecar.pages, 60, "the page at the webhook")
    assert page["status"] == "firing"
    assert page["labels"]["service"] == "shop"
    assert float(page["annotations"]["increase"]) >= 0.03
