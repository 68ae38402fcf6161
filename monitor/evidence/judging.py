"""How a regression rule judges its current window against what it expects: the
sequential test with the verdicts waiting for its next batch and its bets, or the window
test's lean; the last advance (its time, the expectation since); and the last expectation
that held enough to judge against, which a page holds on while its baseline is empty. The
rule kind holds one per service and decides with it; its form in the state file is here."""

from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import Any

from monitor.evidence.counts import Batch
from monitor.evidence.history import Expectation
from monitor.evidence.sequential import Bets, SequentialTest, bets
from monitor.evidence.terms import Terms
from monitor.evidence.window import saved_number


@dataclass(slots=True)
class Judging:
    """The sequential test (`sequential`, None for the window test) with the units waiting
    for its next batch and its bets against the last expectation; or the window test, which
    follows only since when the window leans up (`leaning_since`; the sequential test
    follows it too while a fresh rule's first verdicts are its level). `advanced_at` and
    `expected`: the last advance and what the current window is compared with since (not
    saved: an advance comes before every judgment). `judged` and `judged_at`: the last
    expectation that held enough to judge against, and when (saved): a page whose baseline
    empties (a canary that took all the traffic, a reference with no verdicts) holds on it
    rather than resolving against nothing (docs/alerts.md, "A page holds")."""

    sequential: SequentialTest | None
    batch: Batch
    bets: Bets | None = None
    leaning_since: float | None = None
    advanced_at: float | None = None
    expected: Expectation | None = None
    judged: Expectation | None = None
    judged_at: float | None = None

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
        if settled and self.expected is not None:
            self.judged, self.judged_at = self.expected, now

    def bet(self, terms: Terms, settled: bool) -> None:
        """The sequential test's bets for its next batches of a rule of `terms`, against the
        last expectation (none without one, or while it is not `settled`)."""
        expected = self.expected
        if expected is None or not settled:
            self.bets = None
        else:
            self.bets = bets(expected, terms)

    def saved(self) -> dict[str, Any]:
        out: dict[str, Any] = {"leaning_since": self.leaning_since, "last": self.advanced_at}
        if self.judged is not None:
            # kappa's estimate is left out: a level restored is judged at kappa.
            out["judged"] = [self.judged_at, *astuple(self.judged)[:9]]
        if self.sequential is not None:
            out["sequential"] = self.sequential.snapshot()
        return out

    def restore(self, raw: Any) -> None:
        """Takes back `saved()`'s keys of a rule's saved state; raises TypeError or
        ValueError on anything else."""
        leaning, last = raw["leaning_since"], raw["last"]
        self.leaning_since = None if leaning is None else saved_number(leaning, nonnegative=True)
        self.advanced_at = None if last is None else saved_number(last, nonnegative=True)
        # A state file from before pages held on their last level has none.
        judged = raw.get("judged")
        if judged is not None:
            self.judged_at, self.judged = _judged_restored(judged)
        if self.sequential is not None and raw.get("sequential") is not None:
            self.sequential.restore(raw["sequential"])


def _judged_restored(raw: Any) -> tuple[float, Expectation]:
    """`[time, *Expectation's fields]` as `Judging.saved` wrote them, checked."""
    if not isinstance(raw, list) or len(raw) != 10:
        raise TypeError("judged is not [time, mean, variance, se2, samples, kappa, rho, ...]")
    at, variance, se2, samples, kappa, rho, design, rho_bound, excess = (
        saved_number(x, nonnegative=True) for x in (raw[0], *raw[2:])
    )
    mean = saved_number(raw[1])
    if samples != int(samples):
        raise ValueError("judged: a fractional count of verdicts")
    expected = Expectation(mean, variance, se2, int(samples), kappa, rho, design, rho_bound, excess)
    return at, expected
