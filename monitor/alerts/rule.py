"""One alert rule as the engine judges it: which verdicts of a result it counts, and the
windows and firing state it keeps per service (saved to and restored from the state
file)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from monitor.alerts.window import SlidingWindow
from monitor.config import AlertRule
from monitor.results import SEVERITIES, EvalResult, Severity

DEFAULT_SEVERITY_THRESHOLD: Severity = "medium"


@dataclass(slots=True)
class RuleState:
    window: SlidingWindow
    baseline: SlidingWindow | None = None
    firing: bool = False
    started_at: float = 0.0
    last_sent: float = 0.0
    samples: int = 0
    defects: int = 0
    bounds: tuple[float, float] = (0.0, 1.0)
    base_samples: int = 0
    base_defects: int = 0
    p_value: float = 1.0
    # The baseline's clock runs `paused_s` behind the real one: it stands still while firing.
    paused_s: float = 0.0
    # Slices that began before the last resolve held verdicts seen while firing.
    resolved_at: float = 0.0
    last_evaluated: float | None = None

    def snapshot(self) -> dict[str, Any]:
        return {
            "firing": self.firing,
            "started_at": self.started_at,
            "last_sent": self.last_sent,
            "paused_s": self.paused_s,
            "resolved_at": self.resolved_at,
            "last_evaluated": self.last_evaluated,
            "current": self.window.slices(),
            "baseline": self.baseline.slices() if self.baseline is not None else None,
        }

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


def _time(raw: Any) -> float:
    """A saved time or duration: a finite number of seconds (not a flag, not text)."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise TypeError(f"{raw!r} is not a number")
    value = float(raw)  # OverflowError for an integer past float's range
    if not math.isfinite(value):
        raise ValueError(f"{raw!r} is not finite")
    return value


def _slices(raw: Any) -> list[tuple[int, int, int]]:
    out = [(int(i), int(n), int(d)) for i, n, d in raw]
    if any(not 0 <= d <= n for _, n, d in out) or out != sorted(out):
        raise ValueError("slices out of order or with more defects than samples")
    return out


@dataclass(frozen=True)
class Rule:
    config: AlertRule
    window_s: float
    baseline_s: float | None = None
    # Safety rules: the severity at which each grading evaluator calls a verdict a defect.
    thresholds: Mapping[str, Severity] = field(default_factory=dict)

    def samples(self, results: Mapping[str, EvalResult]) -> list[bool]:
        """One bool per verdict this rule counts in `results` (True = defect)."""
        rule = self.config
        if rule.evaluator is not None:
            result = results.get(rule.evaluator)
            if result is None or result.outcome == "error":
                return []
            return [result.outcome == "fail"]
        out = []
        for name, result in results.items():
            if result.outcome == "error" or not result.safety or rule.category not in result.safety:
                continue
            threshold = self.thresholds.get(name, DEFAULT_SEVERITY_THRESHOLD)
            severity = result.safety[rule.category]
            out.append(SEVERITIES.index(severity) >= SEVERITIES.index(threshold))
        return out


def new_state(rule: Rule) -> RuleState:
    baseline = SlidingWindow(rule.baseline_s) if rule.baseline_s is not None else None
    return RuleState(SlidingWindow(rule.window_s), baseline)


def fingerprint(rule: Rule) -> str:
    """What a saved window depends on: the same verdicts counted over the same spans."""
    cfg = rule.config
    baseline = cfg.baseline.window if cfg.baseline else ""
    return f"{cfg.evaluator or ''}|{cfg.category or ''}|{rule.window_s}|{baseline}"
