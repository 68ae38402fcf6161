"""The shipped deploy kit speaks one severity vocabulary: every alert it can raise — the
Prometheus rules' and the sidecar rules of every shipped monitor config — is routed by the
real `amtool config routes test` through deploy/alertmanager/alertmanager.yml to the
receiver meant for it (a quality page to on-call, the monitor's own health to the
platform), and the inhibit rules match alerts the kit really sends (a real Alertmanager
says which alerts it holds back)."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from harness.deploy_examples import monitor_with_slo, rules_with_slo
from harness.servers import DEPLOY, REPO, alertmanager_of, http_json, need
from harness.wait import wait_until
from monitor.component import GENERATOR
from monitor.config import WHERE_SUFFIX, AlertRule, load_config

ALERTMANAGER = DEPLOY / "alertmanager/alertmanager.yml"
SEVERITIES = {"page": "quality-oncall", "ticket": "quality-team"}
PLATFORM = "platform"


def routed_to(labels: dict[str, str]) -> str:
    """The receiver(s) amtool routes an alert with `labels` to."""
    args = [f"{k}={v}" for k, v in labels.items()]
    proc = subprocess.run(
        [need("amtool"), "config", "routes", "test", f"--config.file={ALERTMANAGER}", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def prometheus_alerts() -> list[dict[str, str]]:
    """alertname and labels of each alert rule in deploy/prometheus/rules.yml."""
    groups = yaml.safe_load(rules_with_slo())["groups"]  # the SLO example's alerts too
    return [
        {"alertname": rule["alert"], **rule.get("labels", {})}
        for group in groups
        for rule in group["rules"]
        if "alert" in rule
    ]


def _monitor_configs(tmp: Path) -> dict[str, Path]:
    """Every monitor config the repository ships, as a file."""
    configmap = yaml.safe_load((DEPLOY / "kubernetes/configmap.yaml").read_text())
    helm = yaml.safe_load((DEPLOY / "helm/rag-monitor/values.yaml").read_text())
    (tmp / "configmap.yaml").write_text(configmap["data"]["config.yaml"])
    (tmp / "helm.yaml").write_text(yaml.safe_dump(helm["config"]))
    (tmp / "slo.yaml").write_text(monitor_with_slo())
    return {
        "deploy/monitor.yaml": DEPLOY / "monitor.yaml",
        "deploy/monitor.yaml with its SLO example": tmp / "slo.yaml",
        "deploy/compose/monitor.yaml": DEPLOY / "compose/monitor.yaml",
        "deploy/kubernetes/configmap.yaml": tmp / "configmap.yaml",
        "deploy/helm/rag-monitor/values.yaml": tmp / "helm.yaml",
        "examples/config.yaml": REPO / "examples/config.yaml",
    }


def sidecar_alerts(rule: AlertRule) -> list[dict[str, str]]:
    """The labels of each alert a sidecar rule can send (monitor/alerts/describe.py): one
    per severity it names (an SLO rule's rows), and a page's `_where` companion."""
    severities = {row.severity for row in rule.slo.burn_rates} if rule.slo else {rule.severity}
    source = {"evaluator": rule.evaluator} if rule.evaluator else {"category": str(rule.category)}
    out = []
    for severity in sorted(severities):
        labels = {"service": "shop", "severity": severity, "generator": GENERATOR, **source}
        out.append({"alertname": rule.name, **labels})
        out.append({"alertname": rule.name + WHERE_SUFFIX, **labels, "dimension": "model"})
    return out


def test_every_prometheus_alert_reaches_its_receiver() -> None:
    alerts = prometheus_alerts()
    assert alerts
    for labels in alerts:
        severity = labels.get("severity")
        assert severity in SEVERITIES, labels  # one vocabulary
        if labels["alertname"].startswith("RagMonitor"):
            expected = PLATFORM
        else:
            expected = SEVERITIES[severity]
        assert routed_to({**labels, "service": "shop"}) == expected, labels
    names = {a["alertname"]: a["severity"] for a in alerts}
    # The quality pages and the monitor's own outage page.
    assert names["RagHallucinationRegression"] == "page"
    assert names["RagSafetyDefectRateHigh"] == "page"
    assert names["RagMonitorDown"] == "page"
    assert routed_to({"alertname": "RagMonitorDown", "severity": "page"}) == PLATFORM


def test_every_sidecar_rule_of_the_shipped_configs_reaches_its_receiver(tmp_path: Path) -> None:
    for where, path in _monitor_configs(tmp_path).items():
        config = load_config(path, environ={})
        assert config.alerts.rules, where
        for rule in config.alerts.rules:
            for labels in sidecar_alerts(rule):
                severity = labels["severity"]
                assert severity in SEVERITIES, (where, rule.name, severity)
                assert routed_to(labels) == SEVERITIES[severity], (where, labels)
            # A hallucination or safety rule that is not an SLO pages on-call.
            if rule.slo is None:
                assert rule.severity == "page", (where, rule.name)


def _post(base: str, labels: dict[str, str]) -> None:
    now = datetime.now(UTC)
    alert = {
        "labels": labels,
        "annotations": {},
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(hours=1)).isoformat(),
    }
    http_json(f"{base}/api/v2/alerts", [alert])


def _inhibited_by(base: str, labels: dict[str, str]) -> list[str]:
    """The fingerprints of the alerts that hold back the alert with exactly `labels`."""
    (alert,) = [a for a in http_json(f"{base}/api/v2/alerts") if a["labels"] == labels]
    return list(alert["status"]["inhibitedBy"])


@pytest.mark.parametrize(
    ("source", "target", "held"),
    [
        # No monitor scraped at all: its quality alerts say nothing new.
        (
            {"alertname": "RagMonitorAbsent", "severity": "page"},
            {"alertname": "hallucination_regression", "service": "shop", "severity": "page",
             "generator": GENERATOR, "evaluator": "local_groundedness"},
            True,
        ),
        # One replica down in a fleet does not silence the others' pages.
        (
            {"alertname": "RagMonitorDown", "severity": "page", "instance": "10.0.0.1:9464"},
            {"alertname": "RagHallucinationRegression", "service": "shop", "severity": "page",
             "evaluator": "local_groundedness"},
            False,
        ),
        # An SLO page holds back its own ticket, not another service's.
        (
            {"alertname": "RagGroundednessBudgetBurn", "service": "shop", "severity": "page",
             "evaluator": "local_groundedness", "slo": "groundedness_slo"},
            {"alertname": "RagGroundednessBudgetBurn", "service": "shop", "severity": "ticket",
             "evaluator": "local_groundedness", "slo": "groundedness_slo"},
            True,
        ),
        (
            {"alertname": "groundedness_slo", "service": "shop", "severity": "page",
             "generator": GENERATOR, "evaluator": "local_groundedness"},
            {"alertname": "groundedness_slo", "service": "cart", "severity": "ticket",
             "generator": GENERATOR, "evaluator": "local_groundedness"},
            False,
        ),
        # The sidecar's page and its Prometheus mirror are one incident: one notification.
        (
            {"alertname": "jailbreak_rate", "service": "客服", "severity": "page",
             "generator": GENERATOR, "category": "jailbreak"},
            {"alertname": "RagSafetyDefectRateHigh", "service": "客服", "severity": "page",
             "category": "jailbreak"},
            True,
        ),
        (
            {"alertname": "hallucination_regression", "service": "shop", "severity": "page",
             "generator": GENERATOR, "evaluator": "local_groundedness"},
            {"alertname": "RagHallucinationRegression", "service": "shop", "severity": "page",
             "evaluator": "local_groundedness", "revision": "0.1.0+3fa2b1c0"},
            True,
        ),
        # A page on the records that lost their context is another incident than the
        # mirror's rise of the defect rate: the mirror still notifies.
        (
            {"alertname": "context_missing_regression", "service": "shop", "severity": "page",
             "generator": GENERATOR, "evaluator": "local_groundedness", "measure": "no_context"},
            {"alertname": "RagHallucinationRegression", "service": "shop", "severity": "page",
             "evaluator": "local_groundedness", "revision": "0.1.0+3fa2b1c0"},
            False,
        ),
        # ... but not another category's, another service's, or the other way round.
        (
            {"alertname": "jailbreak_rate", "service": "客服", "severity": "page",
             "generator": GENERATOR, "category": "jailbreak"},
            {"alertname": "RagSafetyDefectRateHigh", "service": "客服", "severity": "page",
             "category": "violence"},
            False,
        ),
        (
            {"alertname": "hallucination_regression", "service": "shop", "severity": "page",
             "generator": GENERATOR, "evaluator": "local_groundedness"},
            {"alertname": "RagHallucinationRegression", "service": "cart", "severity": "page",
             "evaluator": "local_groundedness", "revision": "0.1.0+3fa2b1c0"},
            False,
        ),
        (
            {"alertname": "RagSafetyDefectRateHigh", "service": "客服", "severity": "page",
             "category": "jailbreak"},
            {"alertname": "jailbreak_rate", "service": "客服", "severity": "page",
             "generator": GENERATOR, "category": "jailbreak"},
            False,
        ),
    ],
)  # fmt: skip
def test_inhibit_rules_match_what_the_kit_sends(
    tmp_path: Path, source: dict[str, str], target: dict[str, str], held: bool
) -> None:
    # A ticket like the source but for its severity: held back by the page rule as soon as
    # Alertmanager's inhibitor has seen the source, so the target is judged after that.
    sentinel = {**source, "severity": "ticket", "sentinel": "yes"}
    with alertmanager_of(tmp_path, ALERTMANAGER) as base:
        for labels in (source, target, sentinel):
            _post(base, labels)
        wait_until(
            lambda: bool(_inhibited_by(base, sentinel)),
            60,
            f"the inhibitor to see {source['alertname']}",
        )
        assert bool(_inhibited_by(base, target)) is held
