"""Regression rules (`baseline`): a service against what it usually shows.

The **current window** (`window`) is compared with what the service is expected to show
now (`monitor.alerts.evidence.history`: its level over the trailing `baseline.window`, its day and
week with `baseline.season`, the higher of the recent and the long level). A rise is judged
as a user means `min_increase`, the smallest rise worth a page: the null hypothesis is "the
mean rose by at most half of it".

- `test: sequential` (the default): verdicts go to the sequential test
  (`monitor.alerts.evidence.sequential`) as they arrive — those of a conversation as one arrival,
  judged against what its earlier verdicts predict — in batches of `BATCH` arrivals (and at
  every evaluation); a batch that takes its statistic past the rule's budget asks for an
  evaluation at once, which pages.
- `test: window`: a one-sided z-test of "the current window's mean is at most
  `min_increase / 2` above the expected" at each evaluation, at the level a look may use
  (`stats.look_level`), its variance widened by the design effect and the expectation's
  error. While the window leans up (p below `WINDOW_HOLD_P`) what leaves it is held out.

Either fires only with `min_samples` verdicts in the current window and
`baseline.min_samples` behind the level (before a season's first complete day, against the
highest hour seen: `History.expectation`). After an evaluator revision change the history
carries over and translates into the new revision's level (`succeed`). It **resolves** when the
current window's increase falls below half of `min_increase` (a sequential page holds at
least one `window`), when the window empties, or when the rise has lasted
`baseline.accept_after`: then it is the service's new normal (the page says so) and what
was held out joins the level.

**A rise never teaches the level before it is judged.** Verdicts leaving the current window
while the evidence builds (the strongest run's p-value below `sequential.HOLD_P`), while the
rule fires, or that began before the last resolve are added to the history as a rise: kept
out of the level (the baseline's clock stands still), counted in the season. Held verdicts
whose evidence faded join the level; so do those held longer than `baseline.window`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from monitor.alerts.describe import p_text, shown_duration
from monitor.alerts.evidence import LONG_LEVEL_FACTOR as LONG_SPAN
from monitor.alerts.evidence import (
    NOTHING,
    Arrival,
    Bets,
    Expectation,
    History,
    Level,
    Moments,
    SequentialTest,
    SlidingWindow,
    Unit,
    bets,
    look_level,
    restore_slices,
    rise_p_value,
    saved_number,
)
from monitor.alerts.gauges import AlertGauges
from monitor.alerts.kinds import Entry, Judgment
from monitor.alerts.rule import Rule
from monitor.config import AlertBaseline, AlertRule, pinned_period
from monitor.telemetry import RateLimitedLog

_log = RateLimitedLog(logging.getLogger(__name__), 3600.0)

# Units per batch of the sequential test between evaluations: small enough that a page
# waits for few verdicts, large enough that a busy service costs little per verdict.
BATCH = 8
# A window test holds back what leaves its window while the window leans up this much.
WINDOW_HOLD_P = 0.1


@dataclass(frozen=True, slots=True)
class Changeover:
    """An evaluator revision replaced the one the history was learned with, at `since`:
    `before` is the old revision's deseasonalised level over the baseline window before it,
    `bucket` the history's bucket it fell in, `counts` that bucket's verdicts (clean,
    held) of the old revision, and `applied` the offset the older buckets were moved by
    so far."""

    since: float
    bucket: int
    before: Level
    counts: tuple[float, float]
    applied: float = 0.0


@dataclass(slots=True)
class RegressionState:
    current: SlidingWindow
    # The current window's verdicts that came without a conversation.
    solo: SlidingWindow
    history: History
    test: SequentialTest | None
    # Since the last batch: verdicts without a conversation by level, conversations'
    # arrivals.
    pending: list[float]
    pending_arrivals: list[Arrival] = field(default_factory=list)
    bets: Bets | None = None
    # What went into the history as a rise while evidence built: bucket -> (all, solo).
    held: dict[int, tuple[Moments, Moments]] = field(default_factory=dict)
    # A pinned reference once learned: (start, end, its level).
    pinned: tuple[float, float, Level] | None = None
    # Mirrors the engine's firing state as of the last judgment (the engine honours every
    # fire and resolve a judgment asks for).
    firing: bool = False
    resolved_at: float = 0.0
    leaning_since: float | None = None
    last: float | None = None
    # While the new revision's offset from the old is measured (see `succeed`).
    changeover: Changeover | None = None
    # After it: the offset's variance, added to the expectation's error until `until`.
    translated: tuple[float, float] | None = None


class Regression:
    def __init__(self, rule: Rule, interval_s: float) -> None:
        cfg = rule.config
        assert cfg.baseline is not None
        self.rule = rule
        self._baseline = cfg.baseline
        self._baseline_s = rule.baseline_s or 0.0
        self._accept_s = rule.accept_after_s
        self._interval = interval_s

    @staticmethod
    def summary(config: AlertRule, budget: str) -> str:
        assert config.baseline is not None
        measured = "mean defect score" if config.measure == "scores" else "defect rate"
        return (
            f"{measured} up by {config.min_increase:g} or more on "
            f"{reference_text(config.baseline)} ({config.test} test, window {config.window}, "
            f"{budget})"
        )

    def new_state(self) -> RegressionState:
        rule = self.rule
        return RegressionState(
            SlidingWindow(rule.window_s),
            SlidingWindow(rule.window_s),
            History(self._baseline_s, self._baseline.season, rule.steps, rule.budget_s),
            SequentialTest() if rule.sequential else None,
            [0.0] * (rule.steps + 1),
        )

    def succeed(self, old: RegressionState, now: float) -> RegressionState:
        """The state after an evaluator revision replaced `old`'s at `now`: new windows and
        test, and `old`'s history (its season and clustering are the traffic's, not the
        evaluator's), whose level translates into the new revision's once its own verdicts
        measured the offset (`_changeover_expectation`). Without a level to translate, the
        history starts anew."""
        state = self.new_state()
        building = old.test.building_since() if old.test is not None else old.leaning_since
        # What the old revision's current window held goes to its history first.
        self._advance(old, now + 2 * self.rule.window_s, firing=old.firing, hold_from=building)
        history = old.history
        before = history.period_level(now - self._baseline_s, now + history.width_s)
        if before is None or before.samples < self._baseline.min_samples:
            _log.log(
                f"{self.rule.config.name} no translation",
                logging.WARNING,
                "alert %s: the evaluator revision changed with no level of the old one to "
                "translate: the new revision's baseline is learned anew",
                self.rule.config.name,
            )
            return state
        state.history = history
        bucket = history.bucket(now)
        state.changeover = Changeover(now, bucket, before, history.counts(bucket))
        return state

    # -- verdicts in ------------------------------------------------------------------

    def add(
        self,
        state: RegressionState,
        histogram: Sequence[float],
        conversation: Arrival | None,
        now: float,
    ) -> bool:
        moments = Moments.of_histogram(histogram)
        state.current.add_counts(now, moments)
        if conversation is None:
            state.solo.add_counts(now, moments)
        if state.test is None:
            return False
        if conversation is None:
            for k, count in enumerate(histogram):
                state.pending[k] += count
        else:
            state.pending_arrivals.append(conversation)
        if sum(state.pending) + len(state.pending_arrivals) < BATCH:
            return False
        return self._batch(state, now)

    def add_unit(self, state: RegressionState, unit: Unit, now: float) -> bool:
        state.history.add_unit(now, unit)
        return False

    def _batch(self, state: RegressionState, now: float) -> bool:
        """Feeds the pending units to the sequential test (none while it has no bets or the
        rule fires: those count in the windows only); True when it crossed the budget."""
        test = state.test
        assert test is not None
        pending = sum(state.pending) or state.pending_arrivals
        if pending and state.bets is not None and not state.firing:
            test.update(state.bets, state.pending, state.pending_arrivals, now)
        state.pending[:] = [0.0] * len(state.pending)
        state.pending_arrivals.clear()
        return not state.firing and test.crossed(self.rule.budget_s)

    # -- judging ----------------------------------------------------------------------

    def judge(self, entries: Mapping[str, Entry], now: float) -> dict[str, Judgment]:
        entry = entries[""]
        return {"": self._judge(entry, entry.state, now)}

    def _judge(self, entry: Entry, state: RegressionState, now: float) -> Judgment:
        rule, cfg = self.rule, self.rule.config
        m = rule.min_increase
        test = state.test
        state.firing = entry.firing
        hold_from = test.building_since() if test is not None else state.leaning_since
        self._advance(state, now, firing=entry.firing, hold_from=hold_from)
        history = state.history
        expected = self._expectation(state, now)
        current = state.current.moments(now)
        reference = NOTHING
        unseasoned = history.learning()
        figures: dict[str, float] = {
            "learning": 1.0 if unseasoned or state.changeover is not None else 0.0,
            "unseasoned": 1.0 if unseasoned else 0.0,
        }
        if expected is not None:
            reference = Moments(expected.samples, expected.mean * expected.samples, 0.0)
            figures.update(expected=expected.mean, kappa=expected.kappa, rho=expected.rho)
        enough = expected is not None and expected.samples >= self._baseline.min_samples
        ready = enough and current.samples >= cfg.min_samples
        increase = current.mean - expected.mean if expected is not None else 0.0
        note = ""
        if test is None:
            p = 1.0
            if expected is not None:
                variance = expected.variance * expected.design / max(1, current.samples)
                p = rise_p_value(current.mean - expected.mean, variance + expected.se2, m / 2)
            if p >= WINDOW_HOLD_P:
                state.leaning_since = None
            elif state.leaning_since is None:
                state.leaning_since = now - rule.window_s
            fire = ready and p <= look_level(self._interval, rule.budget_s)
            p = p if ready else 1.0
            evidence = current
        else:
            crossed = self._batch(state, now)
            state.bets = (
                bets(expected, m, rule.steps, rule.budget_s)
                if expected is not None and enough
                else None
            )
            p = test.p_value() if ready else 1.0
            strongest = test.strongest()
            evidence = strongest if strongest.samples else current
            if strongest.samples:
                figures["distinct"] = test.strongest_distinct()
            # A page whose own evidence rose less than half of min_increase contradicts
            # itself ("+0.00"): the statistic was built on something else. It waits.
            own = evidence.mean - expected.mean if expected is not None else 0.0
            fire = ready and crossed and own >= m / 2
        resolve = current.samples == 0 or (
            increase < m / 2
            # A sequential page may come when the window holds little of the rise: it
            # holds until a whole window has passed since.
            and (test is None or now - entry.started_at >= rule.window_s)
        )
        if entry.firing and not resolve and now - entry.started_at >= self._accept_s:
            resolve = True
            history.accept(entry.started_at - rule.window_s)
            note = (
                f"accepted as the new normal: the rise lasted "
                f"{shown_duration(self._accept_s)} (baseline.accept_after)"
            )
        if entry.firing and resolve:
            state.firing = False
            state.resolved_at = now
            if test is not None:
                test.reset()
            state.held.clear()
            evidence = current
        elif not entry.firing and fire:
            state.firing = True
        if expected is not None:
            figures["increase"] = evidence.mean - expected.mean
        return Judgment(
            fire=fire,
            resolve=resolve,
            current=evidence,
            reference=reference,
            p_value=p,
            note=note,
            figures=figures,
        )

    def _expectation(self, state: RegressionState, now: float) -> Expectation | None:
        """What the current window is compared with (`baseline.reference`), after an
        evaluator changeover translated into the new revision's terms."""
        if state.changeover is not None:
            return self._changeover_expectation(state, now)
        return self._translated_expectation(state, now)

    def _translated_expectation(self, state: RegressionState, now: float) -> Expectation | None:
        expected = self._reference_expectation(state, now)
        if state.translated is not None and now >= state.translated[1]:
            state.translated = None
        if expected is None or state.translated is None:
            return expected
        return replace(expected, se2=expected.se2 + state.translated[0])

    def _changeover_expectation(self, state: RegressionState, now: float) -> Expectation | None:
        """While the new revision's offset from the old one is measured: the offset is its
        level since the change (deseasonalised by the history's season, once it holds
        `baseline.min_samples`) less the old level before it; the history's older buckets
        move by it, as if the new revision had scored them (so the level, the season and
        the dispersion stay of one revision), and the expectation's error includes the
        offset's. Once its standard error is within a quarter of `min_increase`, the offset
        is kept (its variance stays in the error while the translated buckets count)."""
        change, history = state.changeover, state.history
        assert change is not None
        start = (change.bucket + 1) * history.width_s
        since = history.period_level(start, now + history.width_s)
        if since is None or since.samples < self._baseline.min_samples:
            return None
        delta = since.mean - change.before.mean
        history.translate(change.bucket, delta - change.applied, change.counts)
        variance = self._level_se2(since) + self._level_se2(change.before)
        if variance > (self.rule.min_increase / 4) ** 2:
            state.changeover = replace(change, applied=delta)
        else:
            state.changeover = None
            _log.log(
                f"{self.rule.config.name} translated",
                logging.INFO,
                "alert %s: the new evaluator revision reads %+.3f against the one before "
                "(%d verdicts since the change): its history is translated",
                self.rule.config.name,
                delta,
                since.samples,
            )
        # The translated buckets count in the long level for seven baseline windows.
        state.translated = (variance, now + LONG_SPAN * self._baseline_s)
        return self._translated_expectation(state, now)

    def _level_se2(self, level: Level) -> float:
        variance = level.mean * (1 - level.mean) if self.rule.steps == 1 else level.variance
        return variance * level.error_units / max(1, level.samples) ** 2

    def _reference_expectation(self, state: RegressionState, now: float) -> Expectation | None:
        """What `baseline.reference` expects now."""
        reference, history = self._baseline.reference, state.history
        if reference == "trailing":
            return history.expectation(now, self._baseline.min_samples)
        if reference == "last_week":
            return history.last_week(now)
        start, end = pinned_period(reference.pinned)
        if state.pinned is None or state.pinned[:2] != (start, end):
            level = history.period_level(start, end) if end <= now - self.rule.window_s else None
            if level is None:
                _log.log(
                    self.rule.config.name,
                    logging.WARNING,
                    "alert %s: the pinned period %s is not in the history (it keeps %s, and "
                    "must have ended): the rule cannot judge until it is",
                    self.rule.config.name,
                    reference.pinned,
                    shown_duration(history.span * history.width_s),
                )
                return None
            state.pinned = (start, end, level)
        return history.pinned(now, state.pinned[2])

    def _advance(
        self, state: RegressionState, now: float, *, firing: bool, hold_from: float | None
    ) -> None:
        """Moves what left the current window into the history (see the module docstring)."""
        history = state.history
        state.last = now
        width = state.current.width
        solo_gone = {s.index: s for s in state.solo.expire(now)}
        for piece in state.current.expire(now):
            start = piece.index * width
            moments = Moments(piece.samples, piece.defects, piece.squares)
            solo_piece = solo_gone.get(piece.index)
            solo = (
                Moments(solo_piece.samples, solo_piece.defects, solo_piece.squares)
                if solo_piece is not None
                else NOTHING
            )
            held = hold_from is not None and start + width > hold_from
            # Slices that began before the last resolve held verdicts of the rise.
            rise = firing or held or start < state.resolved_at
            history.add(start, moments, solo, rise=rise)
            if held and not firing:
                bucket = history.bucket(start)
                before, before_solo = state.held.get(bucket, (NOTHING, NOTHING))
                state.held[bucket] = (before.plus(moments), before_solo.plus(solo))
        if firing:
            state.held.clear()  # part of the rise that paged: never released
        elif hold_from is None and state.held:
            history.release(state.held)
            state.held.clear()
        elif state.held:
            # Held longer than a baseline window: joins the level.
            limit = history.bucket(now - self._baseline_s - self.rule.window_s)
            old = {b: v for b, v in state.held.items() if b < limit}
            if old:
                history.release(old)
                for b in old:
                    del state.held[b]

    # -- what it says and shows --------------------------------------------------------

    def describe(self, service: str, cohort: str, judgment: Judgment) -> dict[str, str]:
        cfg = self.rule.config
        assert cfg.baseline is not None
        current, expected = judgment.current, judgment.reference
        what = self.rule.subject
        measured = self.rule.measured
        span = (
            f"over the last {current.samples:,} verdicts"
            if self.rule.sequential
            else f"over {cfg.window}"
        )
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
            f"from {self._season_text(judgment)} "
            f"({current.samples:,} / {expected.samples:,} verdicts{distinct_text}), "
            f"{increase:+.2f}, "
            f"{p_text(judgment.p_value)} ({test}, one false page per {self.rule.budget})"
        )
        if judgment.note:
            story = f"{judgment.note}; {story}"
        return {
            "summary": (
                f"{what} {measured} on {service} rose from {expected.mean:.2f} "
                f"to {current.mean:.2f}"
            ),
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
        }

    def _season_text(self, judgment: Judgment) -> str:
        text = reference_text(self._baseline)
        if judgment.figures.get("unseasoned") and self._baseline.season != "none":
            return f"{text} (season not learned yet: the highest hour seen)"
        return text

    def publish(self, gauges: AlertGauges, service: str, entries: Mapping[str, Entry]) -> None:
        entry = entries[""]
        state: RegressionState = entry.state
        name = self.rule.config.name
        judgment = entry.judgment
        now = state.last if state.last is not None else 0.0
        current = state.current.moments(now)
        gauges.samples(service, name, "current", current.samples)
        gauges.rate(service, name, current.samples, current.mean)
        if judgment is not None:
            reference = judgment.reference
            gauges.samples(service, name, "baseline", reference.samples)
            gauges.baseline_rate(service, name, reference.samples, reference.mean)
            gauges.ready(service, name, judgment.figures.get("learning", 0.0) == 0.0)
        if state.test is not None:
            gauges.evidence(service, name, state.test.progress(self.rule.budget_s))
        gauges.firing(self.rule, service, "", entry.firing)

    # -- the state file ------------------------------------------------------------------

    def snapshot(self, state: RegressionState) -> dict[str, Any]:
        out: dict[str, Any] = {
            "current": state.current.slices(),
            "solo": state.solo.slices(),
            "history": state.history.snapshot(),
            "held": [
                [bucket, *_moments(all_), *_moments(solo)]
                for bucket, (all_, solo) in state.held.items()
            ],
            "firing": state.firing,
            "pinned": None
            if state.pinned is None
            else [state.pinned[0], state.pinned[1], *_level(state.pinned[2])],
            "resolved_at": state.resolved_at,
            "leaning_since": state.leaning_since,
            "last": state.last,
            "changeover": None
            if state.changeover is None
            else [
                state.changeover.since,
                state.changeover.bucket,
                *_level(state.changeover.before),
                *state.changeover.counts,
                state.changeover.applied,
            ],
            "translated": None if state.translated is None else list(state.translated),
        }
        if state.test is not None:
            out["sequential"] = state.test.snapshot()
        return out

    def restore(self, state: RegressionState, raw: Any) -> None:
        state.current.restore(restore_slices(raw["current"]))
        state.solo.restore(restore_slices(raw["solo"]))
        state.history.restore(raw["history"])
        held = {}
        for entry in raw["held"]:
            bucket, n, d, q, sn, sd, sq = entry
            held[int(bucket)] = (
                Moments(int(n), _nonnegative(d), _nonnegative(q)),
                Moments(int(sn), _nonnegative(sd), _nonnegative(sq)),
            )
        state.held = held
        pinned = raw.get("pinned")
        if pinned is not None:
            start, end, mean, variance, samples, units = (_nonnegative(x) for x in pinned)
            state.pinned = (start, end, Level(mean, variance, int(samples), units))
        if not isinstance(raw["firing"], bool):
            raise TypeError("firing is not true or false")
        state.firing = raw["firing"]
        state.resolved_at = _nonnegative(raw["resolved_at"])
        leaning = raw["leaning_since"]
        state.leaning_since = None if leaning is None else _nonnegative(leaning)
        last = raw["last"]
        state.last = None if last is None else _nonnegative(last)
        # Absent in a file saved before changeovers were kept: none under way.
        change = raw.get("changeover")
        if change is not None:
            since, bucket, mean, variance, samples, units, clean, held, applied = change
            if isinstance(bucket, bool) or not isinstance(bucket, int):
                raise TypeError("changeover: the bucket is not an integer")
            state.changeover = Changeover(
                _nonnegative(since),
                bucket,
                Level(
                    _nonnegative(mean),
                    _nonnegative(variance),
                    int(_nonnegative(samples)),
                    _nonnegative(units),
                ),
                (_nonnegative(clean), _nonnegative(held)),
                saved_number(applied),
            )
        translated = raw.get("translated")
        if translated is not None:
            variance, until = translated
            state.translated = (_nonnegative(variance), _nonnegative(until))
        if state.test is not None and raw.get("sequential") is not None:
            state.test.restore(raw["sequential"])


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


def _nonnegative(raw: Any) -> float:
    return saved_number(raw, nonnegative=True)


def _moments(m: Moments) -> list[float]:
    return [m.samples, m.defects, m.squares]


def _level(level: Level) -> list[float]:
    return [level.mean, level.variance, level.samples, level.error_units]
