"""One alert rule as the engine judges it: which verdicts of a result it counts (and as what
defect value), the cohort a record belongs to, its false-page budget, and the windows and
firing state it keeps per service and cohort (saved to and restored from the state file)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from monitor.alerts.sequential import Bets, SequentialTest
from monitor.alerts.window import NOTHING, Moments, SlidingWindow, Windows
from monitor.config import AlertRule
from monitor.records import RagRecord
from monitor.results import SEVERITIES, EvalResult, Severity

DEFAULT_SEVERITY_THRESHOLD: Severity = "medium"
# `measure: scores` counts 1 - the normalised score, rounded to steps of 1/SCORE_STEPS, so
# that what the sequential test sees between batches fits a small histogram.
SCORE_STEPS = 20


@dataclass(frozen=True, slots=True)
class Decision:
    """What one judged (rule, service, cohort) asks for, as a tail-sampling policy returns
    a decision: start firing (`fire`), or stop if firing (`resolve`); neither holds the
    state (hysteresis)."""

    fire: bool
    resolve: bool


@dataclass(slots=True)
class RuleState:
    """What one (rule, service, cohort) keeps: its window (a regression rule's current
    window and baseline), its sequential test, and its firing state."""

    window: SlidingWindow
    windows: Windows | None = None
    sequential: SequentialTest | None = None
    # Sequential rules: values at each level since the last batch, and the bets that judge
    # them (set from the baseline at each evaluation).
    pending: list[float] | None = None
    bets: Bets | None = None
    firing: bool = False
    started_at: float = 0.0
    last_sent: float = 0.0
    # What the last judgment compared: the current window (or, for a sequential rule, the
    # verdicts of its strongest run) against the baseline or the rest of the service.
    current: Moments = NOTHING
    reference: Moments = NOTHING
    bounds: tuple[float, float] = (0.0, 1.0)
    p_value: float = 1.0
    # Window tests: since when the window leans up (what leaves it is held back).
    leaning_since: float | None = None

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "firing": self.firing,
            "started_at": self.started_at,
            "last_sent": self.last_sent,
        }
        if self.windows is not None:
            out.update(self.windows.snapshot())
        else:
            out["current"] = self.window.slices()
        if self.sequential is not None:
            out["sequential"] = self.sequential.snapshot()
        return out

    def restore(self, saved: dict[str, Any]) -> None:
        if not isinstance(saved["firing"], bool):
            raise TypeError("firing is not true or false")
        self.firing = saved["firing"]
        self.started_at = _time(saved["started_at"])
        self.last_sent = _time(saved["last_sent"])
        self.window.restore(_slices(saved["current"]))
        windows = self.windows
        if windows is not None:
            windows.baseline.restore(_slices(saved["baseline"]))
            windows.restore_held(_slices(saved.get("held", [])))
            windows.paused_s = _time(saved["paused_s"])
            windows.resolved_at = _time(saved["resolved_at"])
            # Files written before the held slices kept `last_evaluated`.
            last = saved.get("last", saved.get("last_evaluated"))
            windows.last = None if last is None else _time(last)
        raw = saved.get("sequential")
        if self.sequential is not None and not (raw is None or isinstance(raw, list)):
            # None: saved by a window test; a list: by the sequential test of an earlier
            # release. Either way the statistic starts at zero.
            self.sequential.restore(raw)


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
    # How rarely the rule may page on a service that did not change: seconds, as written.
    budget_s: float
    budget: str
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

    @property
    def min_increase(self) -> float:
        return self.config.min_increase or 0.0

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
    if rule.baseline_s is None:
        return RuleState(SlidingWindow(rule.window_s))
    windows = Windows(rule.window_s, rule.baseline_s)
    if not rule.sequential:
        return RuleState(windows.current, windows)
    return RuleState(windows.current, windows, SequentialTest(), [0.0] * (rule.steps + 1))


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
