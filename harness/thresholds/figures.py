"""The figures the kit restates: from the config defaults, the statistics the rules judge
with, and the shipped examples (deploy/monitor.yaml); and the cohort rule's test, as the
sidecar decides it and in the rollout templates' PromQL."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from harness.deploy_examples import monitor_with_slo
from monitor.config import Alerts, Config, parse_duration
from monitor.evidence import Moments, increase_p_value, look_level, one_sided_z

ROOT = Path(__file__).resolve().parents[2]

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
}


def default_rule(form: str, name: str = "defaults") -> Any:
    """A rule of `form` on local_groundedness that states nothing else, as the config
    resolves it (whatever class the config gives a rule of that form)."""
    rule = {"name": name, "evaluator": "local_groundedness", **_FORMS[form]}
    return Alerts.model_validate({"rules": [rule]}).rules[0]


def rule_default(form: str, field: str) -> Any:
    """The default of a rule's `field` (dotted for a nested one: `baseline.min_samples`)
    for a rule of `form` that states nothing else."""
    value = default_rule(form)
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
            "cohort_window": self.cohort_window,
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
