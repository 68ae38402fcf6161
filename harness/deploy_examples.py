"""The deploy kit's commented-out examples, uncommented: what a user gets who follows the
comment and removes the `# `. Shipped commented out: the absolute hallucination rate
(`hallucination_rate`, `RagHallucinationRateHigh`) and the SLO (`groundedness_slo`,
`RagGroundednessBudgetBurn`, and the promtool tests of that alert), whose thresholds must come
from the user's own healthy traffic."""

from __future__ import annotations

from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"

SIDECAR_SLO = "# - name: groundedness_slo"
PROMETHEUS_SLO = "# - alert: RagGroundednessBudgetBurn"
SLO_ALERT_TESTS = "# alert_rule_test:"


def uncommented(text: str, first: str) -> str:
    """`text` with every commented-out block that starts with the line `first` (`# ...`)
    uncommented: that line and the comment lines below it at the same column."""
    lines = text.splitlines()
    if not any(line.strip() == first for line in lines):
        raise ValueError(f"no line {first!r} to uncomment")
    # A block may hold a later line `first` too; it is uncommented with the block.
    while first in (stripped := [line.strip() for line in lines]):
        start = stripped.index(first)
        column = lines[start].index("#")
        end = start
        while end < len(lines) and lines[end][column : column + 2] in ("# ", "#"):
            if lines[end][:column].strip():
                break
            lines[end] = lines[end][:column] + lines[end][column + 2 :]
            end += 1
    return "\n".join(lines) + "\n"


def monitor_with_slo() -> str:
    """deploy/monitor.yaml with its SLO rule uncommented."""
    return uncommented((DEPLOY / "monitor.yaml").read_text(), SIDECAR_SLO)


def rules_with_slo() -> str:
    """deploy/prometheus/rules.yml with its SLO alerts uncommented."""
    return uncommented((DEPLOY / "prometheus/rules.yml").read_text(), PROMETHEUS_SLO)


def slo_tests_with_alerts() -> str:
    """deploy/prometheus/slo_test.yml with its tests of the SLO alerts uncommented."""
    return uncommented((DEPLOY / "prometheus/slo_test.yml").read_text(), SLO_ALERT_TESTS)


def _monitor_config(document: object) -> dict[str, object] | None:
    """The monitor config a shipped YAML document holds: itself (a monitor config), its
    `config` (Helm values) or its `data["config.yaml"]` (a ConfigMap); None for others."""
    if not isinstance(document, dict):
        return None
    data = document.get("data")
    if document.get("kind") == "ConfigMap" and isinstance(data, dict):
        text = data.get("config.yaml")
        inner = yaml.safe_load(text) if isinstance(text, str) else None
        return inner if isinstance(inner, dict) else None
    config = document.get("config")
    if isinstance(config, dict) and {"evaluators", "alerts", "receivers"} & set(config):
        return config
    if {"evaluators", "alerts"} & set(document) and "apiVersion" not in document:
        return document
    return None


def shipped_monitor_configs() -> dict[str, dict[str, object]]:
    """Every monitor config the repository ships (deploy/ and examples/, found by what the
    files hold, not by a list of names), by its path (and document where a file holds
    several)."""
    out: dict[str, dict[str, object]] = {}
    for folder in (DEPLOY, DEPLOY.parent / "examples"):
        for path in sorted([*folder.rglob("*.yaml"), *folder.rglob("*.yml")]):
            if "templates" in path.parts:  # Helm templates are not YAML until rendered
                continue
            try:
                documents = list(yaml.safe_load_all(path.read_text()))
            except yaml.YAMLError:
                continue
            for n, document in enumerate(documents):
                config = _monitor_config(document)
                if config is not None:
                    name = str(path.relative_to(DEPLOY.parent))
                    out[name if len(documents) == 1 else f"{name}#{n}"] = config
    return out
