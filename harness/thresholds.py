"""One source for the thresholds the deploy kit restates.

The Prometheus rules, their tests, the rollout templates, the Grafana panel texts and the
docs' tables repeat numbers the sidecar's rules own: `min_increase` and half of it, the
verdicts a window needs, the z a look must pass at the false-page budget. `Figures` computes
them from the config defaults (read by field name in `rule_default`) and the statistics
the rules judge with; `COPIES` lists every place a file restates one, and `python -m
harness.thresholds` rewrites them (`--check`: lists what is out of date, changes nothing).
The rollout templates' query is written whole (`canary_query`): the cohort rule's test in
PromQL. A number the kit writes that `COPIES` does not list is a stray copy (`strays`).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from harness.deploy_examples import monitor_with_slo
from monitor.alerts.evidence.stats import increase_p_value, look_level, one_sided_z
from monitor.alerts.evidence.window import Moments
from monitor.config import Alerts, Config, parse_duration

ROOT = Path(__file__).resolve().parents[1]

# Prometheus evaluates the rule groups of deploy/prometheus/rules.yml once a minute
# (`interval: 1m`): each evaluation is a look that may page falsely.
RULES_INTERVAL_S = 60.0
# A canary is judged by the cohort rule beside one other version, the stable one: the
# rule's false-page budget is shared between the two cohorts it judges.
CANARY_COHORTS = 2

# A minimal rule of each form: what a user writes who states only the form.
_FORMS: Mapping[str, dict[str, Any]] = {
    "regression": {"baseline": {}},
    "cohorts": {"cohorts": {"by": "version"}},
    "absolute": {"max_defect_rate": 0.5},
    "slo": {"slo": {"objective": 0.77}},
}


def rule_default(form: str, field: str) -> Any:
    """The default of a rule's `field` (dotted for a nested one: `baseline.min_samples`)
    for a rule of `form` that states nothing else, as the config resolves it."""
    rule = {"name": "defaults", "evaluator": "local_groundedness", **_FORMS[form]}
    value: Any = Alerts.model_validate({"rules": [rule]}).rules[0]
    for part in field.split("."):
        value = getattr(value, part)
    return value


def alerts_default(field: str) -> Any:
    """The default of an `alerts` key (`false_page_every`, `evaluation_interval_s`)."""
    return getattr(Alerts(), field)


@dataclass(frozen=True)
class SloFigures:
    """The SLO the kit ships as an example (deploy/monitor.yaml's `groundedness_slo`,
    commented out): its objective is the user's to choose, so the Prometheus rules, the
    Sloth spec and the texts restate the example, not a default."""

    objective: float
    window: str
    min_samples: int
    # (burn rate, long, short) of each row, most urgent first.
    rows: tuple[tuple[float, str, str], ...]

    @classmethod
    def shipped(cls) -> SloFigures:
        config = Config.model_validate(yaml.safe_load(monitor_with_slo()))
        (rule,) = [r for r in config.alerts.rules if r.slo is not None]
        assert rule.slo is not None
        window = parse_duration(rule.slo.window)
        rows = tuple((r.factor(window), r.long, r.short) for r in rule.slo.burn_rates)
        return cls(rule.slo.objective, rule.slo.window, rule.min_samples, rows)

    def slots(self) -> dict[str, str]:
        budget = 1 - self.objective
        out = {
            "slo_budget": f"{budget:g}",
            "slo_objective": f"{self.objective:g}",
            "slo_objective_pct": f"{self.objective * 100:g}",
            "slo_budget_pct": f"{budget * 100:g}",
            "slo_window": self.window,
            "slo_window_days": f"{parse_duration(self.window) / 86_400:g}",
            "slo_min_samples": str(self.min_samples),
        }
        for k, (rate, long, short) in enumerate(self.rows):
            out |= {
                f"slo_rate_{k}": f"{rate:g}",
                f"slo_long_{k}": long,
                f"slo_short_{k}": short,
                f"slo_threshold_{k}": f"{rate * budget:.4g}",
            }
        return out


@dataclass(frozen=True)
class SafetyFigures:
    """The absolute rules deploy/monitor.yaml ships on the safety categories, one threshold
    for all of them, which RagSafetyDefectRateHigh mirrors."""

    max_defect_rate: float
    min_samples: int

    @classmethod
    def shipped(cls) -> SafetyFigures:
        config = Config.model_validate(yaml.safe_load((ROOT / "deploy/monitor.yaml").read_text()))
        rules = {
            (r.max_defect_rate, r.min_samples)
            for r in config.alerts.rules
            if r.category is not None
        }
        ((rate, least),) = rules
        assert rate is not None
        return cls(rate, least)

    def slots(self) -> dict[str, str]:
        return {
            "safety_rate": f"{self.max_defect_rate:g}",
            "safety_pct": f"{self.max_defect_rate * 100:g}",
            "safety_min_samples": str(self.min_samples),
        }


@dataclass(frozen=True)
class Figures:
    """The numbers the kit restates, from the defaults of the rules they mirror."""

    min_increase: float
    regression_window: str
    regression_min_samples: int
    baseline_window: str
    baseline_min_samples: int
    cohort_min_increase: float
    cohort_window: str
    cohort_min_samples: int
    false_page_every: str
    evaluation_interval_s: float
    slo: SloFigures
    safety: SafetyFigures

    @classmethod
    def from_defaults(cls) -> Figures:
        return cls(
            min_increase=rule_default("regression", "min_increase"),
            regression_window=rule_default("regression", "window"),
            regression_min_samples=rule_default("regression", "min_samples"),
            baseline_window=rule_default("regression", "baseline.window"),
            baseline_min_samples=rule_default("regression", "baseline.min_samples"),
            cohort_min_increase=rule_default("cohorts", "min_increase"),
            cohort_window=rule_default("cohorts", "window"),
            cohort_min_samples=rule_default("cohorts", "min_samples"),
            false_page_every=alerts_default("false_page_every"),
            evaluation_interval_s=alerts_default("evaluation_interval_s"),
            slo=SloFigures.shipped(),
            safety=SafetyFigures.shipped(),
        )

    def but(self, **changes: Any) -> Figures:
        return replace(self, **changes)

    @property
    def budget_s(self) -> float:
        return parse_duration(self.false_page_every)

    @property
    def rules_level(self) -> float:
        """The chance of a false page a look of the Prometheus rules may take."""
        return look_level(RULES_INTERVAL_S, self.budget_s)

    @property
    def rules_z(self) -> float:
        return one_sided_z(self.rules_level)

    @property
    def cohort_level(self) -> float:
        """The chance of a false page the sidecar's cohort rule takes at a look at a canary
        beside the stable version, at its default evaluation interval."""
        return look_level(self.evaluation_interval_s, self.budget_s, CANARY_COHORTS)

    @property
    def cohort_z(self) -> float:
        return one_sided_z(self.cohort_level)

    def slots(self) -> dict[str, str]:
        """Each figure as the files write it, by the name `COPIES` patterns use."""
        z = self.rules_z
        return {
            "z": f"{z:.4f}",
            "z2": f"{z * z:.4f}",
            "z2_half": f"{z * z / 2:.4f}",
            "z2_quarter": f"{z * z / 4:.4f}",
            "rules_level": f"{self.rules_level:.2g}".replace("e-0", "e-"),
            "budget": self.false_page_every,
            "budget_days": f"{self.budget_s / 86_400:g}",
            "min_increase": f"{self.min_increase:g}",
            "half_increase": f"{self.min_increase / 2:g}",
            "twice_increase": f"{self.min_increase * 2:g}",
            "regression_window": self.regression_window,
            "regression_min_samples": str(self.regression_min_samples),
            "baseline_window": self.baseline_window,
            "baseline_min_samples": str(self.baseline_min_samples),
            "cohort_min_increase": f"{self.cohort_min_increase:g}",
            "cohort_half_increase": f"{self.cohort_min_increase / 2:g}",
            "cohort_min_samples": str(self.cohort_min_samples),
            "cohort_z": f"{self.cohort_z:.4f}",
            "interval_s": f"{self.evaluation_interval_s:g}",
            **self.slo.slots(),
            **self.safety.slots(),
        }


def cohort_pages(canary: tuple[int, int], rest: tuple[int, int], figures: Figures) -> bool:
    """Whether the sidecar's cohort rule pages a canary of `canary` (verdicts, defects)
    against the rest of its service, `rest`, at the rule's defaults: both sides hold
    `min_samples`, and the pooled z-test rejects "the canary's rate is at most half of
    `min_increase` above the rest's" at the level of a look at one of two cohorts
    (monitor/alerts/kinds/cohorts.py). Verdicts are taken as independent (design effect 1):
    Prometheus's counters carry no conversations."""
    (n, k), (m, r) = canary, rest
    current, reference = Moments.of_histogram([n - k, k]), Moments.of_histogram([m - r, r])
    _, p = increase_p_value(current, reference, figures.cohort_min_increase / 2)
    ready = n >= figures.cohort_min_samples and m >= figures.cohort_min_samples
    return ready and p <= figures.cohort_level


def canary_query(
    service: str, evaluator: str, canary: str, figures: Figures, *, too_few: str | None
) -> str:
    """The rollout templates' PromQL: 1 when the cohort rule would page the canary version
    against the rest of the service (`cohort_pages`), 0 when both sides hold `min_samples`
    verdicts and it would not, else `too_few` (None: no value). The arguments are the
    template's variables as its tool writes them."""
    where = f'service="{service}",evaluator="{evaluator}"'

    def total(series: str, version: str) -> str:
        return f"sum(rag_monitor:evaluation_{series}_by_version:increase30m{{{where}{version}}})"

    n, k = total("samples", f',version="{canary}"'), total("defects", f',version="{canary}"')
    m, r = total("samples", f',version!="{canary}"'), total("defects", f',version!="{canary}"')
    a, d = total("samples", ""), total("defects", "")
    s = figures.slots()
    enough = f"{n} >= {s['cohort_min_samples']}\nand {m} >= {s['cohort_min_samples']}"
    worse = "\n".join(
        [
            "(",
            f"  {k}",
            f"    / {n}",
            f"  - {r}",
            f"    / {m}",
            f"  - {s['cohort_half_increase']}",
            ")",
            "/ sqrt(",
            f"    {d}",
            f"      / {a}",
            f"    * (1 - {d}",
            f"      / {a})",
            f"    * (1 / {n}",
            f"      + 1 / {m})",
            "  )",
            f">= {s['cohort_z']}",
        ]
    )
    lines = ["(", *_indent(worse), *_indent(f"and {enough}"), ") * 0 + 1", "or", "("]
    lines += [*_indent(enough), ") * 0"]
    if too_few is not None:
        lines.append(f"or vector({too_few})")
    return "\n".join(lines) + "\n"


def _indent(text: str, by: str = "  ") -> list[str]:
    return [by + line for line in text.splitlines()]


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
        "`min_samples` ({regression_min_samples}), `min_increase` ({min_increase}),",
    ),
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
COPIES = COPIES + SLO_COPIES + SAFETY_COPIES

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
# Figures too distinctive to be anything else where they appear: a stray copy.
_STRAY_SLOTS = ("z", "z2", "z2_half", "z2_quarter", "cohort_z")

_TOKEN = r"[0-9]+(?:\.[0-9]+)?(?:e-?[0-9]+)?[a-z]*"
_SLOT = re.compile(r"\{([a-z0-9_]+)\}")
# A space of a pattern matches a line break too, and the comment mark that continues it.
_SPACE = r"(?:[ \t]*\n[ \t]*(?:#[ \t]*)?|[ \t]+)"


def _regex(pattern: str) -> re.Pattern[str]:
    out, at = [], 0

    def literal(text: str) -> str:
        return _SPACE.join(re.escape(part) for part in text.split(" "))

    for slot in _SLOT.finditer(pattern):
        out += [literal(pattern[at : slot.start()]), f"({_TOKEN})"]
        at = slot.end()
    out.append(literal(pattern[at:]))
    return re.compile("".join(out))


class CopyMissing(ValueError):
    """A listed copy is not in its file as often as listed: the text around it changed."""


def _apply_copy(text: str, copy: Copy, slots: Mapping[str, str]) -> str:
    """`text` with the figures of each occurrence of `copy` set to `slots`' (the text
    around them, line breaks included, as it is)."""
    regex = _regex(copy.pattern)
    names = _SLOT.findall(copy.pattern)
    found = len(regex.findall(text))
    if found != copy.count:
        raise CopyMissing(
            f"{copy.path}: {copy.pattern!r} occurs {found} times, not {copy.count}: "
            "update COPIES in harness/thresholds.py to the text as it reads now"
        )

    def figures(match: re.Match[str]) -> str:
        out, at = [], match.start()
        for k, name in enumerate(names, 1):
            out += [text[at : match.start(k)], slots[name]]
            at = match.end(k)
        out.append(text[at : match.end()])
        return "".join(out)

    return regex.sub(figures, text)


def _apply_block(text: str, block: Block, figures: Figures) -> str:
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == block.key]
    if len(starts) != 1:
        raise CopyMissing(f"{block.path}: {len(starts)} lines {block.key!r}, not 1")
    start = starts[0]
    depth = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (
        not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > depth
    ):
        end += 1
    body = [" " * (depth + 2) + line + "\n" for line in block.render(figures).splitlines()]
    return "".join([*lines[: start + 1], *body, *lines[end:]])


def rendered(figures: Figures, root: Path = ROOT) -> dict[str, str]:
    """Every file that restates a figure, as `figures` would have it: path → text."""
    slots = figures.slots()
    out: dict[str, str] = {}
    paths = {c.path for c in COPIES} | {b.path for b in BLOCKS}
    for path in sorted(paths):
        text = (root / path).read_text(encoding="utf-8")
        for block in (b for b in BLOCKS if b.path == path):
            text = _apply_block(text, block, figures)
        for copy in (c for c in COPIES if c.path == path):
            text = _apply_copy(text, copy, slots)
        out[path] = text
    return out


def stale(figures: Figures, root: Path = ROOT) -> list[str]:
    """The files whose copies of the figures differ from `figures`."""
    return [
        path
        for path, text in rendered(figures, root).items()
        if (root / path).read_text(encoding="utf-8") != text
    ]


def write(figures: Figures, root: Path = ROOT) -> list[str]:
    """Rewrites every file whose copies differ from `figures`; the paths it rewrote."""
    changed = stale(figures, root)
    texts = rendered(figures, root)
    for path in changed:
        (root / path).write_text(texts[path], encoding="utf-8")
    return changed


def _kit_files(root: Path) -> Iterable[Path]:
    for name in KIT:
        top = root / name
        candidates = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in candidates:
            if path.is_file() and not path.is_symlink() and "schema" not in path.parts[-2]:
                if path.suffix in {".yml", ".yaml", ".json", ".md", ".txt", ".tpl"}:
                    yield path


def strays(figures: Figures, root: Path = ROOT) -> list[str]:
    """`path:line: figure` for each distinctive figure (a z, its square) the kit writes
    outside the places `COPIES` lists: a copy no regeneration would keep true."""
    slots = figures.slots()
    values = {slots[name] for name in _STRAY_SLOTS}
    listed: dict[str, list[re.Pattern[str]]] = {}
    for copy in COPIES:
        listed.setdefault(copy.path, []).append(_regex(copy.pattern))
    out = []
    for path in _kit_files(root):
        relative = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        for regex in listed.get(relative, []):
            text = regex.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for block in (b for b in BLOCKS if b.path == relative):
            text = _apply_block(text, replace(block, render=lambda _: ""), figures)
        for number, line in enumerate(text.splitlines(), 1):
            for value in values:
                if re.search(rf"(?<![0-9.]){re.escape(value)}(?![0-9])", line):
                    out.append(f"{relative}:{number}: {value}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.thresholds",
        description="Rewrite the thresholds deploy/, grafana/ and docs/ restate from the "
        "config defaults and the judging code.",
    )
    parser.add_argument(
        "--check", action="store_true", help="list what is out of date, change nothing"
    )
    args = parser.parse_args(argv)
    figures = Figures.from_defaults()
    try:
        changed = stale(figures) if args.check else write(figures)
    except CopyMissing as problem:
        print(problem, file=sys.stderr)
        return 2
    stray = strays(figures)
    for path in changed:
        print(f"{'out of date' if args.check else 'rewrote'}: {path}")
    for place in stray:
        print(f"a copy COPIES does not list: {place}", file=sys.stderr)
    return 1 if stray or (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
