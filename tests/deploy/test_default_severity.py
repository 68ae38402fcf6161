"""The rules a user gets without writing a severity page on-call through the shipped
Alertmanager config: the embedded default `hallucination_regression` rule (a config that
writes no `alerts.rules`) and a rule written without `severity`, of every form that takes
it; the monitor's own alerts, the judge-change page included, reach the platform (the real
`amtool config routes test`, as tests/deploy/test_deploy_alertmanager.py does for every
shipped rule)."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config import AlertRule, load_config
from tests.deploy.test_deploy_alertmanager import PLATFORM, SEVERITIES, routed_to, sidecar_alerts

ONCALL = SEVERITIES["page"]


def test_the_embedded_default_rule_pages_on_call(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    (rule,) = load_config(empty, environ={}).alerts.rules
    assert (rule.name, rule.evaluator) == ("hallucination_regression", "local_groundedness")
    for labels in sidecar_alerts(rule):
        assert routed_to(labels) == ONCALL, labels


@pytest.mark.parametrize(
    "form",
    [
        {"baseline": {}},
        {"cohorts": {"by": "version"}},
        {"max_defect_rate": 0.5},
    ],
    ids=["regression", "cohorts", "absolute"],
)
def test_a_rule_written_without_a_severity_pages_on_call(form: dict[str, object]) -> None:
    """Every rule is a page with a false-page budget: one written without `severity`
    reaches on-call, not the team's queue."""
    rule = AlertRule.model_validate(
        {"name": "hallucination", "evaluator": "local_groundedness", **form}
    )
    assert rule.severity == "page"
    for labels in sidecar_alerts(rule):
        assert routed_to(labels) == ONCALL, labels


def test_the_judge_change_page_reaches_the_platform() -> None:
    """docs/contract.md's `RagMonitorJudgeChanged` labels (monitor/audit/anchors.py)."""
    labels = {
        "alertname": "RagMonitorJudgeChanged",
        "evaluator": "groundedness",
        "severity": "warning",
        "generator": "rag-monitor",
    }
    assert routed_to(labels) == PLATFORM
