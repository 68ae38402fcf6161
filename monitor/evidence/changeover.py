"""An evaluator changeover of a regression baseline (`baseline.Baseline`): what the old
revision's level was, the new revision's offset from it as measured so far (the overlap's,
the consecutive periods', the pairs joined with the new revision's own hours), and the
interim level the rule judges against before any offset is measured."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from monitor.evidence.counts import Moments
from monitor.evidence.history import Expectation, History
from monitor.evidence.level import Level
from monitor.evidence.overlap import Overlap
from monitor.evidence.terms import Terms
from monitor.evidence.window import saved_number

# A level the season's offset at an hour is read against (`History.pinned` adds it).
PROBE = Level(0.5, 0.25, 1, 1.0)
# A level known exactly: what `History.pinned` adds to its error is the season's alone.
_EXACT = Level(0.5, 0.0, 10**12, 1e12)
# The consecutive periods' offset joins the overlap's while the two read within this many
# of their joint standard errors.
JOIN_Z = 2.0


@dataclass(frozen=True, slots=True)
class Changeover:
    """An evaluator revision replaced the one the history was learned with, at `since`:
    `before` is the old revision's deseasonalised level over the baseline window before it,
    `bucket` the history's bucket it fell in, `counts` that bucket's verdicts (clean,
    held) of the old revision, and `applied` the offset the older buckets were moved by
    so far; `overlap` what both revisions scored since (`Overlap`); `replaced` the old
    revision (None: not known, a state file from before it was kept); `interim` the new
    revision's verdicts since, as they came: history bucket -> (verdicts, sum, squares),
    what the rule judges against until the offset is measured (`interim_level`)."""

    since: float
    bucket: int
    before: Level
    counts: tuple[float, float]
    applied: float = 0.0
    overlap: Overlap = field(default_factory=Overlap)
    replaced: str | None = None
    interim: dict[int, list[float]] = field(default_factory=dict)


def interim_level(
    change: Changeover, history: History, terms: Terms, now: float
) -> tuple[Expectation | None, int]:
    """While no offset is measured (the old revision no longer scores, and the new one
    has too few verdicts in whole buckets): the new revision's first verdicts since the
    change (its buckets in order until they hold `baseline.min_samples`; what comes
    later is judged against them, not learned, as a window is not learned by the
    baseline it is judged against), deseasonalised by the season the history learned (the
    traffic's: the revisions are taken to differ by an offset, not to swing apart), a
    flat level with its error (counted with the old level's design effect) plus this
    hour's offset, the season's error and its wander; and the verdicts behind it. None
    while the history has no season learned yet, or before the first verdict."""
    n = raw = defects = squares = 0.0
    for bucket in sorted(change.interim):
        if n >= terms.baseline_samples:
            break  # the level is of the first verdicts only: a later rise is judged
        count, total, total_squares = change.interim[bucket]
        hour = history.pinned(bucket * history.width_s, PROBE)
        if hour is None:
            return None, 0
        n, raw, squares = n + count, raw + total, squares + total_squares
        defects += total - count * (hour.mean - PROBE.mean)
    if n <= 0:
        return None, 0
    mean = min(1.0, max(0.0, defects / n))
    before = change.before
    design = max(1.0, before.error_units / max(1, before.samples))
    variance = max(squares / n - (raw / n) ** 2, 0.0)
    return history.pinned(now, Level(mean, variance, int(n), n * design)), int(n)


def offsets(
    change: Changeover, history: History, terms: Terms, now: float
) -> list[tuple[float, float, str]]:
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
    before = change.before
    design = max(1.0, before.error_units / max(1, before.samples))
    overlap = change.overlap.offset(design)
    out = [] if overlap is None else [(overlap[1], overlap[0], overlap[2])]
    hours = _hours(change, history, terms, now, None if overlap is None else overlap[0])
    paired = change.overlap.offset(design, paired=True)
    if hours is not None and paired is not None:
        (o1, v1, how1), (v2, o2, how2) = paired, hours
        if (o1 - o2) ** 2 <= JOIN_Z**2 * (v1 + v2):
            variance = 1.0 / (1.0 / v1 + 1.0 / v2)
            joined = variance * (o1 / v1 + o2 / v2)
            out.append((variance, joined, f"{how1}, joined with {how2}"))
    if hours is not None and not (out and now - change.overlap.old_seen < terms.window_s):
        out.append(hours)
    return out


def _hours(
    change: Changeover, history: History, terms: Terms, now: float, paired: float | None
) -> tuple[float, float, str] | None:
    """The consecutive periods' offset: the new revision's deseasonalised level over the
    whole buckets since the change (once `baseline.min_samples`) less the old level
    before it. Its variance is both levels' plus an allowance for the season: its own
    error and wander, and for revisions that disagree much (an offset `paired`, or
    this one, large against the old level) what the season would read if the new
    revision scaled it rather than shifted it (`offset / old level` times the mean
    seasonal offset of those hours)."""
    before = change.before
    first = change.bucket + 1
    since = history.period_level(first * history.width_s, now + history.width_s)
    if since is None or since.samples < terms.baseline_samples:
        return None
    delta = since.mean - before.mean
    exact = history.pinned(now, _EXACT)
    season = exact.se2 if exact is not None else 0.0
    hours = range(first, history.bucket(now) + 1)
    probes = [history.pinned(b * history.width_s, PROBE) for b in hours]
    mean_offset = sum(abs(e.mean - PROBE.mean) for e in probes if e is not None)
    mean_offset /= max(1, len(probes))
    relative = abs(paired if paired is not None else delta) / max(before.mean, 0.01)
    variance = _level_se2(since, terms.steps) + _level_se2(before, terms.steps)
    variance += season + (relative * mean_offset) ** 2
    how = (
        f"{since.samples} verdicts since the change against the old level before "
        "it: a change of the service meanwhile is taken for the evaluator's"
    )
    return variance, delta, how


def _level_se2(level: Level, steps: int) -> float:
    variance = level.mean * (1 - level.mean) if steps == 1 else level.variance
    return variance * level.error_units / max(1, level.samples) ** 2


# -- the state file ---------------------------------------------------------------------


def changeover_saved(change: Changeover) -> list[Any]:
    return [
        change.since,
        change.bucket,
        *level_saved(change.before),
        *change.counts,
        change.applied,
        *change.overlap.saved(),
    ]


def changeover_restored(raw: list[Any], replaced: Any, interim: Any) -> Changeover:
    """Takes back `changeover_saved`, with the saved `replaced` revision and interim sums."""
    since, bucket, mean, variance, samples, units, clean, held_, applied, *both = raw
    if isinstance(bucket, bool) or not isinstance(bucket, int):
        raise TypeError("changeover: the bucket is not an integer")
    return Changeover(
        nonnegative(since),
        bucket,
        Level(
            nonnegative(mean),
            nonnegative(variance),
            int(nonnegative(samples)),
            nonnegative(units),
        ),
        (nonnegative(clean), nonnegative(held_)),
        saved_number(applied),
        _overlap(both),
        _text(replaced),
        _interim(interim),
    )


def _overlap(raw: list[Any]) -> Overlap:
    """An overlap's saved numbers (`Overlap.saved`)."""
    if len(raw) != 18:
        raise ValueError("changeover: the overlap holds the wrong count of numbers")
    bucket, *rest = raw
    if isinstance(bucket, bool) or not isinstance(bucket, int):
        raise TypeError("changeover: the overlap's bucket is not an integer")
    weighted, paired_sum = saved_number(rest.pop(7)), saved_number(rest.pop(14))
    n = [nonnegative(x) for x in rest]
    paired = [n[13], paired_sum, n[14]]
    return Overlap(bucket, n[0:3], n[3:6], n[6], weighted, n[7:10], n[10:12], n[12], paired)


def _interim(raw: Any) -> dict[int, list[float]]:
    """A changeover's interim sums."""
    out: dict[int, list[float]] = {}
    for bucket, *sums in raw or []:
        if isinstance(bucket, bool) or not isinstance(bucket, int) or len(sums) != 3:
            raise TypeError("changeover: an interim bucket is malformed")
        out[bucket] = [nonnegative(x) for x in sums]
    return out


def _text(raw: Any) -> str | None:
    if raw is not None and not isinstance(raw, str):
        raise TypeError("changeover: the replaced revision is not text")
    return raw


def nonnegative(raw: Any) -> float:
    return saved_number(raw, nonnegative=True)


def level_saved(level: Level) -> list[float]:
    return [level.mean, level.variance, level.samples, level.error_units]


def held_saved(held: dict[int, tuple[Moments, Moments]]) -> list[list[float]]:
    """Held verdicts by bucket: [bucket, all's (verdicts, sum, squares), solo's]."""
    return [[bucket, *_moments(all_), *_moments(solo)] for bucket, (all_, solo) in held.items()]


def held_restored(raw: Any) -> dict[int, tuple[Moments, Moments]]:
    held = {}
    for entry in raw:
        bucket, n, d, q, sn, sd, sq = entry
        held[int(bucket)] = (
            Moments(int(n), nonnegative(d), nonnegative(q)),
            Moments(int(sn), nonnegative(sd), nonnegative(sq)),
        )
    return held


def _moments(m: Moments) -> list[float]:
    return [m.samples, m.defects, m.squares]


def shown_duration(seconds: float) -> str:
    """`7d`, `36h`, `45m`, `30s`: the largest unit that divides `seconds`."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
