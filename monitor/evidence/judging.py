"""How a regression rule judges its current window against what it expects: the
sequential test with the verdicts waiting for its next batch and its bets, or the window
test's lean; the last advance (its time, the expectation since); and the last expectation
that held enough to judge against, which a page holds on while its baseline is empty. The
rule kind holds one per service and decides with it; its form in the state file is here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monitor.evidence.counts import Batch, Moments
from monitor.evidence.history import Expectation
from monitor.evidence.sequential import Bets, SequentialTest, bets
from monitor.evidence.terms import Terms
from monitor.evidence.window import saved_number


@dataclass(frozen=True, slots=True)
class Judged:
    """The last expectation that held enough to judge against, as a page holding on it
    reads it: its mean and its verdicts (`Expectation.reference`), and when it was judged
    against."""

    mean: float
    samples: int
    at: float

    def reference(self) -> Moments:
        """The level as counts: its verdicts at its mean."""
        return Moments(self.samples, self.mean * self.samples, 0.0)


@dataclass(slots=True)
class Judging:
    """The sequential test (`sequential`, None for the window test) with the units waiting
    for its next batch and its bets against the last expectation; or the window test, which
    follows only since when the window leans up (`leaning_since`). `advanced_at` and
    `expected`: the last advance and what the current window is compared with since (not
    saved: an advance comes before every judgment). `judged`: the last expectation that
    held enough to judge against, as a page holding on it reads it, and when (saved): a
    page whose baseline empties (a canary that took all the traffic, a reference with no
    verdicts) holds on it rather than resolving against nothing (docs/alerts.md, "A page
    holds")."""

    sequential: SequentialTest | None
    batch: Batch
    bets: Bets | None = None
    leaning_since: float | None = None
    advanced_at: float | None = None
    expected: Expectation | None = None
    judged: Judged | None = None

    @staticmethod
    def empty(sequential: bool, steps: int) -> Judging:
        """Judging with the sequential test (or the window test) on `steps + 1` levels."""
        return Judging(SequentialTest() if sequential else None, Batch([0.0] * (steps + 1)))

    def building_since(self) -> float | None:
        """Since when evidence of a rise builds (None: it does not)."""
        if self.sequential is not None:
            return self.sequential.building_since()
        return self.leaning_since

    def follow(self, settled: bool, now: float) -> None:
        """The last advance's expectation at `now` becomes the level last judged against
        when it holds enough (`settled`); otherwise the one before stays."""
        expected = self.expected
        if settled and expected is not None:
            self.judged = Judged(expected.mean, expected.samples, now)

    def bet(self, terms: Terms, settled: bool) -> None:
        """The sequential test's bets for its next batches of a rule of `terms`, against the
        last expectation (none without one, or while it is not `settled`)."""
        expected = self.expected
        if expected is None or not settled:
            self.bets = None
        else:
            self.bets = bets(expected, terms)

    def saved(self) -> dict[str, Any]:
        """Its part of the rule's saved state: what a restart reads. The last advance is
        left out (an advance comes before every judgment), and so is a lean or a level
        judged against that there is none of (the sequential test has no lean)."""
        out: dict[str, Any] = {}
        if self.leaning_since is not None:
            out["leaning_since"] = self.leaning_since
        if self.judged is not None:
            out["judged"] = [self.judged.at, self.judged.mean, self.judged.samples]
        if self.sequential is not None:
            out["sequential"] = self.sequential.snapshot()
        return out

    def restore(self, raw: Any) -> None:
        """Takes back `saved()`'s keys of a rule's saved state (the last advance, which
        files that kept it hold, is not read); raises TypeError or ValueError on anything
        else."""
        leaning = raw.get("leaning_since")
        self.leaning_since = None if leaning is None else saved_number(leaning, nonnegative=True)
        # A state file from before pages held on their last level has none.
        judged = raw.get("judged")
        if judged is not None:
            self.judged = _judged_restored(judged)
        if self.sequential is not None and raw.get("sequential") is not None:
            self.sequential.restore(raw["sequential"])


# `judged` as files that kept the whole expectation hold it: [time, mean, variance, se2,
# samples, kappa, rho, design, rho_bound, excess].
_WHOLE_EXPECTATION = 10


def _judged_restored(raw: Any) -> Judged:
    """`[time, mean, verdicts]` as `Judging.saved` writes it (or the whole expectation, as
    files before it hold it, of which the same three are read), checked."""
    if not isinstance(raw, list) or len(raw) not in (3, _WHOLE_EXPECTATION):
        raise TypeError("judged is not [time, mean, verdicts]")
    at, mean = saved_number(raw[0], nonnegative=True), saved_number(raw[1])
    samples = saved_number(raw[4] if len(raw) == _WHOLE_EXPECTATION else raw[2], nonnegative=True)
    if samples != int(samples):
        raise ValueError("judged: a fractional count of verdicts")
    return Judged(mean, int(samples), at)
