"""Every monitor config the kit ships carries every embedded default rule
(`monitor.config.DEFAULT_RULES`) whose evaluator it runs: a config that writes its own
`alerts.rules` gives up the defaults, so a default rule left out of a shipped config (the
context-missing regression was, in every one) is a regression nobody pages on. The rules
are compared with the defaults by what they watch (evaluator, measure, kind); the
thresholds a shipped config writes may differ, and a judge escalated from the default's
evaluator may stand for it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.deploy_examples import shipped_monitor_configs
from monitor.config import DEFAULT_RULES, alert_rule, load_config

SHIPPED = shipped_monitor_configs()


def test_every_shipped_config_is_found() -> None:
    """The files found by what they hold include the ones a user is pointed to."""
    assert {
        "deploy/monitor.yaml",
        "deploy/compose/monitor.yaml",
        "deploy/kubernetes/configmap.yaml",
        "deploy/helm/rag-monitor/values.yaml",
        "deploy/helm/rag-monitor/ci/sidecar-values.yaml",
        "examples/config.yaml",
    } <= set(SHIPPED)


@pytest.mark.parametrize("where", sorted(SHIPPED))
def test_every_default_rule_is_in_every_shipped_config(tmp_path: Path, where: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(SHIPPED[where]))
    config = load_config(path, environ={"JUDGE_API_KEY": "k" * 32})
    runs = {entry.name for entry in config.evaluators}
    by_name = {rule.name: rule for rule in config.alerts.rules}
    for default in map(alert_rule, DEFAULT_RULES):
        if default.evaluator not in runs:
            continue
        assert default.name in by_name, f"{where}: no {default.name} (a default rule)"
        rule = by_name[default.name]
        # The default's evaluator, or a judge escalated from it (its verdicts replace the
        # detector's in its band).
        same = {default.evaluator} | {
            entry.name for entry in config.evaluators if entry.escalate_from == default.evaluator
        }
        assert rule.evaluator in same, (where, rule.name, rule.evaluator)
        watched = (rule.kind, rule.category, rule.measure)
        assert watched == (default.kind, default.category, default.measure), (where, rule.name)
