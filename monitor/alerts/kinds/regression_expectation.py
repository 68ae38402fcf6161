"""What a regression rule's current window is compared with (`baseline.reference`: the
trailing level and season, the same hours a week before, or a pinned period), and how an
evaluator changeover translates the history into the new revision's terms
(`monitor.alerts.kinds.regression`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from monitor.alerts.describe import shown_duration
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.alerts.rule import Rule
from monitor.config import AlertBaseline, pinned_period
from monitor.evidence import LONG_LEVEL_FACTOR as LONG_SPAN
from monitor.evidence import Expectation, Level
from monitor.telemetry import RateLimitedLog

_log = RateLimitedLog(logging.getLogger(__name__), 3600.0)
# A level the season's offset at an hour is read against (`History.pinned` adds it).
_PROBE = Level(0.5, 0.25, 1, 1.0)
# A level known exactly: what `History.pinned` adds to its error is the season's alone.
_EXACT = Level(0.5, 0.0, 10**12, 1e12)
# The consecutive periods' offset joins the overlap's while the two read within this many
# of their joint standard errors.
JOIN_Z = 2.0


class Expecting:
    """The expectation of one regression rule; moves a changeover on as it measures it (an
    advance's step, never a judgment's)."""

    def __init__(self, rule: Rule) -> None:
        assert rule.config.baseline is not None
        self.rule = rule
        self._baseline = rule.config.baseline
        self._baseline_s = rule.baseline_s or 0.0

    def __call__(self, state: RegressionState, now: float) -> Expectation | None:
        """What the current window is compared with (`baseline.reference`), after an
        evaluator changeover translated into the new revision's terms."""
        state.interim = 0.0
        if state.changeover is not None:
            return self._changeover_expectation(state, now)
        expected = self._translated_expectation(state, now)
        if state.translated is None and (
            expected is None or expected.samples < self._baseline.min_samples
        ):
            return self._first(state, now) or expected
        return expected

    def _first(self, state: RegressionState, now: float) -> Expectation | None:
        """Before the history expects anything (a fresh rule, a trailing reference): its
        first verdicts (`FirstLevel`) for its first hour, so that a rise then is judged
        against what came before it."""
        level = state.first.level(now)
        if self._baseline.reference != "trailing" or level is None:
            return None
        state.interim = 2.0
        return state.history.first(now, level)

    def _translated_expectation(self, state: RegressionState, now: float) -> Expectation | None:
        expected = self._reference_expectation(state, now)
        if state.translated is not None and now >= state.translated[1]:
            state.translated = None
        if expected is None or state.translated is None:
            return expected
        return replace(expected, se2=expected.se2 + state.translated[0])

    def _changeover_expectation(self, state: RegressionState, now: float) -> Expectation | None:
        """While the new revision's offset from the old one is measured: the best measured
        (the smallest variance) of the offsets measured so far (`_offsets`: the overlap's,
        the consecutive periods', the pairs joined with the new revision's own hours); the
        history's older buckets move by it, as if the new revision had scored them (so the
        level, the season and the dispersion stay of one revision), and the expectation's
        error includes the offset's. Once its standard error is within a quarter of
        `min_increase`, the offset is kept (its variance stays in the error while the
        translated buckets count). Before any offset is measured: the new revision's own
        level since the change (`_interim`)."""
        change, history = state.changeover, state.history
        assert change is not None
        measured = self._offsets(state, now)
        if not measured:
            return self._interim(state, now)
        variance, delta, how = min(measured)
        history.translate(change.bucket, delta - change.applied, change.counts)
        # Hours held apart while evidence builds are measured before the offset is kept.
        if variance > (self.rule.min_increase / 4) ** 2 or state.held_overlap is not None:
            state.changeover = replace(change, applied=delta)
        else:
            state.changeover = None
            _log.log(
                f"{self.rule.config.name} translated {state.series}",
                logging.INFO,
                "alert %s for %s: the new evaluator revision reads %+.3f against the one "
                "before (%s): its history is translated",
                self.rule.config.name,
                state.series,
                delta,
                how,
            )
        # The translated buckets count in the long level for seven baseline windows.
        state.translated = (variance, now + LONG_SPAN * self._baseline_s)
        return self._translated_expectation(state, now)

    def _interim(self, state: RegressionState, now: float) -> Expectation | None:
        """While no offset is measured (the old revision no longer scores, and the new one
        has too few verdicts in whole buckets): the new revision's first verdicts since the
        change (its buckets in order until they hold `baseline.min_samples`; what comes
        later is judged against them, not learned, as a window is not learned by the
        baseline it is judged against), deseasonalised by the season the history learned (the
        traffic's: the revisions are taken to differ by an offset, not to swing apart), a
        flat level with its error (counted with the old level's design effect) plus this
        hour's offset, the season's error and its wander. None while the history has no
        season learned yet, or before the first verdict."""
        change, history = state.changeover, state.history
        assert change is not None
        n = raw = defects = squares = 0.0
        for bucket in sorted(change.interim):
            if n >= self._baseline.min_samples:
                break  # the level is of the first verdicts only: a later rise is judged
            count, total, total_squares = change.interim[bucket]
            hour = history.pinned(bucket * history.width_s, _PROBE)
            if hour is None:
                return None
            n, raw, squares = n + count, raw + total, squares + total_squares
            defects += total - count * (hour.mean - _PROBE.mean)
        if n <= 0:
            return None
        mean = min(1.0, max(0.0, defects / n))
        before = change.before
        design = max(1.0, before.error_units / max(1, before.samples))
        variance = max(squares / n - (raw / n) ** 2, 0.0)
        expected = history.pinned(now, Level(mean, variance, int(n), n * design))
        if expected is not None and expected.samples >= self._baseline.min_samples:
            state.interim = 1.0
            _log.log(
                f"{self.rule.config.name} interim {state.series}",
                logging.WARNING,
                "alert %s for %s: no verdicts of the replaced evaluator revision translate its "
                "level: judged against the new revision's own level since the change (%d "
                "verdicts, with the season learned before it) until its baseline is ready",
                self.rule.config.name,
                state.series,
                int(n),
            )
        return expected

    def _offsets(self, state: RegressionState, now: float) -> list[tuple[float, float, str]]:
        """The offsets measured so far, as (variance, offset, how): the overlap's
        (`Overlap`: both revisions on the same records or in the same hours, the pairs
        measured in shadow before the switch among them), alone while the old revision
        still reports (within a `window`: a change of the service is then not the
        evaluator's); the consecutive periods' (`_hours`), once the old one is gone; and
        the pairs' joined with the hours' by inverse variance, as two independent
        estimates (the pairs' error is the revisions' disagreement on the same records, the
        hours' the traffic's sampling). The hours take a change of the service meanwhile
        for the evaluator's; where they read further from the pairs than `JOIN_Z` joint
        standard errors, that is what moved them, and they are not joined."""
        change = state.changeover
        assert change is not None
        before = change.before
        design = max(1.0, before.error_units / max(1, before.samples))
        overlap = change.overlap.offset(design)
        out = [] if overlap is None else [(overlap[1], overlap[0], overlap[2])]
        hours = self._hours(state, now, None if overlap is None else overlap[0])
        paired = change.overlap.offset(design, paired=True)
        if hours is not None and paired is not None:
            (o1, v1, how1), (v2, o2, how2) = paired, hours
            if (o1 - o2) ** 2 <= JOIN_Z**2 * (v1 + v2):
                variance = 1.0 / (1.0 / v1 + 1.0 / v2)
                joined = variance * (o1 / v1 + o2 / v2)
                out.append((variance, joined, f"{how1}, joined with {how2}"))
        if hours is not None and not (out and now - change.overlap.old_seen < self.rule.window_s):
            out.append(hours)
        return out

    def _hours(
        self, state: RegressionState, now: float, paired: float | None
    ) -> tuple[float, float, str] | None:
        """The consecutive periods' offset: the new revision's deseasonalised level over the
        whole buckets since the change (once `baseline.min_samples`) less the old level
        before it. Its variance is both levels' plus an allowance for the season: its own
        error and wander, and for revisions that disagree much (an offset `paired`, or
        this one, large against the old level) what the season would read if the new
        revision scaled it rather than shifted it (`offset / old level` times the mean
        seasonal offset of those hours)."""
        change, history = state.changeover, state.history
        assert change is not None
        before = change.before
        first = change.bucket + 1
        since = history.period_level(first * history.width_s, now + history.width_s)
        if since is None or since.samples < self._baseline.min_samples:
            return None
        delta = since.mean - before.mean
        exact = history.pinned(now, _EXACT)
        season = exact.se2 if exact is not None else 0.0
        hours = range(first, history.bucket(now) + 1)
        offsets = [history.pinned(b * history.width_s, _PROBE) for b in hours]
        mean_offset = sum(abs(e.mean - _PROBE.mean) for e in offsets if e is not None)
        mean_offset /= max(1, len(offsets))
        relative = abs(paired if paired is not None else delta) / max(before.mean, 0.01)
        variance = self._level_se2(since) + self._level_se2(before)
        variance += season + (relative * mean_offset) ** 2
        how = (
            f"{since.samples} verdicts since the change against the old level before "
            "it: a change of the service meanwhile is taken for the evaluator's"
        )
        return variance, delta, how

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
