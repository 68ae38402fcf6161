"""A regression rule's memory of one service, and what it expects of the service now.

Verdicts that left the current window are kept in buckets (`buckets.Buckets`: clean
verdicts, those held out while a rise was judged, and the sums of closed conversations).

`expectation(t)` is what the rule compares the service with at time `t`:

- **level**: the deseasonalised mean of the clean verdicts over the trailing
  `baseline.window` (a bucket mostly held out does not count towards that time, so a long
  rise keeps the level from before it), and over seven times that window; the higher of the
  two is the level, so a good spell is not a new normal overnight;
- **season** (`season.py`, learned from the history's verdicts, `profile.py`): what this
  hour of the day and day of the week usually add; before the history holds one complete
  day, a seasonal rule compares with the highest of the level and the highest hour seen
  plus the steepest rise between two hours seen (`_unseasoned`);
- **error**: the level's and the season's standard error, with verdicts of one
  conversation counted with their design effect (`rho`) and verdicts without one with
  their measured dispersion (`kappa`; both `dispersion.py`), plus the variance of a wander
  about the season that lasts hours (`Profile.wander`).

The verdicts of a sender that stands apart from the others (`senders.py`) are left out of
what all of these are learned from: the level's sums (so its error counts the screened
verdicts only), the season's hours, kappa's and the excess's inputs, so that one sender's
forged hours neither blind the rule nor teach it a good level; those of the buckets still
screened as the screen flags them, those of older buckets as they leave the screen
(`sent`). The rate judged still holds their verdicts: the expectation mixes the screened
one with flagged senders' own clean rate at their share of the verdicts sent now
(`flagged.py`).

`last_week(t)` and `pinned(t, level)` are the references a user may name instead
(`baseline.reference`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

from monitor.evidence.buckets import Buckets
from monitor.evidence.counts import Moments
from monitor.evidence.flagged import FlaggedRates, Sent, flagged_rates, mixed
from monitor.evidence.level import Level, Profile, Sums
from monitor.evidence.profile import BucketSums, measure_profile
from monitor.evidence.season import Season
from monitor.evidence.senders import Flagged, Senders
from monitor.evidence.stats import rise_p_value
from monitor.evidence.window import saved_number

HOUR_S = 3600.0
# History kept: four weeks for seasonal baselines; otherwise the long level's span.
SEASONAL_HISTORY_DAYS = 28
LONG_LEVEL_FACTOR = 7
# Buckets per baseline window for a baseline that is not seasonal.
PLAIN_BUCKETS = 60
# Before a seasonal baseline's first complete day, the hours it judges from hold this many
# clean verdicts or more.
EARLY_HOUR_SAMPLES = 100


def history_span_s(baseline_s: float, season: Season) -> float:
    """How far back a history reaches: seven baseline windows (the long level), and four
    weeks for a seasonal one."""
    if season == "none":
        return baseline_s * LONG_LEVEL_FACTOR
    return max(baseline_s * LONG_LEVEL_FACTOR, SEASONAL_HISTORY_DAYS * 86_400.0)


@dataclass(frozen=True, slots=True)
class Expectation:
    """What the service is expected to show at one time: the mean defect value, its
    variance per verdict, the squared standard error of that mean (the baseline's own
    error), the verdicts behind the level, how verdicts without a conversation disperse
    (`kappa`, at least 1), and the correlation within a conversation (`rho`; `rho_bound`,
    its upper bound, is what the sequential test predicts a conversation's verdicts with)."""

    mean: float
    variance: float
    se2: float
    samples: int
    kappa: float
    rho: float
    # How much more the level's verdicts vary than independent ones (their conversations'
    # design effect and the dispersion of the others): what a window of them is taken to.
    design: float = 1.0
    rho_bound: float = 0.0
    # Clustering nobody declared (`Profile.excess`): what a conversation's or a repeated
    # request's evidence is tempered by (verdicts of their own are, by `kappa`).
    excess: float = 1.0
    # kappa's estimate alone (at most kappa; `Profile.kappa_estimate`): the least the
    # sequential test's bettors temper by (`sequential.bets`). None: kappa itself.
    kappa_estimate: float | None = None

    def reference(self) -> Moments:
        """The level as counts: its verdicts at the expected mean."""
        return Moments(self.samples, self.mean * self.samples, 0.0)

    def rise_p(self, current: Moments, margin: float) -> float:
        """The p-value of "`current`'s mean is at most `margin` above the expected", its
        verdicts taken to vary as the level's do (the window test)."""
        variance = self.variance * self.design / max(1, current.samples)
        return rise_p_value(current.mean - self.mean, variance + self.se2, margin)


class History(Buckets):
    """The buckets of one (rule, service) (see the module docstring), and what they show;
    `season` says which cycle the baseline learns."""

    def __init__(
        self, baseline_s: float, season: Season, steps: int, budget_s: float, window_s: float = 600
    ) -> None:
        width_s = baseline_s / PLAIN_BUCKETS if season == "none" else HOUR_S
        super().__init__(
            season, width_s, math.ceil(history_span_s(baseline_s, season) / width_s) + 1
        )
        # ln(J T) of the rule's test: how much an error of kappa's estimate would cost.
        self._log_budget = math.log(8 * max(budget_s, 1.0))
        self.baseline_s = baseline_s
        self.steps = steps
        self._cache: tuple[int, int] | None = None
        self._season_cache: Profile | None = None
        # Per level (recent, long): the older buckets' sums over its span, and over its
        # span less one bucket (the newest bucket covers the rest).
        self._older: list[tuple[Sums, Sums]] = []
        self._senders = Senders()
        # bucket -> what flagged senders sent there, as the history holds it (verdicts, their
        # defects, those without a conversation, their defects): buckets past the screen.
        self._screened: dict[int, tuple[float, float, float, float]] = {}
        # Flagged senders' share of the verdicts sent now, and their rates: those of the
        # buckets before the newest (as of the newest's start), and with the newest's.
        self._sent = Sent(window_s)
        self._flagged_older = FlaggedRates()
        self._flagged = FlaggedRates()

    @property
    def senders(self) -> Senders:
        """The sender screen: who it flagged, and whether it can screen (`Senders.blind`)."""
        return self._senders

    def sent(self, t: float, sender: str | None, moments: Moments, *, solo: bool) -> None:
        """Verdicts of `sender` that arrived at `t` (`solo`: without a conversation), for
        the screen; a bucket leaving it keeps what its flagged senders sent."""
        if moments.samples <= 0:
            return
        self._sent.add(t, moments.samples, self._senders.flags(sender))
        retired = self._senders.add(
            self.bucket(t), sender, moments.samples, moments.defects, moments.squares, solo
        )
        if retired is None or retired[1][0] <= 0:
            return
        index, flagged = retired
        if index <= self.newest - self.span:
            return
        share = self._share(index, flagged)
        if share > 0:
            n, d, sn, sd, _ = flagged
            self._screened[index] = (n * share, d * share, sn * share, sd * share)
        for old in [i for i in self._screened if i <= self.newest - self.span]:
            del self._screened[old]

    def _share(self, index: int, flagged: Flagged) -> float:
        """How much of what the screen saw of bucket `index` the history holds (the
        newest buckets' verdicts are still in the current window)."""
        clean, held = self.counts(index)
        return min(1.0, (clean + held) / flagged[4]) if flagged[4] > 0 else 0.0

    def _screen_newest(self) -> None:
        """The newest bucket's flagged senders' clean verdicts as the screen holds them
        now (the older buckets' are as of the bucket's start, `_compute_profile`), and
        their rates with them: a flagged sender's clean hour counts as seen while the
        window still moves its verdicts into the history (a page that held the hour's
        first verdicts out leaves it clean verdicts only there)."""
        flagged = self._senders.flagged_at(self.newest)
        self._flagged = self._flagged_older
        if flagged is None or flagged[0] <= 0:
            self.screened_clean.pop(self.newest, None)
            return
        clean, held = self.counts(self.newest)
        part = self._share(self.newest, flagged) * clean / (clean + held) if clean > 0 else 0.0
        n, d, sn, _, _ = flagged
        screened = self.screened_clean[self.newest] = (min(clean, n * part), d * part, sn * part)
        self._flagged = self._flagged_older.plus(self.newest, screened[0], screened[1])

    def complete_days(self) -> int:
        return len(self._profile().days)

    def learning(self) -> bool:
        """A seasonal baseline that has not yet seen one complete day."""
        return self.season != "none" and self.complete_days() == 0

    def expectation(self, t: float, min_samples: int) -> Expectation | None:
        """What the service is expected to show at `t` (None: no clean verdicts yet, or a
        seasonal baseline still learning its day). The long level stands in for the recent
        one when higher and holding `min_samples`."""
        profile = self._profile()
        recent = self._level(0, profile)
        if recent is None:
            return None
        if self.season != "none" and not profile.days:
            return self._unseasoned(t, recent, profile)
        level = recent
        long = self._level(1, profile)
        if long is not None and long.samples >= min_samples and long.mean > recent.mean:
            level = long
        return self._expected(t, level, profile)

    def _expected(
        self, t: float, level: Level, profile: Profile, *, seasonal: bool = True, mix: bool = True
    ) -> Expectation:
        """`level` plus the season's offset at `t` (`seasonal`), with its error; mixed
        with flagged senders' rate at their share of the verdicts sent now (`mix`,
        `flagged.py`)."""
        index = self.bucket(t)
        offset, offset_var = profile.offset(index, self.origin) if seasonal else (0, 0)
        mean = min(1.0, max(0.0, level.mean + offset))
        variance = self._variance(mean, level.variance)
        units = level.error_units * profile.excess
        se2 = variance * (units / (level.samples * level.samples)) + offset_var + profile.wander
        if mix:
            mean, se2 = mixed(mean, se2, self._sent.share(t), self._flagged_rate(index))
            variance = self._variance(mean, level.variance)
        design = max(1.0, units / level.samples)
        return Expectation(
            mean,
            variance,
            se2,
            level.samples,
            profile.kappa,
            profile.rho,
            design,
            profile.rho_bound,
            profile.excess,
            profile.kappa_estimate,
        )

    def _flagged_rate(self, index: int) -> tuple[float, float] | None:
        """(rate, its variance) expected of flagged senders in bucket `index`: their clean
        rate at that hour of the day; an hour never seen clean, what they sent in the
        bucket so far (`flagged.py`); None: no clean verdict of theirs is held at all (a
        sender flagged from its first verdicts is expected at the screened level, as a new
        pod of a broken version must page), or nothing of theirs in the bucket."""
        known = self._flagged.rate(index)
        if known is not None or not self._flagged.seen:
            return known
        sent = self._senders.flagged_at(index)
        if sent is None or sent[0] <= 0:
            return None
        rate = min(1.0, max(0.0, sent[1] / sent[0]))
        return rate, rate * (1.0 - rate) / sent[0]

    def window_offset(self, t: float) -> float:
        """How much more the verdicts of the window ending at `t` are expected to hold
        than the expectation at `t` says (`flagged.py`): flagged senders' verdicts of each
        slice at the rate of the hour they were sent in, not at `t`'s hour's."""
        share = self._sent.share(t)
        now = self._flagged_rate(self.bucket(t))
        if share <= 0 or now is None:
            return 0.0
        total = expected = 0.0
        for when, flagged in self._sent.sent_at(t):
            rate = self._flagged_rate(self.bucket(when))
            if rate is not None:
                total += flagged
                expected += flagged * rate[0]
        return share * (expected / total - now[0]) if total > 0 else 0.0

    def _unseasoned(self, t: float, recent: Level, profile: Profile) -> Expectation | None:
        """Before the first complete day, what the hours seen so far allow: the highest of
        the recent level and the highest hourly rate seen plus the steepest rise from one
        hour to the next seen, so that a daily cycle whose hours rise by less than that
        is no page (None: fewer than two hours of `EARLY_HOUR_SAMPLES` verdicts yet)."""
        hours = self._clean_rates(EARLY_HOUR_SAMPLES)
        if len(hours) < 2:
            return None
        steepest = max(
            (b - a for (i, a), (j, b) in pairwise(hours) if j == i + 1),
            default=0.0,
        )
        highest = max(rate for _, rate in hours) + max(0.0, steepest)
        level = Level(
            max(recent.mean, highest), recent.variance, recent.samples, recent.error_units
        )
        return self._expected(t, level, profile, seasonal=False)

    def first(self, t: float, level: Level) -> Expectation:
        """A fresh rule's first verdicts (`FirstLevel`) as a flat level, without the season:
        what a rise in its first hours is judged against, never learned into. Its verdicts'
        design effect is what the test tempers those without a conversation by, where the
        history has not measured more: a kappa the history has not measured yet (the prior
        standing in) is no measurement of this stream, the first level's is."""
        profile = self._profile()
        expected = self._expected(t, level, profile, seasonal=False, mix=False)
        design = level.error_units / level.samples
        kappa = max(expected.kappa, design) if profile.kappa_measured else design
        # The first level's design effect holds its own error: no bettor tempers by less.
        return replace(expected, kappa=kappa, kappa_estimate=kappa)

    def last_week(self, t: float) -> Expectation | None:
        """What the same hours showed one week before `t`: the clean verdicts of the
        bucket a week back and its two neighbours (None: none there)."""
        profile = self._profile()
        centre = self.bucket(t - 7 * 86_400.0)
        sums = self._sums(centre + 1, centre - 2, 3 * self.width_s, profile, seasonal=False)[0]
        if sums.n <= 0:
            return None
        return self._expected(t, sums.level(profile, self.steps), profile, seasonal=False)

    def period_level(self, start: float, end: float) -> Level | None:
        """The deseasonalised clean level of the buckets within [start, end) (None: none
        of them is in the history, or it holds no clean verdict there)."""
        profile = self._profile()
        first, last = self.bucket(start), self.bucket(end) - 1
        if last < first or last <= self.newest - self.span:
            return None
        span_s = (last - first + 1) * self.width_s
        sums = self._sums(min(last, self.newest), first - 1, span_s, profile)[0]
        return sums.level(profile, self.steps) if sums.n > 0 else None

    def pinned(self, t: float, level: Level) -> Expectation | None:
        """A pinned period's `level` plus the season's offset at `t`."""
        profile = self._profile()
        if self.season != "none" and not profile.days:
            return None
        return self._expected(t, level, profile)

    def _variance(self, mean: float, score_variance: float) -> float:
        if self.steps == 1:
            return mean * (1.0 - mean)
        return score_variance

    def _level(self, which: int, profile: Profile) -> Level | None:
        """The deseasonalised clean mean of the newest `baseline.window` (`which` 0) or
        seven of them (1) of the history; buckets mostly held out do not count towards that
        time. The buckets before the newest are summed once per bucket (`_profile`); the
        newest, still filling, is added here."""
        older_full, older_rest = self._older[which]
        self._screen_newest()
        newest = self._sums(self.newest, self.newest - 1, self.width_s, profile)[0]
        if newest.held:
            total = older_full
        else:
            total = older_rest.plus(newest)
        return total.level(profile, self.steps) if total.n > 0 else None

    def _profile(self) -> Profile:
        """The season, rho, kappa and the older buckets' level sums, recomputed when a
        bucket starts or held verdicts move: verdicts added to the newest bucket reach the
        season, rho and kappa a bucket late."""
        key = (self.newest, self._structure)
        if self._season_cache is None or self._cache != key:
            profile = self._season_cache = self._compute_profile()
            self._cache = key
            older = []
            for span_s in (self.baseline_s, self.baseline_s * LONG_LEVEL_FACTOR):
                full = self._sums(self.newest - 1, -1, span_s, profile)[0]
                rest = self._sums(self.newest - 1, -1, span_s - self.width_s, profile)[0]
                older.append((full, rest))
            self._older = older
        return self._season_cache

    def _compute_profile(self) -> Profile:
        self._senders.screen()
        screened = dict(self._screened)
        for index, flagged in self._senders.flagged_sums():
            share = self._share(index, flagged)
            if share > 0 and flagged[0] > 0:
                n, d, sn, sd, _ = flagged
                screened[index] = (n * share, d * share, sn * share, sd * share)
        buckets = [
            _less(b, screened[b.index]) if b.index in screened else b for b in self._bucket_sums()
        ]
        self.screened_clean = {
            b.index: (b.screened_n, b.screened_d, b.screened_sn)
            for b in buckets
            if b.screened_n > 0
        }
        by_hour = self.season != "none"
        parts = [(i, n, d) for i, (n, d, _) in self.screened_clean.items()]
        self._flagged_older = flagged_rates([p for p in parts if p[0] != self.newest], by_hour)
        self._flagged = flagged_rates(parts, by_hour)
        return measure_profile(
            buckets, self.season, self.steps, self.origin, self.newest, self._log_budget
        )

    # -- the state file -------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        out = super().snapshot()
        out["senders"] = self._senders.snapshot()
        out["sent"] = self._sent.saved()
        out["screened"] = [
            [index, *(round(v, 6) for v in sums)] for index, sums in sorted(self._screened.items())
        ]
        return out

    def restore(self, raw: Any) -> None:
        """Takes back `snapshot()`; a history saved before senders were screened has
        none, nor a share they sent."""
        super().restore(raw)
        if raw.get("senders") is not None:
            self._senders.restore(raw["senders"])
        if raw.get("sent") is not None:
            self._sent.restore(raw["sent"])
        screened = raw.get("screened") or []
        if not isinstance(screened, list):
            raise TypeError("history: screened is not a list")
        for entry in screened:
            if not isinstance(entry, list) or len(entry) != 5:
                raise ValueError("history: a screened bucket is [index, 4 numbers]")
            index = entry[0]
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError("history: a screened bucket's index is not an integer")
            n, d, sn, sd = (saved_number(v, nonnegative=True) for v in entry[1:])
            self._screened[index] = (n, d, sn, sd)
        self._structure += 1


def _less(bucket: BucketSums, flagged: tuple[float, float, float, float]) -> BucketSums:
    """`bucket` with what flagged senders sent there (`flagged`: verdicts, their defects,
    those without a conversation, their defects) apart, in the shares of the bucket held
    clean and held out: out of kappa's, the excess's and the season's inputs."""
    all_n = bucket.n + bucket.rn
    clean = bucket.n / all_n if all_n > 0 else 0.0
    n, d, sn, sd = flagged
    return replace(
        bucket,
        solo_n=max(0.0, bucket.solo_n - sn * clean),
        solo_d=max(0.0, bucket.solo_d - sd * clean),
        screened_n=min(bucket.n, n * clean),
        screened_d=min(bucket.d, d * clean),
        screened_sn=min(bucket.solo_n, sn * clean),
        screened_rn=min(bucket.rn, n * (1 - clean)),
        screened_rd=min(bucket.rd, d * (1 - clean)),
    )
