"""One alert rule as the engine judges it: which verdicts of a result it counts (and as what
defect value), the cohort a record belongs to, and the windows and firing state it keeps per
service and cohort (saved to and restored from the state file)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from monitor.alerts.sequential import SequentialTest
from monitor.alerts.window import NOTHING, Moments, SlidingWindow
from monitor.config import AlertRule
from monitor.records import RagRecord
from monitor.results import SEVERITIES, EvalResult, Severity

DEFAULT_SEVERITY_THRESHOLD: Severity = "medium"
# `measure: scores` counts 1 - the normalised score, rounded to steps of 1/SCORE_STEPS, so
# that what the sequential test sees since its last look fits a small histogram.
SCORE_STEPS = 20


@dataclass(slots=True)
class RuleState:
    window: SlidingWindow
    baseline: SlidingWindow | None = None
    sequential: SequentialTest | None = None
    # Sequential rules: how many values at each level arrived since the last evaluation.
    pending: list[int] | None = None
    firing: bool = False
    started_at: float = 0.0
    last_sent: float = 0.0
    # What the last judgment compared: the current window (or, for a sequential rule, its
    # evidence) against the baseline or the rest of the service.
    current: Moments = NOTHING
    reference: Moments = NOTHING
    bounds: tuple[float, float] = (0.0, 1.0)
    p_value: float = 1.0
    # The baseline's clock runs `paused_s` behind the real one: it stands still while firing.
    paused_s: float = 0.0
    # Slices that began before the last resolve held verdicts seen while firing.
    resolved_at: float = 0.0
    last_evaluated: float | None = None

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "firing": self.firing,
            "started_at": self.started_at,
            "last_sent": self.last_sent,
            "paused_s": self.paused_s,
            "resolved_at": self.resolved_at,
            "last_evaluated": self.last_evaluated,
            "current": self.window.slices(),
            "baseline": self.baseline.slices() if self.baseline is not None else None,
        }
        if self.sequential is not None:
            out["sequential"] = self.sequential.snapshot()
        return out

    def restore(self, saved: dict[str, Any]) -> None:
        if not isinstance(saved["firing"], bool):
            raise TypeError("firing is not true or false")
        self.firing = saved["firing"]
        self.started_at = _time(saved["started_at"])
        self.last_sent = _time(saved["last_sent"])
        self.paused_s = _time(saved["paused_s"])
        self.resolved_at = _time(saved["resolved_at"])
        last = saved["last_evaluated"]
        self.last_evaluated = None if last is None else _time(last)
        self.window.restore(_slices(saved["current"]))
        if self.baseline is not None:
            self.baseline.restore(_slices(saved["baseline"]))
        if self.sequential is not None and saved.get("sequential") is not None:
            # A file written before the rule was sequential holds none: it starts at zero.
            self.sequential.restore(saved["sequential"])


def _time(raw: Any) -> float:
    """A saved time or duration: a finite number of seconds (not a flag, not text)."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise TypeError(f"{raw!r} is not a number")
    value = float(raw)  # OverflowError for an integer past float's range
    if not math.isfinite(value):
        raise ValueError(f"{raw!r} is not finite")
    return value


def _slices(raw: Any) -> list[tuple[int, int, float, float]]:
    """Saved slices: `[index, samples, defects, squares]`, or `[index, samples, defects]` as
    files of pass/fail verdicts only were written (there the squares are the defects)."""
    out = []
    for entry in raw:
        i, n, d, *rest = entry
        if len(rest) > 1:
            raise ValueError("a slice has at most four numbers")
        q = rest[0] if rest else d
        out.append((int(i), int(n), _time(d), _time(q)))
    if any(not 0 <= q <= d <= n for _, n, d, q in out) or out != sorted(out):
        raise ValueError("slices out of order or with more defects than samples")
    return out


@dataclass(frozen=True)
class Rule:
    config: AlertRule
    window_s: float
    baseline_s: float | None = None
    # Safety rules: the severity at which each grading evaluator calls a verdict a defect.
    thresholds: Mapping[str, Severity] = field(default_factory=dict)

    @property
    def sequential(self) -> bool:
        return self.config.test == "sequential"

    @property
    def steps(self) -> int:
        """Defect values are multiples of 1/steps (0 and 1 for verdicts)."""
        return SCORE_STEPS if self.config.measure == "scores" else 1

    def samples(self, results: Mapping[str, EvalResult]) -> list[float]:
        """One defect value per verdict this rule counts in `results` (1.0 = a defect)."""
        rule = self.config
        if rule.evaluator is not None:
            result = results.get(rule.evaluator)
            if result is None or result.outcome == "error":
                return []
            if rule.measure == "scores":
                if result.normalized is None:
                    return []
                return [round((1.0 - result.normalized) * SCORE_STEPS) / SCORE_STEPS]
            return [1.0 if result.outcome == "fail" else 0.0]
        out = []
        for name, result in results.items():
            if result.outcome == "error" or not result.safety or rule.category not in result.safety:
                continue
            threshold = self.thresholds.get(name, DEFAULT_SEVERITY_THRESHOLD)
            severity = result.safety[rule.category]
            out.append(1.0 if SEVERITIES.index(severity) >= SEVERITIES.index(threshold) else 0.0)
        return out

    def cohort(self, record: RagRecord) -> str:
        """The record's cohort under this rule ("" without one, and for other rules)."""
        cohorts = self.config.cohorts
        if cohorts is None:
            return ""
        if cohorts.by == "version":
            return record.version or ""
        if cohorts.by == "model":
            return record.model or ""
        return record.route


def new_state(rule: Rule) -> RuleState:
    baseline = SlidingWindow(rule.baseline_s) if rule.baseline_s is not None else None
    if not rule.sequential:
        return RuleState(SlidingWindow(rule.window_s), baseline)
    return RuleState(
        SlidingWindow(rule.window_s), baseline, SequentialTest(), [0] * (rule.steps + 1)
    )


def fingerprint(rule: Rule) -> str:
    """What a saved window depends on: the same values counted over the same spans."""
    cfg = rule.config
    baseline = cfg.baseline.window if cfg.baseline else ""
    out = f"{cfg.evaluator or ''}|{cfg.category or ''}|{rule.window_s}|{baseline}"
    if cfg.measure == "scores":
        out += "|scores"
    if cfg.cohorts is not None:
        out += f"|by {cfg.cohorts.by}"
    return out
