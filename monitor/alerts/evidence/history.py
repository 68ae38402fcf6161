"""A regression rule's memory of one service, and what it expects of the service now.

Verdicts that left the current window are kept in buckets (one hour each for a seasonal
baseline, `baseline.window / 60` otherwise) over weeks, in a ring of fixed size, so memory
does not grow with traffic or time. Each bucket holds the **clean** moments (verdicts,
sum and sum of squares of their defect values) the level is learned from; the **rise**
moments held out of it while a rise was judged (released to clean when the evidence fades,
accepted as the new normal after `baseline.accept_after`); the clean verdicts that came
without a conversation (their dispersion is measured); and the sums of the conversations
that closed in it (their correlation is measured).

`expectation(t)` is what the rule compares the service with at time `t`:

- **level**: the deseasonalised mean of the clean verdicts over the trailing
  `baseline.window` (a bucket mostly held out does not count towards that time, so a long
  rise keeps the level from before it), and over seven times that window; the higher of the
  two is the level, so a good spell is not a new normal overnight;
- **season** (`monitor.alerts.evidence.season`, learned from all verdicts of the history): what this
  hour of the day and day of the week usually add; before the history holds one complete
  day, a seasonal rule compares with the highest of the level and the highest hour seen
  plus the steepest rise between two hours seen (`_unseasoned`);
- **error**: the level's and the season's standard error, with verdicts of one
  conversation counted with their design effect (`rho`) and verdicts without one with
  their measured dispersion (`kappa`; both `monitor.alerts.evidence.dispersion`).

`last_week(t)` and `pinned(t, level)` are the references a user may name instead
(`baseline.reference`).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from monitor.alerts.evidence.dispersion import conversation_rho, solo_dispersion
from monitor.alerts.evidence.level import Level, Profile, Sums
from monitor.alerts.evidence.season import Season, learn
from monitor.alerts.evidence.units import Unit
from monitor.alerts.evidence.window import Moments, saved_number

HOUR_S = 3600.0
# History kept: four weeks for seasonal baselines; otherwise the long level's span.
SEASONAL_HISTORY_DAYS = 28
LONG_LEVEL_FACTOR = 7
# Buckets per baseline window for a baseline that is not seasonal.
PLAIN_BUCKETS = 60
# Before a seasonal baseline's first complete day, the hours it judges from hold this many
# clean verdicts or more.
EARLY_HOUR_SAMPLES = 100

# Fields of a bucket, in the ring's rows.
# _M3 came last: a bucket saved before it restores with 0 there.
_N, _D, _Q, _RN, _RD, _RQ, _SN, _SD, _UN, _M2, _DD, _ND, _M3 = range(13)
FIELDS = 13


def _cubes(rows: array[float], row: int) -> float:
    """The sum of the sizes cubed of a bucket's conversations. A bucket restored from a
    state file written before it was kept holds 0 there with conversations in it: it is
    taken as if they were all of one size (`m2^2 / N`, the least it can be: rho comes out
    lower by a term of the order of one over the bucket's verdicts)."""
    m3 = rows[row + _M3]
    if m3 <= 0 and (conv_n := rows[row + _UN]) > 0:
        return rows[row + _M2] ** 2 / conv_n
    return m3


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


class History:
    """Buckets of one (rule, service) over `span` buckets of `width_s` seconds (see the
    module docstring). `season` says which cycle the baseline learns."""

    def __init__(self, baseline_s: float, season: Season, steps: int, budget_s: float) -> None:
        self.season = season
        # ln(J T) of the rule's test: how much an error of kappa's estimate would cost.
        self._log_budget = math.log(8 * max(budget_s, 1.0))
        self.baseline_s = baseline_s
        self.steps = steps
        self.width_s = baseline_s / PLAIN_BUCKETS if season == "none" else HOUR_S
        self.span = math.ceil(history_span_s(baseline_s, season) / self.width_s) + 1
        self._rows = array("d", bytes(8 * FIELDS * self.span))
        self._index = array("q", [-1] * self.span)
        self.newest = -1  # the newest bucket index written
        self.origin = -1  # the first bucket index ever written: where days are counted from
        self._cache: tuple[int, int] | None = None
        self._season_cache: Profile | None = None
        # Per level (recent, long): the older buckets' sums over its span, and over its
        # span less one bucket (the newest bucket covers the rest).
        self._older: list[tuple[Sums, Sums]] = []
        # Counts moves of held verdicts (and restores): the cached profile is stale.
        self._structure = 0

    # -- writing --------------------------------------------------------------------------

    def _row(self, index: int) -> int:
        """The ring offset of bucket `index`, emptied if it held an older bucket."""
        slot = index % self.span
        if self._index[slot] != index:
            base = slot * FIELDS
            for k in range(FIELDS):
                self._rows[base + k] = 0.0
            self._index[slot] = index
        if index > self.newest:
            self.newest = index
        if self.origin < 0 or index < self.origin:
            self.origin = index
        return slot * FIELDS

    def bucket(self, t: float) -> int:
        return math.floor(t / self.width_s)

    def add(self, t: float, moments: Moments, solo: Moments, *, rise: bool) -> None:
        """Verdicts that left the current window at time `t` (`solo`: those of them without
        a conversation); held out of the level when `rise`."""
        if moments.samples <= 0:
            return
        index = self.bucket(t)
        if index <= self.newest - self.span:
            return  # older than the whole history
        row = self._row(index)
        rows = self._rows
        if rise:
            rows[row + _RN] += moments.samples
            rows[row + _RD] += moments.defects
            rows[row + _RQ] += moments.squares
        else:
            rows[row + _N] += moments.samples
            rows[row + _D] += moments.defects
            rows[row + _Q] += moments.squares
            rows[row + _SN] += solo.samples
            rows[row + _SD] += solo.defects

    def add_unit(self, t: float, unit: Unit) -> None:
        """A conversation that closed at `t` (units without a conversation add nothing)."""
        if not unit.conversation or unit.samples <= 0:
            return
        index = self.bucket(t)
        if index <= self.newest - self.span:
            return
        row = self._row(index)
        rows = self._rows
        n = unit.samples
        rows[row + _UN] += n
        rows[row + _M2] += n * n
        rows[row + _M3] += n * n * n
        rows[row + _DD] += unit.defects * unit.defects
        rows[row + _ND] += n * unit.defects

    def release(self, held: dict[int, tuple[Moments, Moments]]) -> None:
        """Held-out verdicts whose evidence faded join the level: `held[bucket]` is what
        was added there as a rise (all of it, and the solo part)."""
        rows = self._rows
        for index, (moments, solo) in held.items():
            slot = index % self.span
            if self._index[slot] != index:
                continue  # that bucket has left the history
            row = slot * FIELDS
            rows[row + _RN] = max(0.0, rows[row + _RN] - moments.samples)
            rows[row + _RD] = max(0.0, rows[row + _RD] - moments.defects)
            rows[row + _RQ] = max(0.0, rows[row + _RQ] - moments.squares)
            rows[row + _N] += moments.samples
            rows[row + _D] += moments.defects
            rows[row + _Q] += moments.squares
            rows[row + _SN] += solo.samples
            rows[row + _SD] += solo.defects
        self._structure += 1

    def counts(self, index: int) -> tuple[float, float]:
        """(clean, held) verdicts of bucket `index` (0 when it is not held)."""
        slot = index % self.span
        if self._index[slot] != index:
            return 0.0, 0.0
        row = slot * FIELDS
        return self._rows[row + _N], self._rows[row + _RN]

    def translate(self, last: int, delta: float, last_counts: tuple[float, float]) -> None:
        """An evaluator revision reads `delta` higher than the one before it: the buckets up
        to `last` (of which `last` only its first `last_counts`, clean and held) are moved
        by `delta` as if the new revision had scored them (season offsets, measured within
        days, are unchanged)."""
        rows = self._rows
        for slot, index in enumerate(self._index):
            if index < 0 or index > last:
                continue
            row = slot * FIELDS
            clean, held = last_counts if index == last else (rows[row + _N], rows[row + _RN])
            solo = rows[row + _SN] * (clean / rows[row + _N] if rows[row + _N] > 0 else 0.0)
            for n, total, d, q in ((clean, _N, _D, _Q), (held, _RN, _RD, _RQ)):
                all_n = rows[row + total]
                mean = rows[row + d] / all_n if all_n > 0 else 0.0
                rows[row + q] = max(0.0, rows[row + q] + 2 * delta * mean * n + n * delta**2)
                rows[row + d] = min(all_n, max(0.0, rows[row + d] + n * delta))
            rows[row + _SD] = max(0.0, rows[row + _SD] + solo * delta)
        self._structure += 1

    def accept(self, since: float) -> None:
        """Every verdict held out since `since` joins the level: a rise that lasted is the
        new normal."""
        rows = self._rows
        first = self.bucket(since)
        for slot, index in enumerate(self._index):
            if index < first:
                continue
            row = slot * FIELDS
            for src, dst in ((_RN, _N), (_RD, _D), (_RQ, _Q)):
                rows[row + dst] += rows[row + src]
                rows[row + src] = 0.0
        self._structure += 1

    # -- reading --------------------------------------------------------------------------

    def _buckets(self) -> list[tuple[int, int]]:
        """(index, ring offset) of the buckets held, oldest first."""
        low = self.newest - self.span
        return sorted(
            (index, slot * FIELDS) for slot, index in enumerate(self._index) if index > low
        )

    def clean_samples(self) -> int:
        return int(sum(self._rows[row + _N] for _, row in self._buckets()))

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
        self, t: float, level: Level, profile: Profile, *, seasonal: bool = True
    ) -> Expectation:
        """`level` plus the season's offset at `t` (`seasonal`), with its error."""
        offset, offset_var = profile.offset(self.bucket(t), self.origin) if seasonal else (0, 0)
        mean = min(1.0, max(0.0, level.mean + offset))
        variance = self._variance(mean, level.variance)
        units = level.error_units * profile.excess
        se2 = variance * (units / (level.samples * level.samples)) + offset_var
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
        )

    def _unseasoned(self, t: float, recent: Level, profile: Profile) -> Expectation | None:
        """Before the first complete day, what the hours seen so far allow: the highest of
        the recent level and the highest hourly rate seen plus the steepest rise from one
        hour to the next seen, so that a daily cycle whose hours rise by less than that
        is no page (None: fewer than two hours of `EARLY_HOUR_SAMPLES` verdicts yet)."""
        rows = self._rows
        hours = [
            (index, rows[row + _D] / n)
            for index, row in self._buckets()
            if (n := rows[row + _N]) >= EARLY_HOUR_SAMPLES
        ]
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

    def offset_at(self, t: float) -> float:
        """The season's offset at `t` (0 without a season)."""
        return self._profile().offset(self.bucket(t), self.origin)[0]

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
        newest = self._sums(self.newest, self.newest - 1, self.width_s, profile)[0]
        if newest.held:
            total = older_full
        else:
            total = older_rest.plus(newest)
        return total.level(profile, self.steps) if total.n > 0 else None

    def _sums(
        self,
        first: int,
        stop: int,
        span_s: float,
        profile: Profile,
        *,
        seasonal: bool = True,
    ) -> tuple[Sums, float]:
        """The clean sums of buckets `first`, `first - 1`, ... down to (not including)
        `stop` or until `span_s` is covered, deseasonalised (`seasonal`); and the time
        covered."""
        rows, index_of, span = self._rows, self._index, self.span
        out = Sums()
        covered = 0.0
        index = first
        low = max(stop, self.newest - span)
        seasonal = seasonal and self.season != "none" and bool(profile.days)
        while index > low and covered < span_s:
            slot = index % span
            if index_of[slot] != index:
                covered += self.width_s
                index -= 1
                continue
            row = slot * FIELDS
            clean, rise = rows[row + _N], rows[row + _RN]
            if rise > clean:
                out.held = True  # held out: the baseline's clock stands still
            else:
                covered += self.width_s
                if clean > 0:
                    s = profile.offset(index, self.origin)[0] if seasonal else 0.0
                    cd = rows[row + _D]
                    out.n += clean
                    out.d += cd - clean * s
                    out.q += rows[row + _Q] - 2 * s * cd + clean * s * s
                    out.solo += rows[row + _SN]
                    out.conv_n += rows[row + _UN]
                    out.m2 += rows[row + _M2]
            index -= 1
        return out, covered

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
        buckets = self._buckets()
        rows = self._rows
        all_n = sum(rows[r + _N] + rows[r + _RN] for _, r in buckets)
        all_d = sum(rows[r + _D] + rows[r + _RD] for _, r in buckets)
        all_q = sum(rows[r + _Q] + rows[r + _RQ] for _, r in buckets)
        pooled_mean = all_d / all_n if all_n else 0.0
        pooled_var = (
            pooled_mean * (1 - pooled_mean)
            if self.steps == 1
            else max(1e-4, all_q / all_n - pooled_mean**2 if all_n else 0.0)
        )
        rho, rho_bound = conversation_rho(
            (
                rows[r + _UN],
                rows[r + _M2],
                _cubes(rows, r),
                rows[r + _DD],
                rows[r + _ND],
                n,
                x := (rows[r + _D] + rows[r + _RD]) / n,
                x * (1 - x)
                if self.steps == 1
                else max(1e-4, (rows[r + _Q] + rows[r + _RQ]) / n - x * x),
            )
            for _, r in buckets
            if rows[r + _UN] > 0 and (n := rows[r + _N] + rows[r + _RN]) > 0
        )
        solo = {
            index: (sn, rows[r + _SD] / sn) for index, r in buckets if (sn := rows[r + _SN]) > 0
        }
        kappa = solo_dispersion(solo, pooled_var, self._log_budget)
        # How much more the history's verdicts vary than independent ones: what the
        # season's offsets are as uncertain as.
        solo_n = sum(n for n, _ in solo.values())
        conv_n = sum(rows[r + _UN] for _, r in buckets)
        sizes = sum(rows[r + _M2] for _, r in buckets)
        conv_design = 1 + rho * (sizes / conv_n - 1) if conv_n > 0 else 1.0
        counted = solo_n + conv_n
        design = (kappa * solo_n + conv_design * conv_n) / counted if counted > 0 else 1.0
        # Clustering nobody declared: the dispersion of all clean verdicts' rates over
        # what their conversations and the others' dispersion explain. Its estimate alone:
        # `design` already holds kappa's allowance for error, and a young history's
        # allowance would otherwise count twice against conversations.
        clean = {
            index: (n, rows[r + _D] / n)
            for index, r in buckets
            if (n := rows[r + _N]) > 0 and rows[r + _RN] <= n
        }
        dispersion = solo_dispersion(clean, pooled_var, self._log_budget, raised=False)
        excess = max(1.0, dispersion / design)
        design *= excess
        hours = [
            (index, n, (rows[r + _D] + rows[r + _RD]) / n)
            for index, r in buckets
            if (n := rows[r + _N] + rows[r + _RN]) > 0
        ]
        season = learn(self.season, hours, self.origin, self.newest, pooled_var * design)
        return Profile(season, kappa, rho, rho_bound, excess)

    # -- the state file -------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        rows = self._rows
        out = []
        for index, row in self._buckets():
            values = [rows[row + k] for k in range(FIELDS)]
            if any(values):
                out.append([index, *_trimmed(values)])
        return {"origin": self.origin, "buckets": out}

    def restore(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            raise TypeError("history: an object expected")
        origin = raw["origin"]
        if isinstance(origin, bool) or not isinstance(origin, int):
            raise TypeError("history: origin is not an integer")
        entries = raw["buckets"]
        if not isinstance(entries, list):
            raise TypeError("history: buckets is not a list")
        previous = None
        for entry in entries:
            if not isinstance(entry, list) or not 2 <= len(entry) <= FIELDS + 1:
                raise ValueError("history: a bucket is [index, up to 13 numbers]")
            index = entry[0]
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError("history: a bucket index is not an integer")
            if previous is not None and index <= previous:
                raise ValueError("history: buckets out of order")
            previous = index
            values = [saved_number(v) for v in entry[1:]]
            if any(v < 0 for v in values):
                raise ValueError("history: a negative count")
            row = self._row(index)
            for k, value in enumerate(values):
                self._rows[row + k] = value
        self.origin = origin if entries else self.origin
        self._structure += 1


def _trimmed(values: Iterable[float]) -> list[float]:
    out = [round(v, 6) if v != int(v) else int(v) for v in values]
    while out and out[-1] == 0:
        out.pop()
    return out
