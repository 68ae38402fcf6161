"""Where the kit restates a figure: each place as the text around it (`Copy`), and the
blocks written whole (`Block`). A reworded copy fails the generator by name: update its
pattern here to the text as it reads now."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.thresholds.figures import Figures, canary_query


@dataclass(frozen=True)
class Copy:
    """A place where `path` restates figures: `pattern` is its text with `{name}` where a
    figure of `Figures.slots` stands; it occurs `count` times."""

    path: str
    pattern: str
    count: int = 1


@dataclass(frozen=True)
class Block:
    """A YAML block scalar of `path` that is written whole: the lines below the line
    `key` (stripped) that are indented deeper, from `render(figures)`."""

    path: str
    key: str
    render: Callable[[Figures], str]


@dataclass(frozen=True)
class PanelThreshold:
    """A dashboard panel that draws an alert's threshold: its red step, and every
    percentage its title and description write, are the number the alert compares its
    series with in rules.yml."""

    panel_id: int
    alert: str


RULES = "deploy/prometheus/rules.yml"
ARGO = "deploy/rollouts/argo-analysistemplate.yaml"
FLAGGER = "deploy/rollouts/flagger-metrictemplate.yaml"
DASHBOARD = "grafana/dashboards/rag-monitor.json"
COHORT_TEST = (
    "the canary's defect rate is more than half of min_increase ({cohort_half_increase}) above "
    "the rest's beyond chance (one-sided z >= {cohort_z}"
)

COPIES: tuple[Copy, ...] = (
    # The Wilson bounds and the regression's window test at a look a minute.
    Copy(RULES, "one false page per {budget_days} days per rule and service."),
    Copy(RULES, "60 s / {budget_days} d = {rules_level}: one-sided z = {z} "),
    Copy(RULES, "Wilson interval at z = {z} (z^2 = {z2})"),
    Copy(RULES, "{z}, {z2_half} (z^2/2), {z2_quarter} (z^2/4) and {z2}."),
    Copy(RULES, "defect_rate:ratio10m + {z2_half} / rag_monitor:", 4),
    Copy(RULES, "- {z} * sqrt(", 2),
    Copy(RULES, "+ {z} * sqrt(", 2),
    Copy(RULES, "+ {z2_quarter} / rag_monitor:evaluation_samples:increase10m ^ 2", 2),
    Copy(RULES, "+ {z2_quarter} / rag_monitor:safety_samples:increase10m ^ 2", 2),
    Copy(RULES, "(1 + {z2} / rag_monitor:", 4),
    Copy(
        RULES,
        "min_samples {regression_min_samples}, baseline {baseline_window} / "
        "{baseline_min_samples}, min_increase {min_increase}, one false page per {budget})",
    ),
    Copy(RULES, "(increase - {half_increase}) / se > {z} "),
    Copy(RULES, "increase30m_vs_24h - {half_increase})"),
    Copy(RULES, 'regression_z{evaluator=~"local_groundedness|groundedness"} > {z}'),
    Copy(RULES, "rag_monitor:evaluation_samples:increase30m >= {regression_min_samples}"),
    Copy(RULES, "increase24h_offset30m >= {baseline_min_samples}"),
    Copy(
        RULES,
        'increase30m_vs_24h{evaluator=~"local_groundedness|groundedness"} >= {half_increase}',
    ),
    Copy(RULES, "min_increase {min_increase}, beyond chance at one false page per {budget}."),
    Copy(
        "deploy/prometheus/rules_test.yml",
        "min_increase {min_increase}, beyond chance at one false page per {budget}.",
        count=3,  # the regression alert's tests: a rise, a canary named, a revision's rise
    ),
    Copy("deploy/monitor.yaml", "window, min_increase {min_increase}); "),
    Copy("deploy/README.md", "it pages a rise of `min_increase` ({min_increase}) or more"),
    Copy("deploy/README.md", "60 s / {budget_days} d: z = {z}):"),
    Copy(
        "deploy/README.md",
        "one-sided z of (increase - {half_increase}) / se > {z}, ≥ {regression_min_samples} "
        "and ≥ {baseline_min_samples} verdicts",
    ),
    Copy("deploy/README.md", "at z = {z}; for another budget"),
    Copy(
        "deploy/README.md",
        COHORT_TEST + ", a look every {interval_s} s at one of two versions, one false page "
        "per {budget})",
    ),
    Copy("deploy/README.md", "at least {cohort_min_samples} verdicts on each side"),
    Copy(ARGO, COHORT_TEST + "), passes"),
    Copy(ARGO, "at least {cohort_min_samples} verdicts and"),
    Copy(FLAGGER, COHORT_TEST + "), 0 when"),
    Copy(FLAGGER, "at least {cohort_min_samples} verdicts"),
    Copy(
        DASHBOARD,
        "by more than half of min_increase {min_increase} and a one-sided two-proportion "
        "z-test says so at one false page per {budget} (z > {z}), with "
        "{regression_min_samples} current and {baseline_min_samples} baseline verdicts",
    ),
    Copy(DASHBOARD, "Wilson bounds at z = {z})"),
    Copy(DASHBOARD, "(z = {z}: a look a minute, one false page per {budget})"),
    Copy(DASHBOARD, COHORT_TEST + "), with at least {cohort_min_samples} verdicts on each side"),
    Copy("README.md", "(default `{budget}`, per rule and service)"),
    Copy("README.md", "A rise of twice `min_increase` ({twice_increase}) or more"),
    Copy("examples/config.yaml", "window: {regression_window} # the current window (default)"),
    Copy(
        "examples/config.yaml",
        "baseline: {window: {baseline_window}, min_samples: {baseline_min_samples}} # the",
    ),
    Copy("examples/config.yaml", "min_samples: {regression_min_samples} min_increase: "),
    Copy("examples/config.yaml", "min_increase: {min_increase} # the smallest rise worth a page"),
    Copy("examples/config.yaml", "false_page_every: {budget} # how rarely it may page"),
    Copy(
        "docs/contract.md",
        "(defaults `{baseline_window}`, {baseline_min_samples}, `week`, `7d`), `window` "
        "(default `{regression_window}`), `min_samples` ({regression_min_samples}), "
        "`min_increase` ({min_increase}),",
    ),
    Copy(
        "docs/alerts.md",
        "# window: {regression_window}, min_samples: {regression_min_samples}, min_increase: "
        "{min_increase}, test: sequential (defaults)",
    ),
    Copy(
        "docs/alerts.md",
        "# window: {cohort_window}, min_samples: {cohort_min_samples}, min_increase: "
        "{cohort_min_increase} (defaults)",
    ),
    Copy("docs/alerts.md", "(default `alerts.false_page_every: {budget}`)"),
    Copy(
        "docs/alerts.md",
        "`min_increase: {min_increase}` keeps very busy services (where any small, real change "
        "is significant) from paging on changes too small to matter; `min_samples: "
        "{regression_min_samples}` keeps quiet services from paging on a handful of verdicts; "
        "one false page per {budget_days} days",
    ),
    # The contract's table of each form's defaults (also checked by tests/project).
    Copy("docs/contract.md", "| `window` | `{regression_window}` | `{cohort_window}` |"),
    Copy(
        "docs/contract.md",
        "| `min_samples` | `{regression_min_samples}` | `{cohort_min_samples}` |",
    ),
    Copy("docs/contract.md", "| `min_increase` | `{min_increase}` | `{cohort_min_increase}` |"),
    Copy("docs/contract.md", "| `baseline.window` | `{baseline_window}` |"),
    Copy("docs/contract.md", "| `baseline.min_samples` | `{baseline_min_samples}` |"),
)


def _slo_rows(then: str, ticket: str, last: str) -> str:
    """The example's four burn-rate rows as a sentence writes them: two that page, joined
    by `then`, `ticket`, and two that ticket, joined by `last`."""
    return (
        f"{{slo_rate_0}} over {{slo_long_0}} and {{slo_short_0}}{then}{{slo_rate_1}} over "
        f"{{slo_long_1}} and {{slo_short_1}}{ticket}{{slo_rate_2}} over {{slo_long_2}} and "
        f"{{slo_short_2}}{last}{{slo_long_3}} and {{slo_short_3}}"
    )


SLOTH = "deploy/prometheus/sloth"

# The SLO example's copies (SloFigures); its PromQL and the Sloth spec's fields are checked
# by tests/deploy/test_deploy_slo.py.
SLO_COPIES: tuple[Copy, ...] = (
    Copy(
        RULES,
        "at least {slo_objective_pct} % of local_groundedness verdicts pass over "
        "{slo_window_days} days; the error budget is the other {slo_budget_pct} %.",
    ),
    Copy(
        RULES,
        "(burn rate = error ratio / {slo_budget}): page at "
        + _slo_rows(" or at ", ", ticket at ", " or over ")
        + ". A row needs {slo_min_samples} verdicts",
    ),
    Copy(RULES, "For another objective, replace {slo_budget}."),
    Copy(RULES, "1 - rag_monitor:slo_errors:ratio_rate28d / {slo_budget}"),
    # The rows' burn rates in the alerts' PromQL: checked by test_deploy_slo.py.
    Copy(RULES, " * {slo_budget})", 12),
    Copy(RULES, "at this {slo_budget} budget"),
    Copy(RULES, "replace {slo_budget} and {slo_objective_pct} % throughout"),
    Copy(RULES, "({slo_objective_pct} % grounded over {slo_window})", 2),
    Copy(
        "deploy/README.md",
        "above a burn rate x {slo_budget} (page: "
        + _slo_rows(", ", "; ticket: ", ", ")
        + "), ≥ {slo_min_samples} verdicts in the short window",
    ),
    Copy("deploy/README.md", "(`slo: {objective: {slo_objective}, window: {slo_window}}`)"),
    Copy("deploy/monitor.yaml", "# defect rate > {slo_threshold_0}"),
    Copy("deploy/monitor.yaml", "severity: page} # > {slo_threshold_1}"),
    Copy("deploy/monitor.yaml", "# > {slo_threshold_2}: spent faster than it lasts"),
    Copy(
        f"{SLOTH}/windows/rag-monitor-28d.yaml",
        "# burn rate {slo_rate_0}: defect rate above {slo_threshold_0}",
    ),
    Copy(
        f"{SLOTH}/windows/rag-monitor-28d.yaml",
        "slow: # burn rate {slo_rate_1}: above {slo_threshold_1}",
    ),
    Copy(
        f"{SLOTH}/windows/rag-monitor-28d.yaml",
        "# burn rate {slo_rate_2}: above {slo_threshold_2}, the budget",
    ),
    Copy(f"{SLOTH}/windows/rag-monitor-28d.yaml", "slow: # burn rate {slo_rate_3}\n"),
    Copy(
        f"{SLOTH}/groundedness-slo.yaml",
        "{slo_objective_pct} % of local_groundedness verdicts pass over {slo_window_days} days",
    ),
    Copy(f"{SLOTH}/groundedness-slo.yaml", "at {slo_objective_pct} a healthy service"),
    Copy(f"{SLOTH}/groundedness-slo.yaml", "objective: {slo_objective_pct}\n"),
    Copy(
        f"{SLOTH}/groundedness-slo.yaml",
        "At least {slo_objective_pct} % of answers grounded (local_groundedness passes) over "
        "{slo_window_days} days.",
    ),
    Copy(f"{SLOTH}/README.md", "objective ({slo_objective_pct} %), window ({slo_window})"),
    Copy(f"{SLOTH}/README.md", "`deploy/monitor.yaml`), {slo_objective_pct} % is an"),
    Copy(f"{SLOTH}/README.md", "tickets daily at {slo_objective_pct} %."),
)
# The safety categories' absolute rules (SafetyFigures); the PromQL's thresholds are checked
# by test_deploy.py, the dashboard's by test_deploy_grafana.py.
SAFETY_COPIES: tuple[Copy, ...] = (
    Copy("deploy/monitor.yaml", "a defect rate # confidently above {safety_pct} %"),
    Copy(RULES, "(max_defect_rate {safety_rate}, one alert per"),
    Copy(RULES, "safety_defect_rate:wilson_lower10m > {safety_rate}"),
    Copy(RULES, "safety_defect_rate:wilson_upper10m >= {safety_rate}"),
    Copy(RULES, "safety_samples:increase10m >= {safety_min_samples}"),
    Copy(RULES, "{{ $labels.service }} above {safety_pct}%"),
    Copy(RULES, "over 10m is above {safety_rate} (bound"),
    Copy(
        "deploy/README.md",
        "over 10m > {safety_rate} with ≥ {safety_min_samples} verdicts; stays until the upper "
        "bound < {safety_rate}",
    ),
)
# The shipped configs that write the regression rules' baseline (the hallucination and the
# context-missing rule's) and the safety rule out: the sidecar they run judges as the
# Prometheus rules do only while they agree.
BASELINE = "baseline: {window: {baseline_window}, min_samples: {baseline_min_samples}}"
# deploy/monitor.yaml's safety rules are where SafetyFigures reads the threshold.
SAFETY_RULE = (
    "category: violence max_defect_rate: {safety_rate} window: 10m min_samples: "
    "{safety_min_samples}"
)
CONFIG_COPIES: tuple[Copy, ...] = (
    *(
        Copy(path, BASELINE, count=2)
        for path in (
            "deploy/monitor.yaml",
            "deploy/compose/monitor.yaml",
            "deploy/kubernetes/configmap.yaml",
            "deploy/helm/rag-monitor/values.yaml",
        )
    ),
    Copy("deploy/compose/monitor.yaml", SAFETY_RULE),
    Copy("deploy/kubernetes/configmap.yaml", SAFETY_RULE),
)
COPIES = COPIES + SLO_COPIES + SAFETY_COPIES + CONFIG_COPIES

BLOCKS: tuple[Block, ...] = (
    Block(
        ARGO,
        "query: |",
        lambda f: canary_query(
            "{{args.service}}", "{{args.evaluator}}", "{{args.canary-version}}", f, too_few="-1"
        ),
    ),
    Block(
        FLAGGER,
        "query: |",
        lambda f: canary_query(
            "{{ variables.service }}",
            "{{ variables.evaluator }}",
            "{{ variables.canary_version }}",
            f,
            too_few=None,
        ),
    ),
)

# Where a figure may be restated: the folders and files users read.
KIT = ("deploy", "grafana", "docs", "examples", "README.md")

# The panels that draw an alert's threshold, from the rules (a commented-out example too).
PANEL_THRESHOLDS: tuple[PanelThreshold, ...] = (
    PanelThreshold(2, "RagHallucinationRateHigh"),
    PanelThreshold(11, "RagSafetyDefectRateHigh"),
    PanelThreshold(71, "RagTrafficUnscored"),
    PanelThreshold(73, "RagEvaluationsSkipped"),
)
