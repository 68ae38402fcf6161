"""Regression rules (`baseline`): a service's current window against what it is expected to
show now (`History.expectation`: level, day and week), testing "the mean rose by at most
the rule's margin" (`Terms.margin`) with the sequential test (the default) or a
per-evaluation z-test (`test: window`). What each step means for users, and why, is in docs/alerts.md
("Regression rules"): when a rule may fire, how it resolves or accepts a new normal, how an
evaluator revision carries over, and why a rise never teaches the level before it is judged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from monitor.alerts.describe import p_text, shown_duration
from monitor.alerts.gauges import AlertGauges, SenderScreen
from monitor.alerts.kinds import Decision, Entry, Judgment, Paired, decide
from monitor.alerts.kinds.regression_expectation import reference_text, season_text
from monitor.alerts.kinds.regression_held import (
    came_back_text,
    held_annotations,
    held_text,
    say_held,
)
from monitor.alerts.kinds.regression_shadow import ShadowHooks
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.alerts.rule import MEASURED, Rule
from monitor.config import AlertRule
from monitor.evidence import Arrival, Moments, Terms, Unit
from monitor.telemetry import RateLimitedLog

_log = RateLimitedLog(logging.getLogger(__name__), 3600.0)

# Units per batch of the sequential test between evaluations: small enough that a page
# waits for few verdicts, large enough that a busy service costs little per verdict.
BATCH = 8
# A window test holds back what leaves its window while the window leans up this much.
WINDOW_HOLD_P = 0.1


class Regression(ShadowHooks):
    def __init__(self, rule: Rule, interval_s: float) -> None:
        cfg = rule.config
        assert cfg.baseline is not None
        self.rule = rule
        self.terms = rule.terms
        self._baseline = cfg.baseline
        self._interval = interval_s

    @staticmethod
    def summary(config: AlertRule, terms: Terms, budget: str) -> str:
        assert config.baseline is not None
        measured = MEASURED.get(config.measure, "defect rate")
        rise = terms.rise_text()
        return (
            f"{measured} up by {rise} or more on {reference_text(config.baseline)} "
            f"({config.test} test, window {config.window}, {budget})"
        )

    def new_state(
        self, previous: Entry | None = None, now: float = 0.0, series: str = ""
    ) -> RegressionState:
        """An empty state of `series`; with `previous`, an entry whose evaluator revision was
        replaced at `now`: new windows and test, and a baseline that follows the old one
        (`Baseline.succeed`: translated once the offset is measured; without a level to
        translate, anew)."""
        rule = self.rule
        state = RegressionState.empty(rule, series)
        if previous is None:
            return state
        old: RegressionState = previous.state
        building = old.judging.building_since()
        # What the old revision's current window held goes to its history first.
        old.baseline.expire(
            old.current,
            old.solo,
            now + 2 * rule.terms.window_s,
            firing=previous.firing,
            hold_from=building,
        )
        state.baseline.succeed(old.baseline, now, previous.revision)
        return state

    # -- verdicts in ------------------------------------------------------------------

    def add(
        self,
        state: RegressionState,
        histogram: Sequence[float],
        conversation: Arrival | None,
        now: float,
        firing: bool,
    ) -> bool:
        moments = Moments.of_histogram(histogram)
        state.current.add_counts(now, moments)
        state.baseline.count(moments, now, old=False, firing=firing)
        if conversation is None:
            state.solo.add_counts(now, moments)
        judging = state.judging
        if judging.sequential is None:
            return False
        judging.batch.add(histogram, conversation)
        if judging.batch.size() < BATCH:
            return False
        return self._batch(state, now, firing)

    def add_unit(self, state: RegressionState, unit: Unit, now: float) -> bool:
        state.baseline.add_unit(now, unit)
        return False

    def add_replaced(
        self,
        state: RegressionState,
        histogram: Sequence[float],
        now: float,
        firing: bool,
        paired: Paired | None = None,
    ) -> None:
        old = Moments.of_histogram(histogram)
        if paired is None:
            state.baseline.count(old, now, old=True, firing=firing)
        elif learned := state.baseline.count_pair(paired[0], old, paired[1], now, firing):
            _log.log(
                f"{self.rule.config.name} paired {state.series}",
                logging.WARNING,
                "alert %s for %s: the previous revision %s scores records again, but the "
                "history was learned with %s: its verdicts are left out",
                self.rule.config.name,
                state.series,
                paired[0],
                learned,
            )

    def sent(
        self,
        state: RegressionState,
        sender: str | None,
        histogram: Sequence[float],
        conversation: Arrival | None,
        now: float,
    ) -> None:
        """Who sent verdicts `add` took: the history screens its senders (`Screening`)."""
        state.baseline.sent(now, sender, Moments.of_histogram(histogram), solo=conversation is None)

    def screen(self, state: RegressionState) -> SenderScreen:
        return state.baseline.history.senders

    def _batch(self, state: RegressionState, now: float, firing: bool) -> bool:
        """Feeds the pending units to the sequential test (none while it has no bets or the
        rule fires: those count in the windows only); True when it crossed the budget."""
        judging = state.judging
        test, batch = judging.sequential, judging.batch
        assert test is not None
        if batch.size() and judging.bets is not None and not firing:
            test.update(judging.bets, batch.levels, batch.arrivals, now)
        batch.clear()
        return not firing and test.crossed(self.terms.budget_s)

    # -- judging ----------------------------------------------------------------------

    def advance(self, state: RegressionState, now: float, firing: bool) -> None:
        """What left the current window goes into the history, the expectation moves to
        `now` (and an evaluator changeover with it), the window test's lean is followed and
        the sequential test takes its pending batch and its bets for the next."""
        rule, terms, judging = self.rule, self.terms, state.judging
        judging.advanced_at = now
        expected = judging.expected = state.baseline.advance(
            state.current, state.solo, now, firing=firing, hold_from=judging.building_since()
        )
        settled = state.baseline.settled(expected)
        judging.follow(settled, now)
        if firing and not settled:
            judged = judging.judged
            level, at = (None, None) if judged is None else (judged.mean, judged.at)
            say_held(rule.config.name, state.series, level, at)
        if judging.sequential is None:
            p = self._window_p(state, now)
            if p >= WINDOW_HOLD_P:
                judging.leaning_since = None
            elif judging.leaning_since is None:
                judging.leaning_since = now - terms.window_s
            return
        self._batch(state, now, firing)
        judging.bet(terms, settled)

    def _window_p(self, state: RegressionState, now: float) -> float:
        """The window test's p-value of "the current window's mean is at most the rule's
        margin above the expected" (`Terms.margin`; 1.0 without an expectation)."""
        expected = state.judging.expected
        if expected is None:
            return 1.0
        return expected.rise_p(state.current.moments(now), self.terms.margin(expected.mean))

    def judge(self, entries: Mapping[str, Entry], now: float) -> dict[str, Judgment]:
        entry = entries[""]
        state: RegressionState = entry.state
        terms = self.terms
        test = state.judging.sequential
        expected = state.judging.expected
        current = state.current.moments(now)
        reference = Moments()
        unseasoned = state.baseline.history.learning()
        figures: dict[str, float] = {
            "learning": 1.0 if unseasoned or state.baseline.changeover is not None else 0.0,
            "unseasoned": 1.0 if unseasoned else 0.0,
            "interim": state.baseline.interim,
        }
        if expected is not None:
            reference = expected.reference()
            figures.update(expected=expected.mean, kappa=expected.kappa, rho=expected.rho)
        enough = state.baseline.settled(expected)
        ready = enough and terms.enough(current.samples)
        # A page never resolves against nothing: while its baseline holds too few verdicts
        # (a canary that took all the traffic, a reference with none) it holds on the level
        # it last judged against, and resolves when the rate comes back to that.
        held = entry.firing and not enough
        against = state.judging.judged if held else expected
        note = ""
        if held:
            judged = state.judging.judged
            at = None if judged is None else judged.at
            note = held_text(None if against is None else against.mean, at)
            if against is not None:
                reference = against.reference()
                figures.update(held=1.0, held_level=against.mean, held_at=at or now)
        increase = current.mean - against.mean if against is not None else 0.0
        if not held:
            # The window spans hours; flagged senders' verdicts in it are expected at the
            # rates of the hours they were sent in (`History.window_offset`).
            increase -= state.baseline.history.window_offset(now)
        if test is None:
            p = self._window_p(state, now)
            fire = ready and p <= terms.level(self._interval)
            p = p if ready else 1.0
            evidence = current
        else:
            strongest = test.strongest()
            evidence = strongest if strongest.samples else current
            # The test's evidence reaches past the window: a window that never holds
            # min_samples (30 s at 1 a second) is no reason to stay blind to a rise whose
            # evidence holds them.
            ready = enough and terms.enough(max(current.samples, evidence.samples))
            p = test.p_value() if ready else 1.0
            if strongest.samples:
                figures["distinct"] = test.strongest_distinct()
            # A page whose own evidence rose less than the margin contradicts itself
            # ("+0.00"): the statistic was built on something else. It waits.
            fire = (
                ready
                and expected is not None
                and test.crossed(terms.budget_s)
                and evidence.mean - expected.mean >= terms.margin(expected.mean)
            )
        resolve = current.samples == 0 or (
            against is not None
            and increase < terms.margin(against.mean)
            # A sequential page may come when the window holds little of the rise: it
            # holds until a whole window has passed since.
            and (test is None or now - entry.started_at >= terms.window_s)
        )
        if entry.firing and not resolve and now - entry.started_at >= terms.accept_after_s:
            resolve = True
            figures["accepted"] = 1.0
            note = (
                f"accepted as the new normal: the rise lasted "
                f"{shown_duration(terms.accept_after_s)} (baseline.accept_after)"
            )
        fired = entry.fired
        if entry.firing and not resolve and fired is not None:
            # Every copy of a page says what it fired on (and why it holds).
            if not held:
                return {"": fired}
            kept: dict[str, float] = {
                k: figures[k] for k in ("held_level", "held_at") if k in figures
            }
            return {"": replace(fired, note=note, figures={**fired.figures, **kept})}
        if entry.firing and resolve:
            evidence = current
            if test is not None:
                # A resolve says what the window shows now, not the p-value and distinct
                # requests of the run that paged (kept by the test until `settle`).
                p = self._window_p(state, now)
                figures.pop("distinct", None)
            if held and "accepted" not in figures:
                back = against is not None and current.samples
                note = came_back_text(against.mean) if against is not None and back else ""
        if against is not None:
            figures["increase"] = evidence.mean - against.mean
        return {
            "": Judgment(
                decide(entry.firing, fire, resolve),
                current=evidence,
                reference=reference,
                p_value=p,
                note=note,
                figures=figures,
            )
        }

    def settle(self, entry: Entry, judgment: Judgment, now: float) -> None:
        """A resolve ends the rise: a rise accepted as the new normal joins the level, the
        test starts anew, and what was held out stays out (it paged)."""
        state: RegressionState = entry.state
        accepted = judgment.figures.get("accepted")
        state.baseline.settle(now, entry.started_at - self.terms.window_s if accepted else None)
        if state.judging.sequential is not None:
            state.judging.sequential.reset()

    # -- what it says and shows --------------------------------------------------------

    def describe(self, service: str, cohort: str, judgment: Judgment) -> dict[str, str]:
        cfg = self.rule.config
        assert cfg.baseline is not None
        current, expected = judgment.current, judgment.reference
        what = self.rule.subject
        measured = self.rule.measured
        last = f"over the last {current.samples:,} verdicts"
        span = last if self.rule.sequential else f"over {cfg.window}"
        test = "sequential test" if self.rule.sequential else "window test"
        increase = current.mean - expected.mean
        distinct = judgment.figures.get("distinct")
        distinct_text = (
            f"; {int(distinct):,} distinct requests"
            if distinct is not None and judgment.current.samples
            else ""
        )
        story = (
            f"{measured} {current.mean:.2f} {span} against {expected.mean:.2f} expected "
            f"from {season_text(self._baseline, judgment.figures)} "
            f"({current.samples:,} / {expected.samples:,} verdicts{distinct_text}), "
            f"{increase:+.2f}, "
            f"{p_text(judgment.p_value)} ({test}, one false page per {self.rule.budget})"
        )
        if judgment.note:
            story = f"{judgment.note}; {story}"
        moved = f"rose from {expected.mean:.2f} to {current.mean:.2f}"
        if judgment.decision is Decision.RESOLVE:
            moved = f"came back to {current.mean:.2f} against {expected.mean:.2f} expected"
            if cfg.measure == "no_context":
                what = "the context is back:"
        return {
            "summary": f"{what} {measured} on {service} {moved}",
            "description": story,
            "defect_rate": f"{current.mean:.4f}",
            "baseline_defect_rate": f"{expected.mean:.4f}",
            "increase": f"{increase:.4f}",
            "p_value": f"{judgment.p_value:.3g}",
            "samples": str(current.samples),
            "distinct_requests": str(int(judgment.figures.get("distinct", current.samples))),
            "baseline_samples": str(expected.samples),
            "false_page_every": self.rule.budget,
            "dispersion": f"{judgment.figures.get('kappa', 1.0):.2f}",
            "conversation_correlation": f"{judgment.figures.get('rho', 0.0):.2f}",
            **held_annotations(judgment.figures),
        }

    def publish(self, gauges: AlertGauges, service: str, entries: Mapping[str, Entry]) -> None:
        entry = entries[""]
        state: RegressionState = entry.state
        name = self.rule.config.name
        judgment = entry.judgment
        now = state.judging.advanced_at if state.judging.advanced_at is not None else 0.0
        current = state.current.moments(now)
        gauges.samples(service, name, "current", current.samples)
        gauges.rate(service, name, current.samples, current.mean)
        if judgment is not None:
            reference = judgment.reference
            gauges.samples(service, name, "baseline", reference.samples)
            gauges.baseline_rate(service, name, reference.samples, reference.mean)
            gauges.ready(service, name, judgment.figures.get("learning", 0.0) == 0.0)
        if state.judging.sequential is not None:
            gauges.evidence(service, name, state.judging.sequential.progress(self.terms.budget_s))
        gauges.firing(self.rule, service, "", entry.firing)
        gauges.screen(service, name, state.baseline.history.senders, now)
