"""Both revisions' verdicts while a regression rule's evaluator changes (a rollout, a
`previous` revision scoring a share again): the offset between them, measured on the same
hours and on paired records (`monitor.evidence.baseline.Baseline` keeps one per
changeover)."""

from __future__ import annotations

from dataclasses import dataclass, field

from monitor.evidence.counts import Moments, add_paired

# Verdicts of each revision the overlap needs before its offset is taken (a normal
# approximation of each side's mean).
OVERLAP_MIN = 100


@dataclass(slots=True)
class Overlap:
    """Both revisions' verdicts in the same history buckets since a change (a rollout, or
    the old revision still scoring): within a bucket the two score comparable records (one
    traffic, split at random), so the difference of their means is the new revision's
    offset, whatever the service did meanwhile (as far as it moved both alike). `old`,
    `new`: the open bucket's (verdicts, sum, squares) per side; `weight`, `weighted`: over
    the closed buckets, the sum of each bucket's weight `1 / (1/n_old + 1/n_new)` and of
    the weighted differences; `pooled`: (verdicts, sum, squares) of both sides over all
    buckets, the variance per verdict; `counts`: each side's verdicts; `old_seen`: when
    the old revision's last came. `paired`: (verdicts, sum, squares) of the differences
    new - old on the same records, where both revisions scored them (a results line's `previous`,
    replayed by `backtest`): the two verdicts on a record mostly agree, so their
    difference varies far less than two independent verdicts."""

    bucket: int = -1
    old: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    new: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    weight: float = 0.0
    weighted: float = 0.0
    pooled: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    counts: list[float] = field(default_factory=lambda: [0.0, 0.0])
    old_seen: float = 0.0
    paired: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])

    def add_pair(self, old: Moments, new: Moments, now: float) -> None:
        """Both revisions' verdicts on the same record (as many of each)."""
        if add_paired(self.paired, old, new):
            self.old_seen = now

    def add(self, bucket: int, moments: Moments, now: float, *, old: bool) -> None:
        if bucket > self.bucket:
            self.weight, self.weighted = self._closed()
            self.bucket = bucket
            self.old, self.new = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
        elif bucket < self.bucket:
            return  # a late verdict of a bucket already weighed
        side = self.old if old else self.new
        for i, x in enumerate((moments.samples, moments.defects, moments.squares)):
            side[i] += x
            self.pooled[i] += x
        self.counts[0 if old else 1] += moments.samples
        if old:
            self.old_seen = now

    def merge(self, held: Overlap) -> None:
        """Adds what `held` gathered (hours kept apart while evidence of a rise built) as
        hours of their own: its buckets' differences, its verdicts and its pairs."""
        weight, weighted = held._closed()
        self.weight, self.weighted = self.weight + weight, self.weighted + weighted
        for mine, theirs in ((self.pooled, held.pooled), (self.paired, held.paired)):
            for i, x in enumerate(theirs):
                mine[i] += x
        for i, x in enumerate(held.counts):
            self.counts[i] += x

    def _closed(self) -> tuple[float, float]:
        """`weight` and `weighted` with the open bucket's difference in."""
        (no, so, _), (nn, sn, _) = self.old, self.new
        if no <= 0 or nn <= 0:
            return self.weight, self.weighted
        w = 1.0 / (1.0 / no + 1.0 / nn)
        return self.weight + w, self.weighted + w * (sn / nn - so / no)

    def offset(self, design: float, *, paired: bool = False) -> tuple[float, float, str] | None:
        """The new revision's offset from the old, its variance (`design`: how much more
        the verdicts vary than independent ones) and how it was measured: the better
        measured of the paired differences' (once `OVERLAP_MIN` records) and the same
        hours' (once `OVERLAP_MIN` verdicts of each side; not with `paired`); None before
        either."""
        measured = []
        n, total, squares = self.paired
        if n >= OVERLAP_MIN:
            mean = total / n
            # At least one disagreement's worth: none among a few hundred records does not
            # make the offset exact.
            variance = max(squares / n - mean * mean, 1.0 / n)
            how = f"{n:.0f} records scored by both revisions"
            measured.append((variance * design / n, mean, how))
        weight, weighted = self._closed()
        if not paired and min(self.counts) >= OVERLAP_MIN and weight > 0:
            n, total, squares = self.pooled
            mean = total / n
            variance = max(squares / n - mean * mean, 1e-6)
            n_old, n_new = self.counts
            how = f"{n_old:.0f} and {n_new:.0f} verdicts of both in the same hours"
            measured.append((variance * design / weight, weighted / weight, how))
        if not measured:
            return None
        variance, offset, how = min(measured)
        return offset, variance, how

    def saved(self) -> list[float]:
        return [
            self.bucket,
            *self.old,
            *self.new,
            self.weight,
            self.weighted,
            *self.pooled,
            *self.counts,
            self.old_seen,
            *self.paired,
        ]
