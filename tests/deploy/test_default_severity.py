"""The rules a user gets without writing a severity page on-call through the shipped
Alertmanager config: the embedded default `hallucination_regression` rule (a config that
writes no `alerts.rules`) and a rule written without `severity`, of every form that takes
it. The Sloth spec's page and ticket reach on-call and the team's queue; the monitor's own
alerts, the judge-change page included, reach the platform. Routed by the real `amtool
config routes test`, as tests/deploy/test_deploy_alertmanager.py routes every shipped rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.servers import DEPLOY
from monitor.config import alert_rule, load_config
from tests.deploy.test_deploy_alertmanager import PLATFORM, SEVERITIES, routed_to, sidecar_alerts

ONCALL = SEVERITIES["page"]


def test_the_embedded_default_rules_page_on_call(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    rules = load_config(empty, environ={}).alerts.rules
    names = [(rule.name, rule.evaluator) for rule in rules]
    assert names == [
        ("hallucination_regression", "local_groundedness"),
        ("context_missing_regression", "local_groundedness"),
    ]
    for rule in rules:
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
    rule = alert_rule({"name": "hallucination", "evaluator": "local_groundedness", **form})
    assert rule.severity == "page"
    for labels in sidecar_alerts(rule):
        assert routed_to(labels) == ONCALL, labels


def test_the_sloth_specs_alerts_reach_their_receivers() -> None:
    """deploy/prometheus/sloth/'s page and ticket alerts, as Sloth generates them."""
    spec = yaml.safe_load((DEPLOY / "prometheus/sloth/groundedness-slo.yaml").read_text())
    for slo in spec["spec"]["slos"]:
        alerting = slo["alerting"]
        for kind in ("pageAlert", "ticketAlert"):
            labels = {"alertname": alerting["name"], "service": "shop", **alerting[kind]["labels"]}
            assert routed_to(labels) == SEVERITIES[labels["severity"]], labels


def test_the_judge_change_page_reaches_the_platform() -> None:
    """docs/contract.md's `RagMonitorJudgeChanged` labels (the alert engine's judge-changed
    rule, `monitor.config.JudgeChangedRule`)."""
    labels = {
        "alertname": "RagMonitorJudgeChanged",
        "evaluator": "groundedness",
        "severity": "ticket",
        "generator": "rag-monitor",
    }
    assert routed_to(labels) == PLATFORM
