"""What a regression rule expects of one service, in one place: its history (`History`),
the verdicts held out while evidence of a rise builds, an evaluator changeover (`Changeover`:
the old revision's level, the new one's offset as measured, the interim level), a revision
scoring in shadow (`Shadow`), and the expectation they make (`Baseline.advance`). The rule
keeps its windows, its test and its judgment; it hands the baseline what left its window
and asks what to expect (docs/alerts.md, "Regression rules")."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from monitor.evidence.baseline_state import baseline_restore, baseline_saved
from monitor.evidence.changeover import (
    Changeover,
    interim_level,
    offsets,
    shown_duration,
)
from monitor.evidence.counts import NOTHING, Moments, Unit
from monitor.evidence.first_level import FirstLevel
from monitor.evidence.history import LONG_LEVEL_FACTOR, Expectation, History
from monitor.evidence.level import Level
from monitor.evidence.overlap import Overlap
from monitor.evidence.shadow import Shadow, Slope, sloped, switch_slope
from monitor.evidence.terms import Terms
from monitor.evidence.window import SlidingWindow


class Say(Protocol):
    """Where a baseline's log lines go: `key` names the line (one per rule and series, ""
    for the rule's own), `message` a %-format of `args`."""

    def __call__(self, key: str, level: int, message: str, *args: object) -> None: ...


class Baseline:
    """One regression rule's baseline of one series (see the module docstring)."""

    def __init__(self, terms: Terms, say: Say) -> None:
        self.terms = terms
        self._say = say
        self._hold_s = terms.baseline_s + terms.window_s  # how long anything is held
        self.history = History(
            terms.baseline_s, terms.season, terms.steps, terms.budget_s, terms.window_s
        )
        # What went into the history as a rise while evidence built: bucket -> (all, solo).
        self.held: dict[int, tuple[Moments, Moments]] = {}
        # A pinned reference once learned: (start, end, its level).
        self.pinned: tuple[float, float, Level] | None = None
        self.resolved_at = 0.0
        # While the new revision's offset from the old is measured (`succeed`).
        self.changeover: Changeover | None = None
        # After it: the offset's variance, added to the expectation's error until `until`.
        self.translated: tuple[float, float] | None = None
        # Whether the last expectation was an interim level (not saved): 1 a changeover's,
        # 2 a fresh rule's first verdicts (`first`).
        self.interim = 0.0
        self.first = FirstLevel(terms.baseline_samples)
        # While evidence of a rise builds (as of the last advance), what both revisions
        # score is kept apart from the changeover's overlap (`held_overlap`), as the rise's
        # verdicts are from the level: joined when the evidence fades, dropped when the
        # rule fires (not saved: a restart drops it).
        self.building = False
        self.held_overlap: Overlap | None = None
        self._held_since = 0.0
        # A revision scoring records in shadow beside the series' own (`count_shadow`), and
        # after the switch how its difference from the old follows the day (`take_shadow`).
        self.shadow: Shadow | None = None
        self.slope: Slope | None = None

    # -- verdicts in --------------------------------------------------------------------

    def add_unit(self, now: float, unit: Unit) -> None:
        self.history.add_unit(now, unit)

    def sent(self, now: float, sender: str | None, moments: Moments, *, solo: bool) -> None:
        self.history.sent(now, sender, moments, solo=solo)

    def count(self, moments: Moments, now: float, *, old: bool, firing: bool) -> None:
        """Verdicts of either revision while a changeover lasts: to its overlap (the new
        revision's to its interim level too), held apart while evidence builds and left out
        while the rule fires (a rise of the service that moves the two revisions' rates by
        different amounts, as a doubling does, would move the offset). A fresh rule's own
        verdicts go to its first level (after a changeover, the translated history and the
        interim level are what the new revision is judged against)."""
        change = self.changeover
        if not old and not firing and change is None and self.translated is None:
            self.first.add(moments, now)
        if change is None or firing:
            return
        bucket = self.history.bucket(now)
        self._overlap(change).add(bucket, moments, now, old=old)
        if old:
            change.overlap.old_seen = now  # the old revision reports, held or not
        taken = sum(sums[0] for sums in change.interim.values())
        if not old and moments.samples > 0 and taken < self.terms.baseline_samples:
            # Its first verdicts only, never a whole open bucket: a rise after them is judged.
            sums = change.interim.setdefault(bucket, [0.0, 0.0, 0.0])
            for i, x in enumerate((moments.samples, moments.defects, moments.squares)):
                sums[i] += x

    def count_pair(
        self, revision: str | None, old: Moments, new: Sequence[float], now: float, firing: bool
    ) -> str | None:
        """A previous revision's verdicts `old` and the current one's `new` on the same
        record while a changeover from `revision` lasts: to its overlap (held apart or
        left out as by `count`). Returns the revision the history was learned with when
        it is not `revision` (the verdicts are left out)."""
        change = self.changeover
        if change is None:
            return None
        if change.replaced is None or change.replaced != revision:
            return change.replaced or "an unknown revision"
        paired = Moments.of_histogram(new)
        if not firing and min(old.samples, paired.samples) > 0:
            self._overlap(change).add_pair(old, paired, now)
            change.overlap.old_seen = now
        return None

    def count_shadow(self, revision: str, own: Moments, shadow: Moments, now: float) -> None:
        """A shadowed revision's verdicts `shadow` and the series' own `own` on the same
        record (a shadow of another revision starts anew). Left out while evidence of a
        rise builds, as the changeover's pairs are: a rise that moves the two revisions'
        rates by different amounts would move the offset."""
        if self.building or min(own.samples, shadow.samples) <= 0:
            return
        if self.shadow is None or self.shadow.revision != revision:
            self.shadow = Shadow(revision)
        self.shadow.add(own, shadow, now)

    def _overlap(self, change: Changeover) -> Overlap:
        """Where verdicts of both revisions go now: the changeover's overlap, or while
        evidence builds, the overlap held apart."""
        if not self.building:
            return change.overlap
        if self.held_overlap is None:
            self.held_overlap = Overlap()
        return self.held_overlap

    # -- an evaluator revision replaced -------------------------------------------------

    def succeed(self, old: Baseline, now: float, replaced: str | None) -> bool:
        """This baseline follows `old`'s (its window already expired into it) after the
        evaluator revision `replaced` gave way at `now`: the history (its season and
        clustering are the traffic's) whose level translates into the new revision's once
        the offset is measured. False, said in the log, without a level to translate: the
        baseline is learned anew."""
        history = old.history
        before = history.period_level(now - self.terms.baseline_s, now + history.width_s)
        if before is None or before.samples < self.terms.baseline_samples:
            self._say(
                "no translation",
                logging.WARNING,
                "the evaluator revision changed with no level of the old one to translate: "
                "the new revision's baseline is learned anew",
            )
            return False
        self.history = history
        bucket = history.bucket(now)
        self.changeover = Changeover(now, bucket, before, history.counts(bucket), replaced=replaced)
        return True

    def take_shadow(self, old: Baseline, revision: str | None, replaced: str | None) -> None:
        """What `revision` measured in shadow in `old` against the revision `replaced`
        becomes this changeover's pairs (a shadow of another revision is dropped, said in
        the log)."""
        shadow, change = old.shadow, self.changeover
        if shadow is None or change is None:
            return
        if shadow.revision != revision:
            self._say(
                "shadow",
                logging.WARNING,
                "revision %s scored in shadow, but %s replaced %s: what the shadow measured is "
                "dropped and the offset is measured anew",
                shadow.revision,
                revision,
                replaced,
            )
            return
        for i, x in enumerate(shadow.paired):
            change.overlap.paired[i] += x
        design = max(1.0, change.before.error_units / max(1, change.before.samples))
        self.slope = switch_slope(shadow, self.history, design, change.since)
        self._say(
            "shadow",
            logging.INFO,
            "revision %s replaced %s after scoring %d records in shadow: the changeover "
            "starts with their offset%s",
            revision,
            replaced,
            int(shadow.paired[0]),
            "" if self.slope is None else f", {self.slope.slope:+.2f} of each hour's season",
        )

    # -- what left the window, and the expectation --------------------------------------

    def advance(
        self,
        current: SlidingWindow,
        solo: SlidingWindow,
        now: float,
        *,
        firing: bool,
        hold_from: float | None,
    ) -> Expectation | None:
        """What left the windows goes into the history (`expire`), the held overlap follows
        whether evidence builds, and the expectation moves to `now` (a changeover with it)."""
        self.expire(current, solo, now, firing=firing, hold_from=hold_from)
        self.settle_held_overlap(now, hold_from is not None, firing)
        self.interim = 0.0
        if self.changeover is not None:
            return self._changeover_expectation(now)
        expected = self._translated_expectation(now)
        # A fresh rule, before its history expects anything: its first verdicts for its
        # first hour, so that a rise then is judged against what came before it.
        first = self.first.level(now) if self.terms.reference == "trailing" else None
        fresh = expected is None or expected.samples < self.terms.baseline_samples
        if first is None or self.translated is not None or not fresh:
            return expected
        self.interim = 2.0
        return self.history.first(now, first)

    def settled(self, expected: Expectation | None) -> bool:
        """Whether `expected` holds enough to judge against: `min_samples` verdicts, or a
        fresh rule's first verdicts cut short at a rise (all there was before it)."""
        if expected is None:
            return False
        return expected.samples >= self.terms.baseline_samples or (
            self.interim == 2.0 and self.first.frozen
        )

    def expire(
        self,
        current: SlidingWindow,
        solo: SlidingWindow,
        now: float,
        *,
        firing: bool,
        hold_from: float | None,
    ) -> None:
        """Moves what left the current window (and its verdicts without a conversation,
        `solo`) into the history: as a rise while the rule fires, while evidence builds
        (since `hold_from`: held, released when it fades or after a baseline window) and
        before the last resolve."""
        history = self.history
        width = current.width
        solo_gone = {s.index: s for s in solo.expire(now)}
        for piece in current.expire(now):
            start = piece.index * width
            moments = Moments(piece.samples, piece.defects, piece.squares)
            solo_piece = solo_gone.get(piece.index)
            solo_moments = (
                Moments(solo_piece.samples, solo_piece.defects, solo_piece.squares)
                if solo_piece is not None
                else NOTHING
            )
            held = hold_from is not None and start + width > hold_from
            # Slices that began before the last resolve held verdicts of the rise.
            rise = firing or held or start < self.resolved_at
            history.add(start, moments, solo_moments, rise=rise)
            if held and not firing:
                bucket = history.bucket(start)
                before, before_solo = self.held.get(bucket, (NOTHING, NOTHING))
                self.held[bucket] = (before.plus(moments), before_solo.plus(solo_moments))
        if firing:
            self.held.clear()  # part of the rise that paged: never released
        elif hold_from is None and self.held:
            history.release(self.held)
            self.held.clear()
        elif self.held:
            # Held longer than a baseline window: joins the level.
            limit = history.bucket(now - self._hold_s)
            old = {b: v for b, v in self.held.items() if b < limit}
            if old:
                history.release(old)
                for b in old:
                    del self.held[b]

    def settle_held_overlap(
        self, now: float, building: bool, firing: bool, hold_s: float | None = None
    ) -> None:
        """Whether evidence of a rise builds, as of an advance at `now`: what was held apart
        joins the overlap once it fades or after `hold_s` (by default a baseline window and
        a window, as held verdicts join the level), and is dropped when the rule fires
        (part of the rise that paged)."""
        held, change = self.held_overlap, self.changeover
        hold_s = self._hold_s if hold_s is None else hold_s
        self.building = building and not firing
        if not self.building:
            self._held_since = now
        if held is None or (self.building and now - self._held_since < hold_s):
            return
        if change is not None and not firing:
            change.overlap.merge(held)
        self.held_overlap = None

    def settle(self, now: float, accepted_since: float | None) -> None:
        """A resolve at `now` ends the rise: a rise accepted as the new normal (since
        `accepted_since`) joins the level; what was held out stays out (it paged)."""
        if accepted_since is not None:
            self.history.accept(accepted_since)
        self.resolved_at = now
        self.held.clear()

    def _translated_expectation(self, now: float) -> Expectation | None:
        if self.slope is not None and self.slope.faded(now):
            self.slope = None
        expected = sloped(self._reference_expectation(now), self.slope, self.history, now)
        if self.translated is not None and now >= self.translated[1]:
            self.translated = None
        if expected is None or self.translated is None:
            return expected
        return replace(expected, se2=expected.se2 + self.translated[0])

    def _changeover_expectation(self, now: float) -> Expectation | None:
        """While the new revision's offset from the old one is measured: the best measured
        (the smallest variance) of the offsets measured so far (`changeover.offsets`); the
        history's older buckets move by it, as if the new revision had scored them (so the
        level, the season and the dispersion stay of one revision), and the expectation's
        error includes the offset's. Once its standard error is within half the rule's
        margin over the old level (`Terms.margin`), the offset is kept (its variance stays
        in the error while the translated buckets count). Before any offset is measured: the new revision's own
        level since the change (`changeover.interim_level`)."""
        change, history = self.changeover, self.history
        assert change is not None
        measured = offsets(change, history, self.terms, now)
        if not measured:
            expected, n = interim_level(change, history, self.terms, now)
            if expected is not None and expected.samples >= self.terms.baseline_samples:
                self.interim = 1.0
                self._say(
                    "interim",
                    logging.WARNING,
                    "no verdicts of the replaced evaluator revision translate its level: "
                    "judged against the new revision's own level since the change (%d "
                    "verdicts, with the season learned before it) until its baseline is ready",
                    n,
                )
            return expected
        variance, delta, how = min(measured)
        history.translate(change.bucket, delta - change.applied, change.counts)
        # Hours held apart while evidence builds are measured before the offset is kept.
        settled = (self.terms.margin(change.before.mean) / 2) ** 2
        if variance > settled or self.held_overlap is not None:
            self.changeover = replace(change, applied=delta)
        else:
            self.changeover = None
            self._say(
                "translated",
                logging.INFO,
                "the new evaluator revision reads %+.3f against the one before (%s): its "
                "history is translated",
                delta,
                how,
            )
        # The translated buckets count in the long level for seven baseline windows.
        self.translated = (variance, now + LONG_LEVEL_FACTOR * self.terms.baseline_s)
        return self._translated_expectation(now)

    def _reference_expectation(self, now: float) -> Expectation | None:
        """What `baseline.reference` expects now."""
        terms, history = self.terms, self.history
        if terms.reference == "trailing":
            return history.expectation(now, terms.baseline_samples)
        if terms.reference == "last_week":
            return history.last_week(now)
        start, end = terms.pinned
        if self.pinned is None or self.pinned[:2] != (start, end):
            level = history.period_level(start, end) if end <= now - terms.window_s else None
            if level is None:
                self._say(
                    "",
                    logging.WARNING,
                    "the pinned period %s is not in the history (it keeps %s, and must have "
                    "ended): the rule cannot judge until it is",
                    terms.pinned_name,
                    shown_duration(history.span * history.width_s),
                )
                return None
            self.pinned = (start, end, level)
        return history.pinned(now, self.pinned[2])

    # -- the state file -------------------------------------------------------------------

    def saved(self) -> dict[str, Any]:
        """The baseline's part of the rule's saved state (`baseline_state`)."""
        return baseline_saved(self)

    def restore(self, raw: Any) -> None:
        """Takes back `saved()`."""
        baseline_restore(self, raw)
