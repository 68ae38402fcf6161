"""The embedded defaults watch for hallucinations: a config that writes no `alerts.rules`
and runs local_groundedness gets the regression rules on it (`DEFAULT_RULES`: its defect
rate, and the share of records it skipped for lack of context), which page by log line and
the `alert_firing` gauge while no receiver is set; `rules: []` turns them off, and a config
without local_groundedness gets none."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest

from monitor.alerts import AlertEngine
from monitor.component import Evaluated
from monitor.config import AlertBaseline, AlertRule, RegressionRule, load_config
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock, gauge, record, verdict


def loaded(tmp_path: Path, text: str) -> list[AlertRule]:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_config(path, environ={}).alerts.rules


def test_an_empty_config_gets_the_regression_rules_on_groundedness(tmp_path: Path) -> None:
    """The hallucination rate, and the share of records groundedness skipped for lack of
    context (tests/alerts/test_context_missing.py), each against the service's history."""
    rule, context = loaded(tmp_path, "")
    assert rule == RegressionRule(
        name="hallucination_regression",
        evaluator="local_groundedness",
        baseline=AlertBaseline(),
        severity="page",
    )
    assert context == RegressionRule(
        name="context_missing_regression",
        evaluator="local_groundedness",
        measure="no_context",
        baseline=AlertBaseline(),
        severity="page",
    )
    # The same with a receiver set but no rules written.
    same = loaded(tmp_path, "alerts: {alertmanager: {url: 'http://am:9093'}}")
    assert same == [rule, context]


@pytest.mark.parametrize(
    "text",
    ["alerts: {rules: []}", "evaluators: [{name: local_relevance}, {name: local_safety}]"],
)
def test_no_default_rule_when_turned_off_or_without_its_evaluator(
    tmp_path: Path, text: str
) -> None:
    assert loaded(tmp_path, text) == []


def test_the_default_rule_pages_by_log_line_and_gauge_without_a_receiver(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rule, _ = loaded(tmp_path, "")
    t = create_telemetry()
    clock = Clock()
    engine = AlertEngine([rule], t, notifiers=[], evaluation_interval_s=60.0, clock=clock)
    n = 0

    def run(hours: float, rate: float) -> None:
        nonlocal n
        for _ in range(int(hours * 60)):  # a look a minute, five verdicts between looks
            for _ in range(5):
                defect = math.floor((n + 1) * rate) > math.floor(n * rate)
                n += 1
                engine.emit(
                    [
                        Evaluated(
                            record("shop", n),
                            {
                                "local_groundedness": verdict(
                                    "local_groundedness", passed=not defect
                                )
                            },
                        )
                    ]
                )
            clock.now += 60.0
            engine.evaluate()

    run(26, 0.30)  # a healthy day and more: the detector's bias, no page
    assert gauge(t, "alert_firing", service="shop", rule=rule.name, severity="page", cohort="") == 0
    with caplog.at_level(logging.WARNING, logger="monitor"):
        run(2, 0.60)
    assert gauge(t, "alert_firing", service="shop", rule=rule.name, severity="page", cohort="") == 1
    assert any(
        f"alert {rule.name} firing for" in r.getMessage() and "shop" in r.getMessage()
        for r in caplog.records
    )
