"""The fleet rules in deploy/prometheus/rules.yml and the sidecar's regression rule agree.

One synthetic series (verdicts per minute: a steady 30 % defect rate for 25 hours, 50 %
for an hour, 30 % again) is fed to the alert engine, minute by minute with an injected
clock, and written as a `promtool test rules` file whose expectations are the engine's
verdicts at chosen times: the test passes only if Prometheus fires exactly when the engine
does. The times sit away from the edges where the engine's bucketed windows and
Prometheus's `increase()` extrapolation may differ by a minute.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from harness.servers import DEPLOY, need
from monitor.alerts import AlertEngine
from monitor.component import Evaluated
from monitor.config import FALSE_PAGE_EVERY, AlertBaseline, RegressionRule, parse_duration
from monitor.evidence.stats import look_level, one_sided_z
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry

PER_MINUTE = 60
HEALTHY, RISEN = 0.30, 0.50
RISE_AT, RISE_FOR = 1500, 60  # minutes
END = RISE_AT + RISE_FOR + 60
# Healthy; rise not yet significant; paged; still firing (hysteresis) after the rise
# ended; resolved.
CHECKS = (1495, RISE_AT + 2, RISE_AT + 15, RISE_AT + RISE_FOR + 5, RISE_AT + RISE_FOR + 45)
ALERT = "RagHallucinationRegression"


def defect_rate(minute: int) -> float:
    return RISEN if RISE_AT < minute <= RISE_AT + RISE_FOR else HEALTHY


def per_minute() -> list[tuple[int, int]]:
    """(samples, defects) in the minute ending at each minute mark 1..END."""
    out, total = [], 0.0
    for minute in range(1, END + 1):
        before = round(total)
        total += PER_MINUTE * defect_rate(minute)
        out.append((PER_MINUTE, round(total) - before))
    return out


def engine_verdicts(counts: list[tuple[int, int]]) -> dict[int, bool]:
    # The fleet rule mirrors the fixed-window test: PromQL has no sequential state.
    rule = RegressionRule(
        name="hallucination_regression",
        evaluator="local_groundedness",
        baseline=AlertBaseline(),
        test="window",
    )
    now = [0.0]
    # Judged every minute, as the Prometheus rule group is: the same level per look.
    engine = AlertEngine(
        [rule], create_telemetry(), evaluation_interval_s=60.0, clock=lambda: now[0]
    )
    record = RagRecord(request_id="r", service="shop", response="a")
    results = {
        fail: {"local_groundedness": EvalResult(name="local_groundedness", passed=not fail)}
        for fail in (False, True)
    }
    firing = {}
    for minute, (samples, defects) in enumerate(counts, start=1):
        for i in range(samples):
            now[0] = (minute - 1) * 60 + (i + 1) * 60 / samples
            engine.emit([Evaluated(record, results[i < defects])])
        now[0] = minute * 60.0
        engine.evaluate()
        firing[minute] = bool(engine.firing())
    return {minute: firing[minute] for minute in CHECKS}


def alert_group(path: Path) -> Path:
    """The group of deploy/prometheus/rules.yml that holds `ALERT`, alone in a rules file at
    `path`: promtool evaluates every rule of the files it is given each minute, and the
    other groups are no part of the page. The group must record every `rag_monitor:`
    series its rules read, so that it pages on its own as it does among the others."""
    groups = yaml.safe_load((DEPLOY / "prometheus" / "rules.yml").read_text())["groups"]
    (group,) = [g for g in groups if any(r.get("alert") == ALERT for r in g["rules"])]
    recorded = {r["record"] for r in group["rules"] if "record" in r}
    read = {name for r in group["rules"] for name in re.findall(r"rag_monitor:[\w:]+", r["expr"])}
    assert read <= recorded, f"{ALERT}'s group reads {sorted(read - recorded)} from elsewhere"
    path.write_text(yaml.safe_dump({"groups": [group]}, width=1 << 30))
    return path


def promtool_file(path: Path, counts: list[tuple[int, int]], expected: dict[int, bool]) -> None:
    fails, passes = [0], [0]
    for samples, defects in counts:
        fails.append(fails[-1] + defects)
        passes.append(passes[-1] + samples - defects)
    labels = 'instance="a",service="shop",route="/ask",evaluator="local_groundedness"'
    firing = (
        f'ALERTS{{alertname="{ALERT}",alertstate="firing",evaluator="local_groundedness",'
        'service="shop",severity="page"}'
    )
    test = {
        "rule_files": [str(alert_group(path.with_name("rules.yml")))],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": f'rag_monitor_evaluations_total{{{labels},outcome="{outcome}"}}',
                        "values": " ".join(str(v) for v in values),
                    }
                    for outcome, values in (("fail", fails), ("pass", passes))
                ],
                "promql_expr_test": [
                    {
                        "expr": f'ALERTS{{alertname="{ALERT}",alertstate="firing"}}',
                        "eval_time": f"{minute}m",
                        "exp_samples": [{"labels": firing, "value": 1}] if fires else [],
                    }
                    for minute, fires in expected.items()
                ],
            }
        ],
    }
    path.write_text(yaml.safe_dump(test, width=1 << 30))


def test_engine_and_prometheus_rules_agree_on_the_same_series(tmp_path: Path) -> None:
    counts = per_minute()
    expected = engine_verdicts(counts)
    # The scenario exercises every transition: quiet, firing, holding, resolved.
    assert list(expected.values()) == [False, False, True, True, False]
    path = tmp_path / "agreement_test.yml"
    promtool_file(path, counts, expected)
    proc = subprocess.run(
        [need("promtool"), "test", "rules", str(path)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fleet_rule_constants_are_the_sidecar_defaults() -> None:
    rule = RegressionRule(name="r", evaluator="local_groundedness", baseline=AlertBaseline())
    assert rule.baseline is not None
    groups = yaml.safe_load((DEPLOY / "prometheus" / "rules.yml").read_text())["groups"]
    alert = next(r for g in groups for r in g["rules"] if r.get("alert") == ALERT)
    expr = alert["expr"]
    half = (rule.min_increase or 0) / 2
    assert f">= {half}" in expr
    assert f"increase30m >= {rule.min_samples}" in expr
    assert f"increase24h_offset30m >= {rule.baseline.min_samples}" in expr
    assert (rule.window, rule.baseline.window) == ("30m", "24h")
    z = one_sided_z(look_level(60, parse_duration(FALSE_PAGE_EVERY)))
    assert f'regression_z{{evaluator=~"local_groundedness|groundedness"}} > {z:.4f}' in expr
    record = next(
        r for g in groups for r in g["rules"] if r.get("record", "").endswith("regression_z")
    )
    assert f"increase30m_vs_24h - {half})" in record["expr"]
