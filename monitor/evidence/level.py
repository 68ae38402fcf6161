"""What a regression rule's history learns and sums (`monitor.evidence.history`): the sums of
clean verdicts over some buckets, the profile learned as of the newest bucket (season,
dispersion, correlation), and the level those give."""

from __future__ import annotations

from dataclasses import dataclass

from monitor.evidence.season import SeasonProfile


@dataclass(slots=True)
class Sums:
    """Clean sums over some buckets, deseasonalised: verdicts, defects, squares, verdicts
    without a conversation, verdicts of closed conversations and their sizes squared;
    `held`: a held-out bucket was skipped."""

    n: float = 0.0
    d: float = 0.0
    q: float = 0.0
    solo: float = 0.0
    conv_n: float = 0.0
    m2: float = 0.0
    held: bool = False

    def plus(self, other: Sums) -> Sums:
        return Sums(
            self.n + other.n,
            self.d + other.d,
            self.q + other.q,
            self.solo + other.solo,
            self.conv_n + other.conv_n,
            self.m2 + other.m2,
        )

    def level(self, profile: Profile, steps: int) -> Level:
        n = self.n
        mean = self.d / n
        score_variance = max(0.0, self.q / n - mean * mean)
        # The level's sum varies as this many independent verdicts would: verdicts without
        # a conversation at their dispersion, the others at their conversations' design
        # effect.
        solo = min(self.solo, n)
        design = conversation_design(profile.rho, self.conv_n, self.m2)
        error_units = profile.kappa * solo + design * (n - solo)
        return Level(mean, score_variance, int(n), error_units)


@dataclass(frozen=True, slots=True)
class Profile:
    """What a history learned as of its newest bucket: the season, the dispersion of
    verdicts without a conversation, the correlation within one."""

    season: SeasonProfile
    kappa: float
    rho: float
    # rho's upper bound: what the sequential test predicts a conversation's verdicts with.
    rho_bound: float
    # How much more the hourly rates of all verdicts vary than their conversations and
    # dispersion explain (at least 1): clustering nobody declared (topics, users, routes).
    excess: float = 1.0
    # The variance of a wander about the season that lasts hours, beyond the excess
    # (`dispersion.wander_error`): what the service's rate in an hour is off its
    # expectation by, however many verdicts show it.
    wander: float = 0.0
    # kappa's estimate alone, before its allowance for its own error: what the bettors
    # whose null point's guard band covers that allowance temper by (`sequential.bets`).
    kappa_estimate: float = 1.0
    # Whether kappa was measured (`dispersion.kappa_measured`), not the prior standing in.
    kappa_measured: bool = True

    @property
    def days(self) -> tuple[int, ...]:
        return self.season.days

    def offset(self, index: int, origin: int) -> tuple[float, float]:
        return self.season.offset(index, origin)


@dataclass(frozen=True, slots=True)
class Level:
    """A mean level of clean verdicts (deseasonalised), the variance of the values about
    it, the verdicts behind it, and the variance of their sum in units of one independent
    verdict's."""

    mean: float
    variance: float
    samples: int
    error_units: float


def conversation_design(rho: float, conv_n: float, m2: float) -> float:
    """The design effect of `conv_n` verdicts of conversations of sizes squared `m2`."""
    return 1 + rho * (m2 / conv_n - 1) if conv_n > 0 else 1.0
