"""The ring of buckets a regression rule's history keeps (`history.History` reads it).

Verdicts that left the current window are kept in buckets (one hour each for a seasonal
baseline, `baseline.window / 60` otherwise) over weeks, in a ring of fixed size, so memory
does not grow with traffic or time. Each bucket holds the **clean** moments (verdicts,
sum and sum of squares of their defect values) the level is learned from; the **rise**
moments held out of it while a rise was judged (released to clean when the evidence fades,
accepted as the new normal after `baseline.accept_after`); the clean verdicts that came
without a conversation (their dispersion is measured); and the sums of the conversations
that closed in it (their correlation is measured).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from typing import Any

from monitor.evidence.counts import Moments, Unit
from monitor.evidence.level import Profile, Sums
from monitor.evidence.profile import BucketSums
from monitor.evidence.season import Season
from monitor.evidence.window import saved_number

# Fields of a bucket, in the ring's rows.
# _M3 came last: a bucket saved before it restores with 0 there.
_N, _D, _Q, _RN, _RD, _RQ, _SN, _SD, _UN, _M2, _DD, _ND, _M3 = range(13)
FIELDS = 13
_NONE = (0.0, 0.0, 0.0)


def _cubes(rows: array[float], row: int) -> float:
    """The sum of the sizes cubed of a bucket's conversations. A bucket restored from a
    state file written before it was kept holds 0 there with conversations in it: it is
    taken as if they were all of one size (`m2^2 / N`, the least it can be: rho comes out
    lower by a term of the order of one over the bucket's verdicts)."""
    m3 = rows[row + _M3]
    if m3 <= 0 and (conv_n := rows[row + _UN]) > 0:
        return rows[row + _M2] ** 2 / conv_n
    return m3


class Buckets:
    """`span` buckets of `width_s` seconds of one (rule, service), in a ring (see the
    module docstring); `season` says whether their sums are deseasonalised."""

    def __init__(self, season: Season, width_s: float, span: int) -> None:
        self.season = season
        self.width_s = width_s
        self.span = span
        self._rows = array("d", bytes(8 * FIELDS * self.span))
        self._index = array("q", [-1] * self.span)
        self.newest = -1  # the newest bucket index written
        self.origin = -1  # the first bucket index ever written: where days are counted from
        # Counts moves of held verdicts (and restores): a profile learned before is stale.
        self._structure = 0
        # Verdicts that arrived within [since, until) count as requests (`as_requests`).
        self.requests: tuple[float, float] | None = None
        # bucket -> flagged senders' clean verdicts there (verdicts, defects, those without
        # a conversation), left out of the level's sums (`history.History` keeps it).
        self.screened_clean: dict[int, tuple[float, float, float]] = {}

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
        if self._as_requests(index):
            solo = moments
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
        """A conversation that closed at `t` (units without a conversation add nothing; one
        that says the ids were none, `Unit.none_since`, makes what they gave requests)."""
        if unit.none_since is not None:
            self.as_requests(unit.none_since, t)
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
            if self._as_requests(index):
                solo = moments
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

    def as_requests(self, since: float, until: float) -> None:
        """The conversation ids of the verdicts that arrived from `since` until `until` were
        none (`Unit.none_since`): the buckets they reached hold them as verdicts without a
        conversation, as the ids' verdicts now count (their units' sums go; kappa measures
        their dispersion), and so do those still to come from the current window."""
        self.requests = (since, until)
        first, last = self.bucket(since), self.bucket(until)
        rows = self._rows
        for slot, index in enumerate(self._index):
            if index < first or index > last:
                continue
            row = slot * FIELDS
            rows[row + _SN] = rows[row + _N]
            rows[row + _SD] = rows[row + _D]
            for k in (_UN, _M2, _DD, _ND, _M3):
                rows[row + k] = 0.0
        self._structure += 1

    def _as_requests(self, index: int) -> bool:
        """Whether bucket `index` holds verdicts whose ids were found to be none."""
        return self.requests is not None and (
            self.bucket(self.requests[0]) <= index <= self.bucket(self.requests[1])
        )

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

    def _bucket_sums(self) -> list[BucketSums]:
        """The buckets held, oldest first, as `BucketSums`."""
        rows = self._rows
        return [
            BucketSums(
                index,
                *(rows[row + _N], rows[row + _D], rows[row + _Q]),
                *(rows[row + _RN], rows[row + _RD], rows[row + _RQ]),
                *(rows[row + _SN], rows[row + _SD]),
                *(rows[row + _UN], rows[row + _M2], rows[row + _DD], rows[row + _ND]),
                _cubes(rows, row),
            )
            for index, row in self._buckets()
        ]

    def _clean_rates(self, min_samples: int) -> list[tuple[int, float]]:
        """(index, clean defect rate) of the buckets holding `min_samples` clean verdicts
        or more, oldest first."""
        rows, less = self._rows, self.screened_clean
        return [
            (index, (rows[row + _D] - less.get(index, _NONE)[1]) / n)
            for index, row in self._buckets()
            if (n := rows[row + _N] - less.get(index, _NONE)[0]) >= min_samples
        ]

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
        `stop` or until `span_s` is covered, deseasonalised (`seasonal`), flagged senders'
        verdicts left out (`screened_clean`); and the time covered."""
        rows, index_of, span, less = self._rows, self._index, self.span, self.screened_clean
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
                fn, fd, fsn = less.get(index, _NONE)
                if (n := clean - fn) > 0:
                    s = profile.offset(index, self.origin)[0] if seasonal else 0.0
                    cd, q = rows[row + _D], rows[row + _Q]
                    # Their squares as the bucket's per defect (the same for pass and fail).
                    # The newest bucket's flagged share is estimated, and may name defects
                    # where its clean verdicts hold none.
                    q = max(0.0, q - fd * q / cd) if fd > 0 and cd > 0 else q
                    cd = max(0.0, cd - fd)
                    out.n += n
                    out.d += cd - n * s
                    out.q += q - 2 * s * cd + n * s * s
                    out.solo += max(0.0, rows[row + _SN] - fsn)
                    out.conv_n += rows[row + _UN]
                    out.m2 += rows[row + _M2]
            index -= 1
        return out, covered

    # -- the state file -------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        rows = self._rows
        out = []
        for index, row in self._buckets():
            values = [rows[row + k] for k in range(FIELDS)]
            if any(values):
                out.append([index, *_trimmed(values)])
        out_: dict[str, Any] = {"origin": self.origin, "buckets": out}
        if self.requests is not None:
            out_["requests"] = list(self.requests)
        return out_

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
        requests = raw.get("requests")
        if requests is not None:
            if not isinstance(requests, list) or len(requests) != 2:
                raise ValueError("history: requests is [since, until]")
            since, until = (saved_number(v) for v in requests)
            self.requests = (since, until)
        self._structure += 1


def _trimmed(values: Iterable[float]) -> list[float]:
    out = [round(v, 6) if v != int(v) else int(v) for v in values]
    while out and out[-1] == 0:
        out.pop()
    return out
