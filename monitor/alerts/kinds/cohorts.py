"""Cohort rules (`cohorts: {by: version|model|route}`): each cohort of a service against the
rest of that service in the same window, by a one-sided pooled z-test at the look's level
shared among the cohorts judged; a cohort that takes all the traffic against the rest as
last seen, and a page on it holds on that rest until the cohort's rate comes back to it
(docs/alerts.md, "Cohort rules")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from monitor.alerts.describe import p_text, utc
from monitor.alerts.gauges import AlertGauges
from monitor.alerts.kinds import Decision, Entry, Judgment, decide
from monitor.alerts.kinds.absolute import WindowKind, WindowState
from monitor.alerts.rule import MEASURED
from monitor.config import AlertRule
from monitor.evidence import (
    Moments,
    Terms,
    design_effect,
    increase_p_value,
    saved_number,
)
from monitor.telemetry import OVERFLOW

# Cohorts that are never judged on their own: records without the cohort's value, and
# values past the cohort cap. Their verdicts still count in the rest of the service.
UNJUDGED = ("", OVERFLOW)
# How long a cohort without a rest that is not paged is judged against the rest as last
# seen (its p-value, for boosts): a day, past which the time of day and the days since make
# it no reference to start a page on. A page holds on it however old: it never resolves
# against nothing.
REST_KEPT_S = 86_400.0
# How long after the rest was last seen a page may start against it: within an hour a
# daily cycle moves the rate little.
REST_FIRES_S = 3_600.0


@dataclass(slots=True)
class Seen:
    """A cohort's window as last seen with `min_samples` verdicts: its moments, their
    design effect, and when."""

    moments: Moments
    design: float
    at: float


@dataclass(slots=True)
class CohortState(WindowState):
    seen: Seen | None = None

    def snapshot(self) -> dict[str, Any]:
        saved, seen = None, self.seen
        if seen is not None:
            m = seen.moments
            saved = [m.samples, m.defects, m.squares, seen.design, seen.at]
        return {**WindowState.snapshot(self), "seen": saved}

    def restore(self, raw: Any) -> None:
        WindowState.restore(self, raw)
        seen = raw["seen"]
        if seen is None:
            return
        if not isinstance(seen, list) or len(seen) != 5:
            raise TypeError("seen is not [samples, defects, squares, design, time]")
        samples, defects, squares, design, at = (saved_number(v, nonnegative=True) for v in seen)
        if not squares <= defects <= samples or design <= 0 or samples != int(samples):
            raise ValueError("seen: counts out of order")
        self.seen = Seen(Moments(int(samples), defects, squares), design, at)


class Cohorts(WindowKind):
    state_type = CohortState

    @staticmethod
    def summary(config: AlertRule, terms: Terms, budget: str) -> str:
        assert config.cohorts is not None
        measured = MEASURED.get(config.measure, "defect rate")
        rise = terms.rise_text()
        return (
            f"{measured} of each {config.cohorts.by} over {config.window} up by "
            f"{rise} or more on the rest of its service ({budget})"
        )

    def advance(self, state: WindowState, now: float, firing: bool) -> None:
        """Also keeps the cohort's window as last seen with `min_samples` verdicts."""
        super().advance(state, now, firing)
        assert isinstance(state, CohortState)
        current = state.window.moments(now)
        if self.terms.enough(current.samples):
            state.seen = Seen(current, design_effect(current, state.units.totals), now)

    def judge(self, entries: Mapping[str, Entry], now: float) -> dict[str, Judgment]:
        """A judgment for every judged cohort of one service."""
        terms = self.terms
        counts: dict[str, Moments] = {}
        total = Moments()
        all_units = [0.0, 0.0, 0.0, 0.0, 0.0]
        for cohort, entry in entries.items():
            state: CohortState = entry.state
            counts[cohort] = state.window.moments(now)
            total = total.plus(counts[cohort])
            all_units = [a + b for a, b in zip(all_units, state.units.totals, strict=True)]
        judged = [cohort for cohort in entries if cohort not in UNJUDGED]
        level = terms.level(self._interval, len(judged))
        out: dict[str, Judgment] = {}
        for cohort in judged:
            state = entries[cohort].state
            current = counts[cohort]
            rest = total.minus(current)
            others = [a - b for a, b in zip(all_units, state.units.totals, strict=True)]
            rest_design = design_effect(rest, others)
            figures: dict[str, float] = {}
            may_fire, held = True, ""
            firing = entries[cohort].firing
            empty = not terms.enough(rest.samples)
            before = _seen_before(entries, cohort, now) if empty else None
            by = self.rule.cohort_by
            if before is not None and (firing or now - before.at <= REST_KEPT_S):
                rest, rest_design = before.moments, before.design
                figures["before_at"] = before.at
                may_fire = now - before.at <= REST_FIRES_S
                held = (
                    f"{by} {cohort} is all of the service's traffic: the page holds on the "
                    "rest as last seen until its rate comes back to it"
                )
            elif empty and firing:
                # No rest was ever kept (the other cohorts' slots were given up): nothing to
                # judge the rate against, so nothing resolves the page but an empty window.
                held = (
                    f"{by} {cohort} is all of the service's traffic and no rest is kept to "
                    "compare it with: the page holds until its window empties"
                )
            designs = (design_effect(current, state.units.totals), rest_design)
            margin = terms.margin(rest.mean)
            increase, p = increase_p_value(current, rest, margin, designs)
            ready = terms.enough(current.samples) and terms.enough(rest.samples)
            against = rest.samples > 0  # a page never resolves against nothing
            decision = decide(
                firing,
                fire=ready and may_fire and p <= level,
                resolve=current.samples == 0 or (against and increase < margin),
            )
            note = ""
            if firing and held and decision is Decision.HOLD:
                note = held
            elif firing and held and current.samples and against:
                note = f"{by} {cohort}'s rate came back to the rest as last seen"
            out[cohort] = Judgment(
                decision,
                current=current,
                reference=rest,
                p_value=p if ready else 1.0,
                note=note,
                figures={"increase": increase, "p": p, **figures},
            )
        return out

    def describe(self, service: str, cohort: str, judgment: Judgment) -> dict[str, str]:
        cfg = self.rule.config
        by = self.rule.cohort_by
        current, rest = judgment.current, judgment.reference
        measured = self.rule.measured
        p = judgment.figures.get("p", judgment.p_value)
        before_at = judgment.figures.get("before_at")
        rest_is = (
            f"the rest of {service} before {by} {cohort} took all of its traffic "
            f"(last seen {utc(before_at):%Y-%m-%dT%H:%M:%SZ})"
            if before_at is not None
            else f"the rest of {service}"
        )
        notes = {
            "summary": (
                f"{self.rule.subject} {measured} of {by} {cohort} on {service} is "
                f"{current.mean:.2f} against {rest.mean:.2f} for the rest"
            ),
            "description": (
                f"{measured} {current.mean:.2f} for {by} {cohort} against "
                f"{rest.mean:.2f} for {rest_is} over {cfg.window} "
                f"({current.samples:,} / {rest.samples:,} verdicts), "
                f"{current.mean - rest.mean:+.2f}, {p_text(p)}"
            ),
            "defect_rate": f"{current.mean:.4f}",
            "rest_defect_rate": f"{rest.mean:.4f}",
            "increase": f"{current.mean - rest.mean:.4f}",
            "p_value": f"{p:.3g}",
            "samples": str(current.samples),
            "rest_samples": str(rest.samples),
            "false_page_every": self.rule.budget,
        }
        if judgment.note:
            notes["description"] = f"{judgment.note}; {notes['description']}"
        return notes

    def publish(self, gauges: AlertGauges, service: str, entries: Mapping[str, Entry]) -> None:
        name = self.rule.config.name
        for cohort, entry in entries.items():
            state: WindowState = entry.state
            current = state.window.moments(state.last)
            gauges.cohort(service, name, cohort, current.samples, current.mean)
            if cohort not in UNJUDGED:
                gauges.firing(self.rule, service, cohort, entry.firing)


def _seen_before(entries: Mapping[str, Entry], cohort: str, now: float) -> Seen | None:
    """The rest of `cohort`'s service as its other cohorts were last seen within
    `REST_KEPT_S` (the latest when, the largest design effect), or as the latest of them
    was when all are older (None: never seen)."""
    seen = [
        entry.state.seen
        for other, entry in entries.items()
        if other != cohort and entry.state.seen is not None
    ]
    if not seen:
        return None
    kept = [s for s in seen if now - s.at <= REST_KEPT_S] or [max(seen, key=lambda s: s.at)]
    moments = Moments()
    for s in kept:
        moments = moments.plus(s.moments)
    return Seen(moments, max(s.design for s in kept), max(s.at for s in kept))
