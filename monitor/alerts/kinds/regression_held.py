"""A regression page held while its baseline holds too few verdicts to judge against (a
canary that took all of the traffic in the rule's first hour, a reference with none): it
holds on the level it last judged against until the rate comes back to it, and says so in
the page and the log (docs/alerts.md, "A page never resolves against nothing")."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from monitor.alerts.describe import iso, utc
from monitor.alerts.kinds.regression_expectation import sayer


def held_text(level: float | None, at: float | None) -> str:
    """What a held page says first: the `level` it holds on, last judged against at `at`
    (None: it never judged against one)."""
    if level is None or at is None:
        return (
            "the baseline holds too few verdicts to judge against and none was judged "
            "against before: the page holds until its window empties"
        )
    return (
        f"the baseline holds too few verdicts to judge against: the page holds on "
        f"{level:.2f}, the level it last judged against ({iso(utc(at))}), until the rate "
        "comes back to it"
    )


def came_back_text(level: float) -> str:
    """What the resolve of a held page says first."""
    return (
        f"the rate came back to {level:.2f}, the level the page held on while its baseline "
        "held too few verdicts to judge against"
    )


def say_held(rule: str, series: str, level: float | None, at: float | None) -> None:
    """The log line of a held page (once an hour per rule and series)."""
    sayer(rule, series)("held", logging.WARNING, "%s", held_text(level, at))


def held_annotations(figures: Mapping[str, float]) -> dict[str, str]:
    """A held page's `held_defect_rate` (the level it holds on) and `held_since` (when that
    level was last judged against)."""
    level, at = figures.get("held_level"), figures.get("held_at")
    if level is None or at is None:
        return {}
    return {"held_defect_rate": f"{level:.4f}", "held_since": iso(utc(at))}
