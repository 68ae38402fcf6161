"""The deploy kit's commented-out examples, uncommented: what a user gets who follows the
comment and removes the `# `. Shipped commented out: the absolute hallucination rate
(`hallucination_rate`, `RagHallucinationRateHigh`) and the SLO (`groundedness_slo`,
`RagGroundednessBudgetBurn`, and the promtool tests of that alert), whose thresholds must come
from the user's own healthy traffic."""

from __future__ import annotations

from pathlib import Path

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
