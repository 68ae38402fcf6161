"""The judge-changed rule (`JudgeChangedRule`, made when `audit.anchors` is on): the anchor
check (`monitor.audit.anchors`) reports each judge's check that compared it with its
baseline (`AlertEngine.report`; the kind is `Reported`), and the page moves as every
rule's does: fired
when a check found the judge changed, re-sent while it fires, resolved by the next check
that does not, kept in the state file. One entry per judge evaluator, in the service's
place. A judge whose last comparing check is older than three intervals, and an hour (the
check stopped: the judge left the config, the budget; `JudgeChangedRule.memory_s`), is
resolved, saying so."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from monitor.alerts.describe import shown_duration
from monitor.alerts.gauges import AlertGauges
from monitor.alerts.kinds import Decision, Entry, Judgment, decide
from monitor.alerts.rule import Rule
from monitor.component import GENERATOR
from monitor.config import AlertRule, JudgeChangedRule
from monitor.evidence import Arrival, Terms, Unit, saved_number

# The figures a check's page carries (`AnchorCheck`), the only ones a state file may hold.
FIGURES = frozenset(
    {
        "anchors",
        "accuracy_before",
        "accuracy_now",
        "failed_before",
        "failed_now",
        "right_then_wrong",
        "wrong_then_right",
        "failed_then_passed",
        "passed_then_failed",
        "p_value",
    }
)


@dataclass(slots=True)
class Checked:
    """One judge's last comparing check: when (`at`), whether it found the judge changed,
    and the figures of the last change found (kept for the resolve's text)."""

    at: float = 0.0
    changed: bool = False
    figures: dict[str, float] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        return {"at": self.at, "changed": self.changed, "figures": dict(self.figures)}

    def restore(self, raw: Any) -> None:
        at, changed, figures = raw["at"], raw["changed"], raw["figures"]
        if not isinstance(changed, bool):
            raise TypeError("changed is not true or false")
        if not isinstance(figures, dict) or not set(figures) <= FIGURES:
            raise ValueError("figures are not the anchor check's")
        self.at = saved_number(at, nonnegative=True)
        self.changed = changed
        self.figures = {str(k): saved_number(v, nonnegative=True) for k, v in figures.items()}


class JudgeChanged:
    """The kind: judges each judge's `Checked`; no verdict enters it, the anchor check
    reports (`Reported`)."""

    def __init__(self, rule: Rule, interval_s: float) -> None:
        assert isinstance(rule.config, JudgeChangedRule)
        self._config = rule.config
        self._stale_s = rule.config.memory_s

    @staticmethod
    def summary(config: AlertRule, terms: Terms, budget: str) -> str:
        return "a judge's verdicts on the anchors moved (audit.anchors)"

    def report(self, state: Checked, now: float, figures: Mapping[str, float] | None) -> None:
        """A check that compared the judge with its baseline: `figures` of the change it
        found, or None (its verdicts held)."""
        state.at, state.changed = now, figures is not None
        if figures is not None:
            state.figures = {k: float(v) for k, v in figures.items() if k in FIGURES}

    def reports_on(self, subject: str) -> bool:
        """A state file's page of a judge the config no longer names is left out."""
        return subject in self._config.judges

    def labels(self, subject: str, severity: str | None) -> dict[str, str]:
        """One entry per judge evaluator, in the service's place: the page names the judge."""
        return {
            "alertname": self._config.name,
            "evaluator": subject,
            "severity": severity or self._config.severity,
            "generator": GENERATOR,
        }

    def judge(self, entries: Mapping[str, Entry], now: float) -> dict[str, Judgment]:
        out = {}
        for cohort, entry in entries.items():
            state: Checked = entry.state
            stale = now - state.at > self._stale_s
            note = (
                f"no anchor check compared the judge for more than {shown_duration(self._stale_s)}"
                if stale and entry.firing
                else ""
            )
            fire, resolve = state.changed and not stale, not state.changed or stale
            out[cohort] = Judgment(
                decide(entry.firing, fire, resolve),
                p_value=state.figures.get("p_value", 1.0),
                note=note,
                figures=state.figures,
            )
        return out

    def describe(self, service: str, cohort: str, judgment: Judgment) -> dict[str, str]:
        f = judgment.figures
        if not f:
            summary = f"The judge {service} changed"
            return {"summary": summary, "description": f"{summary}. {judgment.note}".strip()}
        summary = (
            f"The judge {service} changed: anchor accuracy {f['accuracy_before']:.0%} → "
            f"{f['accuracy_now']:.0%}, anchors failed {f['failed_before']:.0%} → "
            f"{f['failed_now']:.0%}"
        )
        description = (
            f"{summary} on {f['anchors']:.0f} anchors: {f['right_then_wrong']:.0f} right "
            f"before and wrong now, {f['wrong_then_right']:.0f} the other way; "
            f"{f['failed_then_passed']:.0f} failed before and passed now, "
            f"{f['passed_then_failed']:.0f} the other way (McNemar p = {f['p_value']:.2g}). "
            "A move of this judge's defect rate now is the judge's, not the service's: a "
            "model or prompt behind its name changed."
        )
        if judgment.decision is Decision.RESOLVE:
            held = judgment.note or "its verdicts held at the next check"
            description += f" Resolved: {held}."
        return {"summary": summary, "description": description, "anchor_figures": json.dumps(f)}

    def publish(self, gauges: AlertGauges, service: str, entries: Mapping[str, Entry]) -> None:
        return None  # the anchor check's own gauges (`judge_changed`) show it

    # -- Keeper: nothing enters but `checked` ------------------------------------------

    def new_state(
        self, previous: Entry | None = None, now: float = 0.0, series: str = ""
    ) -> Checked:
        return Checked()

    def add(
        self,
        state: Checked,
        histogram: Sequence[float],
        conversation: Arrival | None,
        now: float,
        firing: bool,
    ) -> bool:
        return False

    def add_unit(self, state: Checked, unit: Unit, now: float) -> bool:
        return False

    def advance(self, state: Checked, now: float, firing: bool) -> None:
        return None

    def settle(self, entry: Entry, judgment: Judgment, now: float) -> None:
        return None
