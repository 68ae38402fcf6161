"""The sequential test of a regression rule (`test: sequential`): a CUSUM of betting
martingales that may be looked at after every evaluation without inflating false pages.

Every evaluation hands `SequentialTest.update` the defect values seen since the previous one
(a histogram over `levels`: 0 and 1 for pass/fail verdicts, steps of 1/20 for scores) and the
baseline's mean `mu` and variance. For each alternative `mu + delta_j` (`delta_j` = 2, 4, 8
and 16 x `min_increase`) the test holds the log-wealth of a bettor who stakes
`lambda_j (x - mu)` on every value `x`, `lambda_j = delta_j / variance` (for verdicts that is
the likelihood ratio of `mu + delta_j` against `mu`), and restarts from zero whenever the
wealth falls below its start: `S_j = max(0, S_j + sum log(1 + lambda_j (x - mu)))`.

While the true mean is at most `mu`, each bet's wealth is a nonnegative supermartingale, so by
Ville's inequality the wealth of a bettor who starts at any one evaluation ever reaches `J/a`
with probability at most `a/J`; over the `J` alternatives, at most `a`. `p_value` is that
bound, `min(1, J exp(-max S_j))`, and a rule pages at `p <= 1 - confidence`: the same
false-page budget per evaluation as the fixed-window test, which may also page once per
evaluation. The smallest alternative is twice `min_increase`, so a rise below `min_increase`
makes every `S_j` drift down; each `S_j` also keeps the verdicts since its last restart (the
evidence a page reports).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from monitor.alerts.window import Moments

ALTERNATIVES = (2.0, 4.0, 8.0, 16.0)  # multiples of min_increase
# Keeps every bet's wealth positive on a defect value of 0.
_MAX_STAKE = 0.95


class SequentialTest:
    """The statistics of one (rule, service): `S_j` and the evidence since each restart."""

    __slots__ = ("evidence", "log_wealth")

    def __init__(self) -> None:
        self.log_wealth = [0.0] * len(ALTERNATIVES)
        self.evidence = [Moments()] * len(ALTERNATIVES)

    def update(
        self,
        histogram: Sequence[int],
        levels: Sequence[float],
        mu: float,
        variance: float,
        min_increase: float,
    ) -> None:
        """Adds a batch: `histogram[k]` values equal to `levels[k]`, judged against a baseline
        of mean `mu` and `variance`."""
        n = sum(histogram)
        if n == 0 or not 0 < mu < 1:
            return
        batch = Moments(
            n,
            sum(c * v for c, v in zip(histogram, levels, strict=True)),
            sum(c * v * v for c, v in zip(histogram, levels, strict=True)),
        )
        for j, multiple in enumerate(ALTERNATIVES):
            delta = multiple * min_increase
            if mu + delta >= 1:
                continue  # no mean above 1 to bet on
            stake = min(delta / max(variance, 1e-12), _MAX_STAKE / mu)
            gain = sum(
                c * math.log1p(stake * (v - mu))
                for c, v in zip(histogram, levels, strict=True)
                if c
            )
            total = self.log_wealth[j] + gain
            if total <= 0:
                self.log_wealth[j], self.evidence[j] = 0.0, Moments()
            else:
                self.log_wealth[j], self.evidence[j] = total, self.evidence[j].plus(batch)

    def p_value(self) -> float:
        """The chance, while nothing rose, that a bettor starting at some one evaluation
        would hold what the best one holds now (at most)."""
        return min(1.0, len(ALTERNATIVES) * math.exp(-max(self.log_wealth)))

    def strongest(self) -> Moments:
        """The verdicts since the restart of the alternative with the most evidence."""
        best = max(range(len(ALTERNATIVES)), key=self.log_wealth.__getitem__)
        return self.evidence[best]

    def reset(self) -> None:
        self.log_wealth = [0.0] * len(ALTERNATIVES)
        self.evidence = [Moments()] * len(ALTERNATIVES)

    def snapshot(self) -> list[list[float]]:
        return [
            [s, e.samples, e.defects, e.squares]
            for s, e in zip(self.log_wealth, self.evidence, strict=True)
        ]

    def restore(self, raw: Any) -> None:
        """Takes back `snapshot()`; raises TypeError or ValueError on anything else."""
        if not isinstance(raw, list) or len(raw) != len(ALTERNATIVES):
            raise ValueError("sequential: one entry per alternative expected")
        wealth, evidence = [], []
        for entry in raw:
            s, n, d, q = (_finite(x) for x in entry)
            if s < 0 or n < 0 or not 0 <= q <= d <= n or n != int(n):
                raise ValueError("sequential: negative wealth or counts out of order")
            wealth.append(s)
            evidence.append(Moments(int(n), d, q))
        self.log_wealth, self.evidence = wealth, evidence


def _finite(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise TypeError(f"{raw!r} is not a number")
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(f"{raw!r} is not finite")
    return value
