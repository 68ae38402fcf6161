"""Where a regression rule's baseline's log lines go (`sayer`), and how a page names what it
compared with (`reference_text`, `season_text`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from monitor.config import AlertBaseline
from monitor.telemetry import RateLimitedLog

_log = RateLimitedLog(logging.getLogger(__name__), 3600.0)


def sayer(name: str, series: str) -> _Sayer:
    """The log lines of rule `name`'s baseline of `series`, each limited per rule and series."""
    return _Sayer(name, series)


@dataclass(frozen=True, slots=True)
class _Sayer:
    # A class, not a closure: a rule's state is copied and pickled whole.
    name: str
    series: str

    def __call__(self, key: str, level: int, message: str, *args: object) -> None:
        name, series = self.name, self.series
        if not key:
            _log.log(name, level, "alert %s: " + message, name, *args)
        else:
            key = f"{name} {key} {series}"
            _log.log(key, level, "alert %s for %s: " + message, name, series, *args)


def reference_text(baseline: AlertBaseline) -> str:
    """`the previous 24h and this hour of the week`, `the same hours a week before`, `the
    pinned period START/END and this hour of the day`."""
    season = baseline.season
    hour = "" if season == "none" else f" and this hour of the {season}"
    if baseline.reference == "trailing":
        return f"the previous {baseline.window}{hour}"
    if baseline.reference == "last_week":
        return "the same hours a week before"
    return f"the pinned period {baseline.reference.pinned}{hour}"


def season_text(baseline: AlertBaseline, figures: Mapping[str, float]) -> str:
    """What a regression page says it compared with: `reference_text`, or what stands in
    for it while the season is not learned, or after an evaluator change."""
    text = reference_text(baseline)
    if figures.get("held"):
        return "the level the page held on (its baseline holds too few verdicts)"
    if figures.get("interim") == 2.0:
        return "the rule's first verdicts since it started (its baseline is not ready yet)"
    if figures.get("interim"):
        return (
            "the new evaluator revision's level since its change and this hour's season "
            "(an interim level: its baseline is not ready yet)"
        )
    if figures.get("unseasoned") and baseline.season != "none":
        return f"{text} (season not learned yet: the highest hour seen)"
    return text
