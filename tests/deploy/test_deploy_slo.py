"""The SLO in Prometheus: the `rag-monitor-slo` group of deploy/prometheus/rules.yml passes
its `promtool` tests (fast burn pages, slow burn tickets and holds, healthy stays silent),
and it and the Sloth spec (deploy/prometheus/sloth/: validated against Sloth's CRD schema,
strict) carry the sidecar's SLO rule of deploy/monitor.yaml: the same evaluator, objective,
window, long and short windows, burn rates and severities. Both the sidecar's rule and the
Prometheus alerts ship commented out (an objective is chosen from one's own week): the kit
as shipped does not ticket a healthy service whose detector reads 0.35."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from harness.deploy_examples import monitor_with_slo, rules_with_slo, slo_tests_with_alerts
from harness.servers import DEPLOY, need
from monitor.alerts import AlertEngine
from monitor.component import Evaluated
from monitor.config import AlertRule, Config, load_config, parse_duration
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock, record, verdict
from tests.deploy.test_deploy_rollouts import strict

SLOTH = DEPLOY / "prometheus/sloth"
SPEC = SLOTH / "groundedness-slo.yaml"
WINDOWS = SLOTH / "windows/rag-monitor-28d.yaml"
SCHEMA = SLOTH / "schemas/sloth-prometheusservicelevel.json"
GROUP = "rag-monitor-slo"
ALERT = "RagGroundednessBudgetBurn"
# Sloth's AlertWindows type (pkg/prometheus/alertwindows/v1), which has no published schema.
WINDOW_KEYS = {"errorBudgetPercent", "shortWindow", "longWindow"}


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def sidecar_rule() -> AlertRule:
    """The SLO rule of deploy/monitor.yaml, uncommented."""
    config = Config.model_validate(yaml.safe_load(monitor_with_slo()))
    (rule,) = [r for r in config.alerts.rules if r.slo is not None]
    return rule


def sidecar_rows() -> list[tuple[str, float, float, float]]:
    """(severity, burn rate, long s, short s) of each row, most urgent first."""
    slo = sidecar_rule().slo
    assert slo is not None
    window = parse_duration(slo.window)
    return [
        (r.severity, r.factor(window), parse_duration(r.long), parse_duration(r.short))
        for r in slo.burn_rates
    ]


def promtool_test(folder: Path, name: str) -> subprocess.CompletedProcess[str]:
    """`promtool test rules NAME` in `folder`."""
    return subprocess.run(
        [need("promtool"), "test", "rules", name],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=folder,
    )


def test_promtool_runs_the_burn_rate_tests_with_the_alert_uncommented(tmp_path: Path) -> None:
    """Beside the SLO group alone: its alerts read only its own recordings, and the whole
    file passes slo_test.yml as shipped in tests/deploy/test_deploy.py (each group is
    evaluated at every step of every test, for a third of this test's cost)."""
    rules = yaml.safe_load(rules_with_slo())
    rules["groups"] = [g for g in rules["groups"] if g["name"] == GROUP]
    assert rules["groups"], GROUP
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "slo_test.yml").write_text(slo_tests_with_alerts())
    proc = promtool_test(tmp_path, "slo_test.yml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "SUCCESS" in out, out
    tests = yaml.safe_load(slo_tests_with_alerts())["tests"]
    fired = {
        alert["exp_labels"]["severity"]
        for test in tests
        for check in test.get("alert_rule_test", [])
        for alert in check["exp_alerts"]
    }
    assert fired == {"page", "ticket"}
    assert any(
        not check["exp_alerts"]
        for test in tests
        if "healthy" in test["name"]
        for check in test["alert_rule_test"]
    )


def _group() -> list[dict[str, Any]]:
    (group,) = [g for g in yaml.safe_load(rules_with_slo())["groups"] if g["name"] == GROUP]
    rules: list[dict[str, Any]] = group["rules"]
    return rules


def test_the_prometheus_rules_carry_the_sidecars_slo() -> None:
    rule = sidecar_rule()
    assert rule.slo is not None
    budget = 1 - rule.slo.objective
    rules = _group()
    assert {r["labels"]["slo"] for r in rules if "labels" in r and "record" in r} == {rule.name}
    selectors = {m for r in rules if "record" in r for m in re.findall(r"\{([^}]*)\}", r["expr"])}
    assert all(f'evaluator="{rule.evaluator}"' in s for s in selectors if "outcome" in s)
    remaining = next(r for r in rules if r["record"].startswith("rag_monitor:slo_error_budget"))
    assert remaining["expr"] == f"1 - rag_monitor:slo_errors:ratio_rate28d / {budget:g}"
    assert f"[{rule.slo.window}]" in next(
        r["expr"] for r in rules if r.get("record") == "rag_monitor:slo_errors:ratio_rate28d"
    )
    found = []
    for alert in (r for r in rules if r.get("alert") == ALERT):
        severity = alert["labels"]["severity"]
        rows = re.findall(
            r"ratio_rate(\w+) > \(([\d.]+) \* ([\d.]+)\)\n\s+"
            r"and rag_monitor:slo_errors:ratio_rate(\w+) > \(([\d.]+) \* ([\d.]+)\)\n\s+"
            r"and rag_monitor:slo_events:rate(\w+) \* (\d+) >= (\d+)",
            alert["expr"],
        )
        assert rows, alert["expr"]
        for long, f1, b1, short, f2, b2, events_w, seconds, samples in rows:
            assert f1 == f2 and b1 == b2 == f"{budget:g}" and events_w == short
            assert float(seconds) == parse_duration(short)
            assert int(samples) == rule.min_samples
            found.append((severity, float(f1), parse_duration(long), parse_duration(short)))
        # The hysteresis: a firing alert holds on the long windows of its own rows.
        assert f'severity="{severity}", alertstate="firing"' in alert["expr"]
    assert found == sidecar_rows()


def _validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(strict(json.loads(SCHEMA.read_text())))


def test_the_sloth_spec_matches_sloths_crd_schema() -> None:
    spec = load(SPEC)
    errors = sorted(_validator().iter_errors(spec), key=str)
    assert not errors, "\n".join(f"{e.json_path}: {e.message[:200]}" for e in errors[:10])
    assert (spec["apiVersion"], spec["kind"]) == ("sloth.slok.dev/v1", "PrometheusServiceLevel")
    assert "Sloth v0.16.0" in json.loads(SCHEMA.read_text())["$comment"]


def test_the_schema_check_catches_a_misplaced_or_mistyped_field() -> None:
    check = _validator()
    unknown = copy.deepcopy(load(SPEC))
    unknown["spec"]["slos"][0]["objectiv"] = 77
    assert not check.is_valid(unknown)
    mistyped = copy.deepcopy(load(SPEC))
    mistyped["spec"]["slos"][0]["objective"] = "77%"
    assert not check.is_valid(mistyped)


def test_the_sloth_spec_and_windows_carry_the_sidecars_slo() -> None:
    rule = sidecar_rule()
    assert rule.slo is not None
    (slo,) = load(SPEC)["spec"]["slos"]
    assert slo["objective"] == pytest.approx(rule.slo.objective * 100)
    alerting = slo["alerting"]
    assert alerting["name"] == ALERT
    assert alerting["pageAlert"]["labels"]["severity"] == "page"
    assert alerting["ticketAlert"]["labels"]["severity"] == "ticket"
    events = slo["sli"]["events"]
    assert f'evaluator="{rule.evaluator}",outcome="fail"' in events["errorQuery"]
    assert f'evaluator="{rule.evaluator}",outcome=~"pass|fail"' in events["totalQuery"]
    assert all("{{.window}}" in q for q in events.values())

    windows = load(WINDOWS)
    assert (windows["apiVersion"], windows["kind"]) == ("sloth.slok.dev/v1", "AlertWindows")
    spec = windows["spec"]
    assert set(spec) == {"sloPeriod", "page", "ticket"}
    period = parse_duration(spec["sloPeriod"])
    assert period == parse_duration(rule.slo.window)
    rows = []
    for severity in ("page", "ticket"):
        assert set(spec[severity]) == {"quick", "slow"}
        for speed in ("quick", "slow"):
            window = spec[severity][speed]
            assert set(window) == WINDOW_KEYS
            long, short = (
                parse_duration(window["longWindow"]),
                parse_duration(window["shortWindow"]),
            )
            # Sloth's burn rate: the share spent in the long window, over the whole period.
            factor = window["errorBudgetPercent"] / 100 * period / long
            rows.append((severity, factor, long, short))
    expected = sidecar_rows()
    assert [(s, lo, sh) for s, _, lo, sh in rows] == [(s, lo, sh) for s, _, lo, sh in expected]
    assert [f for _, f, _, _ in rows] == pytest.approx([f for _, f, _, _ in expected])


HEALTHY = 0.35  # a healthy service's detector defect rate (it fails faithful long answers)


def test_the_shipped_sidecar_rules_do_not_ticket_a_healthy_service() -> None:
    rules = load_config(DEPLOY / "monitor.yaml", environ={}).alerts.rules
    assert not [r.name for r in rules if r.slo is not None]
    clock = Clock()
    engine = AlertEngine(rules, create_telemetry(), evaluation_interval_s=60.0, clock=clock)
    sent = []
    n = 0
    for _ in range(3 * 24 * 60):  # three days, a look a minute, five verdicts between looks
        for _ in range(5):
            defect = int((n + 1) * HEALTHY) > int(n * HEALTHY)
            n += 1
            engine.emit(
                [
                    Evaluated(
                        record("shop", n),
                        {"local_groundedness": verdict("local_groundedness", passed=not defect)},
                    )
                ]
            )
        clock.now += 60.0
        sent.extend(engine.evaluate())
    assert [(a.rule, a.labels["severity"]) for a in sent] == []


def test_the_shipped_prometheus_rules_do_not_ticket_a_healthy_service(tmp_path: Path) -> None:
    """Eight hours of a steady healthy rate: at a steady rate every burn-rate window reads
    the same ratio, so a longer series would read no other (its cost grows with the square
    of its length: the 28-day rule sums every point at every look); the page's windows and
    the ticket's 2h short window are full by the first look. Against the rules with the
    alerts uncommented this test fails (a page at 6h)."""
    per_minute = 100
    fails = round(per_minute * HEALTHY)
    series = "rag_monitor_evaluations_total"
    labels = 'instance="a",service="shop",route="/ask",evaluator="local_groundedness"'
    test = {
        "rule_files": [str(DEPLOY / "prometheus/rules.yml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": f'{series}{{{labels},outcome="fail"}}',
                        "values": f"0+{fails}x500",
                    },
                    {
                        "series": f'{series}{{{labels},outcome="pass"}}',
                        "values": f"0+{per_minute - fails}x500",
                    },
                ],
                "alert_rule_test": [
                    {"eval_time": t, "alertname": ALERT, "exp_alerts": []} for t in ("6h", "8h")
                ],
            }
        ],
    }
    (tmp_path / "healthy_test.yml").write_text(yaml.safe_dump(test))
    proc = promtool_test(tmp_path, "healthy_test.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
