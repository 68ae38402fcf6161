"""One source for the thresholds the deploy kit restates.

The Prometheus rules, their tests, the rollout templates, the Grafana panel texts and the
docs' tables repeat numbers the sidecar's rules own: `min_increase` and half of it, the
verdicts a window needs, the z a look must pass at the false-page budget, and the shipped
examples' SLO and safety thresholds. `Figures` (figures.py) computes them from the config
defaults (read by field name in `rule_default`), the statistics the rules judge with and
the shipped examples; `COPIES` (copies.py) lists every place a file restates one, and
`python -m harness.thresholds` rewrites them (`--check`: lists what is out of date, changes
nothing; rewrite.py). The rollout templates' query is written whole (`canary_query`): the
cohort rule's test in PromQL. The dashboard's panels that draw an alert's threshold
(`PANEL_THRESHOLDS`) take it from the rules. A z the kit writes where `COPIES` does not list it is a stray
copy (`strays`).
"""

from harness.thresholds.copies import BLOCKS, COPIES, DASHBOARD, KIT, RULES
from harness.thresholds.figures import (
    RULES_INTERVAL_S,
    Figures,
    SafetyFigures,
    SloFigures,
    alerts_default,
    canary_query,
    cohort_pages,
    default_rule,
    rule_default,
)
from harness.thresholds.rewrite import CopyMissing, main, rendered, stale, strays, write

__all__ = [
    "BLOCKS",
    "COPIES",
    "DASHBOARD",
    "KIT",
    "RULES",
    "RULES_INTERVAL_S",
    "CopyMissing",
    "Figures",
    "SafetyFigures",
    "SloFigures",
    "alerts_default",
    "canary_query",
    "cohort_pages",
    "default_rule",
    "main",
    "rendered",
    "rule_default",
    "stale",
    "strays",
    "write",
]
