"""What the fresh-start end-to-end tests share (`test_alerts_fresh_e2e.py`,
`test_alerts_fresh_changeover_e2e.py`): a freshly
started `rag-monitor run` (its embedded `local_groundedness`, every setting at its default
but `window: 30s`, `baseline: {window: 3m, min_samples: 240}`, one false page an hour and an
evaluation every second) fed by a RAG service through the OpenTelemetry SDK over OTLP/HTTP
(harness/rag_service.py), `PER_S` requests a second, each user asking in words of their own.
Pages go to a webhook receiver, as `alerts.webhooks` sends them. The tests are in two files
so that the suite's workers (`--dist loadfile`) run them side by side: each feeds the sidecar
in real time for minutes.

A separate process cannot take an injected clock, so the traffic is paced in real time and
every check waits on a condition (the sidecar's metrics, the webhook). How soon a rise
pages is counted in the verdicts the sidecar had evaluated when it fired, not in seconds:
while the rise lasts, each step of `STEP` requests is sent once the sidecar has evaluated
the ones before, so the count is exact to a step.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from harness.rag_service import Service, metric, paced, write_config
from harness.servers import rag_monitor, webhook
from harness.wait import wait_until
from monitor.config import EvaluatorConfig, Judge
from monitor.evaluators.revision import revision

RULE = "fresh_regression"
PER_S = 8
BUDGET_S = 3600.0
HEALTHY_SHARE = 0.2
RISE = 2.5
BASELINE_MIN_SAMPLES = 240
# Requests sent at a time while a rise is counted: half a second of traffic.
STEP = PER_S // 2
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
                "window": "30s",
                "baseline": {"window": "3m", "min_samples": BASELINE_MIN_SAMPLES},
                "false_page_every": "1h",
            }
        ],
    }
    if state_file is not None:
        alerts["state_file"] = str(state_file)
    return alerts


def information_limit(healthy: float, risen: float) -> float:
    """The verdicts a test that pages at most once per `BUDGET_S` at `PER_S` verdicts a
    second needs, at least, to tell `risen` from `healthy`: ln(verdicts per budget) over the
    divergence per verdict."""
    divergence = risen * math.log(risen / healthy) + (1 - risen) * math.log(
        (1 - risen) / (1 - healthy)
    )
    return math.log(PER_S * BUDGET_S) / divergence


class Sidecar:
    """What a test reads of the running monitor on its metrics port."""

    def __init__(self, port: int, hook: Any) -> None:
        self.port = port
        self.hook = hook

    def evaluated(self) -> float:
        return sum(
            metric(self.port, "rag_monitor_evaluations_total", f'outcome="{o}"') or 0.0
            for o in ("pass", "fail")
        )

    def samples(self, window: str) -> float:
        return metric(self.port, "rag_monitor_alert_samples", f'window="{window}"') or 0.0

    def baseline(self) -> float | None:
        return metric(self.port, "rag_monitor_defect_rate_baseline", f'rule="{RULE}"')

    def firing(self) -> bool:
        return metric(self.port, "rag_monitor_alert_firing", f'rule="{RULE}"') == 1

    def pages(self) -> list[dict[str, Any]]:
        return [a for a in self.hook.alerts() if a["labels"].get("alertname") == RULE]

    def quiet_until(self, condition: Any) -> Any:
        """`condition`, for `paced`: fails the test at once if the rule fires meanwhile."""

        def check() -> Any:
            assert not self.firing(), "paged on healthy traffic"
            return condition()

        return check

    def caught_up(self, sent: float) -> None:
        """Waits until the sidecar has evaluated `sent` requests."""
        wait_until(lambda: self.evaluated() >= sent, 120, f"{sent:g} requests evaluated")


def ready(service: Service, sidecar: Sidecar, learned: bool = False) -> None:
    """Healthy traffic from the start until the rule can judge (its window and its level
    hold their min_samples): no page. With `learned`, until the history's own level holds
    more than min_samples: a fresh rule judges against its first min_samples verdicts
    before, and a changeover translates the history's level, not those."""
    least = BASELINE_MIN_SAMPLES + 1 if learned else BASELINE_MIN_SAMPLES
    paced(
        [(service, HEALTHY_SHARE)],
        sidecar.quiet_until(
            lambda: sidecar.samples("baseline") >= least and sidecar.samples("current") >= 100
        ),
        300,
        PER_S,
    )


def verdicts_to_page(
    service: Service, sidecar: Sidecar, sent: float, share: float, most: float
) -> float:
    """Once the sidecar has evaluated the `sent` requests before, sends `share`
    hallucinated in steps of `STEP` requests, each once the sidecar has evaluated the last,
    at `PER_S` a second at most, until the rule fires; returns the verdicts of the rise the
    sidecar had evaluated then (fails past `most` of them)."""
    sidecar.caught_up(sent)
    risen = 0
    tick = time.monotonic()
    while not sidecar.firing():
        assert risen < most, f"no page after {risen} verdicts"
        service.send(STEP, share)
        service.provider.force_flush()
        risen += STEP
        sidecar.caught_up(sent + risen)
        tick += STEP / PER_S
        time.sleep(max(0.0, tick - time.monotonic()))  # pacing the traffic
    return sidecar.evaluated() - sent


def changeover(tmp_path: Path, evaluator: dict[str, Any], bound: float) -> None:
    """A fresh monitor judges healthy traffic until its rule can, with no page; restarted
    from its state file with `evaluator` (another revision), it pages nothing on healthy
    traffic, then a 2.5x rise pages within `bound` times its information limit."""
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
        assert hook.alerts() == []
        asked = service.sent

        # The same monitor with another pass mark: another revision of the evaluator.
        write_config(config, rule_config(hook.url, state), evaluator=evaluator)
        with rag_monitor(tmp_path, config) as ports:
            assert ports.http is not None
            assert metric(ports.metrics, "rag_monitor_alert_state_loads_total") == 1
            service = Service(ports.http, own_wording=True)
            # Its users go on asking new questions: the same question again, within the
            # time the rules remember one, would be one piece of evidence with the first.
            service.sent = asked
            try:
                _changeover_then_rise(service, Sidecar(ports.metrics, hook), asked, bound)
            finally:
                service.close()


def _changeover_then_rise(service: Service, sidecar: Sidecar, asked: int, bound: float) -> None:
    # What the stricter revision reads: the hallucinated answers and the faithful ones
    # scored below its pass mark (7 of the 36 the service cycles through).
    misread = 7 / 36
    healthy = HEALTHY_SHARE + (1 - HEALTHY_SHARE) * misread
    risen = RISE * HEALTHY_SHARE + (1 - RISE * HEALTHY_SHARE) * misread

    # Healthy traffic until the rule expects the new revision's level from as many verdicts
    # as it needs to judge: quiet all along.
    paced(
        [(service, HEALTHY_SHARE)],
        sidecar.quiet_until(
            lambda: (
                sidecar.samples("baseline") >= BASELINE_MIN_SAMPLES
                and (sidecar.baseline() or 0.0) >= healthy - 0.03
            )
        ),
        300,
        PER_S,
    )
    baseline = sidecar.baseline()
    assert baseline is not None and abs(baseline - healthy) < 0.03

    # Within ten times its information limit: later than on a fresh start's grown history,
    # as the rule now judges against an offset measured from a few hundred verdicts, on a
    # history too young to have measured how its verdicts disperse (it assumes twice the
    # binomial variance until it has).
    limit = information_limit(healthy, risen)
    needed = verdicts_to_page(
        service, sidecar, service.sent - asked, HEALTHY_SHARE * RISE, bound * limit
    )
    assert needed <= bound * limit, (needed, limit)
    (page, *_) = wait_until(sidecar.pages, 60, "the page at the webhook")
    assert page["status"] == "firing"
    stricter = EvaluatorConfig(name="local_groundedness", threshold=STRICTER)
    assert page["annotations"]["evaluator_revision"] == revision(stricter, Judge())
