"""A `Baseline`'s part of a regression rule's state file."""

from __future__ import annotations

from typing import Any, Protocol

from monitor.evidence.changeover import (
    Changeover,
    changeover_restored,
    changeover_saved,
    held_restored,
    held_saved,
    level_saved,
    nonnegative,
)
from monitor.evidence.counts import Moments
from monitor.evidence.first_level import FirstLevel
from monitor.evidence.history import History
from monitor.evidence.level import Level
from monitor.evidence.shadow import Shadow, Slope


class Saved(Protocol):
    """What of a `Baseline` its state file keeps (a protocol: the baseline imports this)."""

    history: History
    held: dict[int, tuple[Moments, Moments]]
    pinned: tuple[float, float, Level] | None
    resolved_at: float
    changeover: Changeover | None
    translated: tuple[float, float] | None
    shadow: Shadow | None
    slope: Slope | None
    first: FirstLevel


def baseline_saved(baseline: Saved) -> dict[str, Any]:
    """The baseline's part of the rule's saved state (a pinned level, a shadow, a slope
    only when there is one)."""
    change = baseline.changeover
    out: dict[str, Any] = {
        "history": baseline.history.snapshot(),
        "held": held_saved(baseline.held),
        "resolved_at": baseline.resolved_at,
        "changeover": None if change is None else changeover_saved(change),
        "translated": None if baseline.translated is None else list(baseline.translated),
        "replaced": None if change is None else change.replaced,
        "interim": None
        if change is None
        else [[bucket, *sums] for bucket, sums in change.interim.items()],
        "first": baseline.first.saved(),
    }
    if baseline.pinned is not None:  # only a pinned reference has one
        out["pinned"] = [baseline.pinned[0], baseline.pinned[1], *level_saved(baseline.pinned[2])]
    if baseline.shadow is not None:
        out["shadow"] = baseline.shadow.saved()
    if baseline.slope is not None:
        out["slope"] = baseline.slope.saved()
    return out


def baseline_restore(baseline: Saved, raw: Any) -> None:
    """Takes back `baseline_saved`."""
    baseline.history.restore(raw["history"])
    baseline.held = held_restored(raw["held"])
    pinned = raw.get("pinned")
    if pinned is not None:
        start, end, mean, variance, samples, units = (nonnegative(x) for x in pinned)
        baseline.pinned = (start, end, Level(mean, variance, int(samples), units))
    baseline.resolved_at = nonnegative(raw["resolved_at"])
    change = raw["changeover"]
    if change is not None:
        baseline.changeover = changeover_restored(change, raw["replaced"], raw["interim"])
    translated = raw["translated"]
    if translated is not None:
        variance, until = translated
        baseline.translated = (nonnegative(variance), nonnegative(until))
    baseline.shadow = Shadow.restored(raw.get("shadow"))
    baseline.slope = Slope.restored(raw.get("slope"))
    baseline.first.restore(raw.get("first"))
