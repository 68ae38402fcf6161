"""The deployment kit validates with the real tools: `promtool check/test rules`,
`promtool check config`, `amtool check-config`; the example monitor configs load; the
sidecar's rules and the Prometheus rules agree; container/Kubernetes/compose files have
what an operator relies on (non-root, health checks, probes, limits, scrape wiring)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.servers import DEPLOY, need
from monitor.config import (
    FALSE_PAGE_EVERY,
    AlertBaseline,
    AlertCohorts,
    CohortRule,
    RegressionRule,
    load_config,
    parse_duration,
)
from monitor.evidence.stats import look_level, one_sided_z


def run(*args: str) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=DEPLOY)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def test_promtool_checks_the_rules() -> None:
    out = run(need("promtool"), "check", "rules", "prometheus/rules.yml")
    assert "SUCCESS" in out


SHIPPED_PROMTOOL_TESTS = sorted(p.relative_to(DEPLOY) for p in DEPLOY.rglob("*_test.yml"))


def test_the_kit_ships_its_promtool_tests() -> None:
    assert {p.name for p in SHIPPED_PROMTOOL_TESTS} >= {"rules_test.yml", "slo_test.yml"}


@pytest.mark.parametrize("path", SHIPPED_PROMTOOL_TESTS, ids=str)
def test_every_shipped_promtool_test_passes_as_shipped(path: Path) -> None:
    """What an SRE who copies deploy/ runs, beside the rules as shipped (commented-out
    examples stay commented out)."""
    out = run(need("promtool"), "test", "rules", str(path))
    assert "SUCCESS" in out and "FAILED" not in out


def test_promtool_checks_the_scrape_config() -> None:
    out = run(need("promtool"), "check", "config", "prometheus/prometheus.yml")
    assert "SUCCESS" in out
    jobs = load(DEPLOY / "prometheus/scrape-kubernetes.yml")["scrape_configs"]
    assert all("rag-monitor" in job["job_name"] for job in jobs)


def test_amtool_checks_the_alertmanager_config() -> None:
    out = run(need("amtool"), "check-config", "alertmanager/alertmanager.yml")
    assert "SUCCESS" in out


@pytest.mark.parametrize("path", ["monitor.yaml", "compose/monitor.yaml"])
def test_example_monitor_configs_load(path: str) -> None:
    config = load_config(DEPLOY / path, environ={})
    assert config.alerts.rules and config.alerts.alertmanager.url


def test_kubernetes_configmap_holds_a_valid_config(tmp_path: Path) -> None:
    cm = load(DEPLOY / "kubernetes/configmap.yaml")
    (tmp_path / "config.yaml").write_text(cm["data"]["config.yaml"])
    config = load_config(tmp_path / "config.yaml", environ={})
    assert config.receivers.otlp.grpc.endpoint.startswith("127.0.0.1:")  # sidecar: loopback
    deployment = load(DEPLOY / "kubernetes/deployment.yaml")
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert config.pipeline.shutdown_timeout_s < grace


def _rule_thresholds() -> dict[str, tuple[float, float]]:
    """alert name → (threshold, min_samples) as written in rules.yml."""
    out = {}
    for group in load(DEPLOY / "prometheus/rules.yml")["groups"]:
        for rule in group["rules"]:
            if "alert" in rule and "wilson_lower10m" in rule["expr"]:
                threshold = re.search(r"wilson_lower10m(?:\{[^}]*\})? > ([0-9.]+)", rule["expr"])
                upper = re.search(r"wilson_upper10m(?:\{[^}]*\})? >= ([0-9.]+)", rule["expr"])
                samples = re.search(r"increase10m >= ([0-9]+)", rule["expr"])
                assert threshold and upper and samples, rule["alert"]
                assert threshold.group(1) == upper.group(1), rule["alert"]
                out[rule["alert"]] = (float(threshold.group(1)), float(samples.group(1)))
    return out


def test_prometheus_rules_mirror_the_sidecar_defaults() -> None:
    config = load_config(DEPLOY / "monitor.yaml", environ={})
    prom = _rule_thresholds()
    categories = set()
    for rule in config.alerts.rules:
        if rule.slo is not None:  # RagGroundednessBudgetBurn: tests/deploy/test_deploy_slo.py
            continue
        if rule.cohorts is not None:  # versions in Prometheus: tests/deploy/test_deploy_rollouts.py
            assert rule == CohortRule(
                name=rule.name,
                evaluator="local_groundedness",
                cohorts=AlertCohorts(by="version"),
                severity=rule.severity,
            )
            continue
        if rule.baseline is not None:
            # RagHallucinationRegression: tests/alerts/test_alerts_fleet.py; the share of
            # records without context (the default context_missing_regression) is the
            # sidecar's alone.
            assert rule.measure in ("verdicts", "no_context"), rule.name
            assert rule == RegressionRule(
                name=rule.name,
                evaluator="local_groundedness",
                measure=rule.measure,
                baseline=AlertBaseline(),
                severity=rule.severity,
            )
            continue
        assert rule.window == "10m" and rule.false_page_every is None, rule.name
        # Absolute rules only for rates a healthy service stays well below: the safety
        # categories (the detector's healthy rate is the regression rule's business).
        assert rule.category is not None, rule.name
        assert prom["RagSafetyDefectRateHigh"] == (rule.max_defect_rate, rule.min_samples)
        categories.add(rule.category)
    assert categories == {"hate_unfairness", "sexual", "violence", "self_harm", "jailbreak"}
    text = (DEPLOY / "prometheus/rules.yml").read_text()
    assert config.alerts.false_page_every == FALSE_PAGE_EVERY
    # z of a look every minute (the groups' interval) at the sidecar's default budget.
    z = one_sided_z(look_level(60, parse_duration(FALSE_PAGE_EVERY)))
    assert f"{z:.4f} * sqrt" in text and f"{z * z:.4f}" in text
    names = {
        r["alert"]
        for g in load(DEPLOY / "prometheus/rules.yml")["groups"]
        for r in g["rules"]
        if "alert" in r
    }
    assert "RagHallucinationRateHigh" not in names  # a commented-out example only
    assert {
        "RagJudgeErrorRateHigh",
        "RagEvaluationErrorRateHigh",
        "RagMonitorFleetReadsStale",
        "RagMonitorDroppingRecords",
        "RagMonitorOverloaded",
        "RagMonitorKafkaLagHigh",
        "RagMonitorDown",
    } <= names


def test_dockerfile_runs_non_root_with_a_healthcheck() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    final = text.split("\nFROM ")[-1]
    user = re.search(r"^USER (\S+)", final, re.M)
    assert user and not user.group(1).startswith(("root", "0:", "0\n")) and user.group(1) != "0"
    assert re.search(r"^HEALTHCHECK .*", final, re.M) and "/healthz" in final
    assert re.search(r"^EXPOSE .*9464", final, re.M)
    for copied in re.findall(r"^COPY (?!--from)(\S+)", text, re.M):
        assert (DEPLOY.parent / copied).exists(), copied


def test_kubernetes_sidecar_has_probes_limits_and_scrape_wiring() -> None:
    deployment = load(DEPLOY / "kubernetes/deployment.yaml")
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    # A native sidecar: an init container that keeps running (restartPolicy: Always).
    monitor = {c["name"]: c for c in pod["spec"]["initContainers"]}["rag-monitor"]
    assert monitor["restartPolicy"] == "Always"
    port = {p["name"]: p["containerPort"] for p in monitor["ports"]}["rag-metrics"]
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    assert monitor["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert monitor["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert monitor["resources"]["limits"]["memory"] and monitor["resources"]["requests"]["cpu"]
    assert monitor["securityContext"]["runAsUser"] != 0
    assert monitor["securityContext"]["readOnlyRootFilesystem"] is True
    app_env = {e["name"]: e.get("value") for e in containers["app"]["env"]}
    assert app_env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:4317"
    mounts = {m["name"]: m["mountPath"] for m in monitor["volumeMounts"]}
    assert monitor["args"][-1].startswith(mounts["config"])
    podmonitor = load(DEPLOY / "kubernetes/podmonitor.yaml")
    assert podmonitor["spec"]["podMetricsEndpoints"][0]["port"] == "rag-metrics"
    kustomization = load(DEPLOY / "kubernetes/kustomization.yaml")
    assert all((DEPLOY / "kubernetes" / r).exists() for r in kustomization["resources"])


def test_compose_stack_wires_every_component() -> None:
    compose = load(DEPLOY / "compose.yaml")
    services = compose["services"]
    assert {"app", "rag-monitor", "kafka", "prometheus", "alertmanager", "grafana"} <= set(services)
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert (DEPLOY / source).exists(), source
    scrape = load(DEPLOY / "prometheus/prometheus.yml")["scrape_configs"][0]
    assert scrape["static_configs"][0]["targets"] == ["rag-monitor:9464"]
    assert "--enable-feature=exemplar-storage" in services["prometheus"]["command"]
