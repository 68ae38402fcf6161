"""The sequential test of a regression rule: a page budget in time, for any traffic.

**What it tests.** A rule's verdicts (defect values `x` in [0, 1]: 0 or 1 for pass/fail,
steps of 1/20 for scores) are compared with its baseline, of mean `mu0` over `n0` verdicts
(standard error `se`). The null hypothesis is "the mean rose by at most half of
`min_increase`". The alternatives are rises to `a_j = mu0 + min_increase x 2^j` (j = 0, 1,
... below 1), and each is judged against a **null point** of its own,
`q_j = mu0 + min_increase / 2 + M_j`, where the margin `M_j` covers the baseline's own error.

**The margin.** A baseline that reads `d` below the truth puts a stream that rose by exactly
half of `min_increase` `d` above the null point, where the bettor of alternative j (stake
`b_j = a_j - q_j`) no longer loses on average: its false pages grow about as
`(J T)^(2 d / b_j)` (`J` alternatives, budget `T`). Averaged over the baseline's normal
error that factor is `exp(2 (L se / b_j)^2 - 2 L M_j / b_j)`, `L = ln(J T)`, which
`M_j b_j = se^2 L` holds at 1. That overstates the growth (a stream far above a null point
pages once per crossing, not at the power law's rate), and half of it (`MARGIN_SCALE`)
keeps a rise of exactly half of `min_increase` within the budget at every rate in
`bench/alert_regression.py`. The margin is large for small alternatives on thin baselines
(a baseline of 500 verdicts is not one of 50,000) and vanishes for large ones and busy
services; an alternative that no margin fits (`(a_j - mu0 - min_increase / 2)^2` below
`4 MARGIN_SCALE se^2 L`) is left out: a baseline that thin cannot tell so small a rise from
its own error.

**How.** For each alternative a bettor stakes `lambda_j (x - q_j)` on every value
(`lambda_j = (a_j - q_j) / v`, `v = q_j (1 - q_j)` for verdicts, where the bet is the
likelihood ratio of `a_j` against `q_j`, and the baseline's variance for scores). Verdicts are taken in
small batches; a batch that covered `w` seconds of the service's time starts a new bettor
with stake `w` (at most `MAX_WEIGHT_S`, so a long silence does not count in full) and every
running bettor's wealth is multiplied by the batch's likelihood ratio. The statistic is the
sum of all bettors' wealth over starts and alternatives (the alternatives weighted
equally): a Shiryaev-Roberts procedure, `R_j <- (R_j + w) L_j`, `R = mean_j R_j`. The rule
pages when `R` reaches the budget `T` (`false_page_every`, in seconds).

**Why that is a budget in time.** While the mean is at most the lowest null point, every
likelihood ratio has expectation at most 1 whatever came before, so `R` minus the time elapsed is a
supermartingale and the expected time until `R` first reaches `T` is at least `T` (optional
stopping): on a stream that has not risen by half of `min_increase`, false pages come at
most once per `false_page_every` on average, per rule and service, whatever the traffic
(stakes are time, not verdicts), the evaluation interval (the test runs on the verdicts,
not on the looks) or the number of services. The assumptions: verdicts are independent
given the rate, sampling does not depend on the verdict being sampled (the boosts of
`monitor.boosts` depend only on past evidence), and the baseline's error is normal, as
the margin assumes (`bench/alert_regression.py` measures the rate of false pages with
baselines estimated as the engine estimates them).

**Evidence building.** Beside `R` each alternative keeps a CUSUM of its log-likelihood
ratio, `C_j <- max(0, C_j + log L_j)`, and the time its run began. `p_value()`, the chance
of a run this strong starting at one given time while nothing rose (Ville's inequality,
over the alternatives), tells how far the evidence has built before a page (boosted
sampling, the `p_value` annotation); `building_since()` is when a run whose p-value is
below `HOLD_P` began, and the verdicts since then are kept out of the baseline until the
evidence fades (`monitor.alerts.window.Windows`).

`bench/_alert_sim.py` runs the same arithmetic over numpy arrays for many simulated
services at once (and checks that it agrees with this module); the sidecar's main process
does it in plain Python, a few alternatives per batch, without loading numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.alerts.window import Moments

# Alternatives: rises of min_increase x ALTERNATIVE_STEP^j over the baseline's mean.
ALTERNATIVE_STEP = 2.0
MAX_ALTERNATIVES = 8
# Each null point's margin for the baseline's error, as a share of the margin that holds the
# exponential bound at 1 (the module docstring).
MARGIN_SCALE = 0.5
# A batch's stake counts at most this much of the time since the previous batch.
MAX_WEIGHT_S = 60.0
# A run's verdicts are held out of the baseline while its p-value is below this.
HOLD_P = 0.05
# Stakes keep every bettor's wealth positive on a defect value of 0.
_MAX_STAKE = 0.95
_MIN_VARIANCE = 1e-4


@dataclass(frozen=True, slots=True)
class Bets:
    """What the next batches are judged against, fixed from the baseline at an evaluation:
    per alternative its grid index `j` (its slot in `SequentialTest`), its null point and
    its log-gain on each level."""

    slots: tuple[int, ...]
    nulls: tuple[float, ...]
    alternatives: tuple[float, ...]
    # gains[i][k]: log of the wealth factor of alternative i on one value at level k.
    gains: tuple[tuple[float, ...], ...]

    @property
    def null(self) -> float:
        """The lowest null point: every bettor loses on average on a mean at most this."""
        return min(self.nulls)

    def log_ratios(self, histogram: Sequence[float]) -> list[float]:
        """Per alternative, the batch's log-likelihood ratio (`histogram[k]` values at level
        `k / (levels - 1)`)."""
        return [sum(g * c for g, c in zip(row, histogram, strict=True) if c) for row in self.gains]


def bets(base: Moments, min_increase: float, steps: int, budget_s: float) -> Bets | None:
    """The bets against a baseline `base` of values on `steps + 1` levels (`steps == 1`:
    pass/fail verdicts) for a budget of `budget_s`; None when the baseline is empty or no
    alternative fits between its null point and 1."""
    if base.samples <= 0:
        return None
    mu0 = base.mean
    variance = mu0 * (1 - mu0) if steps == 1 else base.variance
    edge = mu0 + min_increase / 2
    grid = [
        a
        for a in (mu0 + min_increase * ALTERNATIVE_STEP**j for j in range(MAX_ALTERNATIVES))
        if a < 1
    ]
    # M_j (B_j - M_j) = MARGIN_SCALE se^2 ln(J T), B_j = a_j - edge: the smaller root.
    product = MARGIN_SCALE * max(variance, 0.0) / base.samples * math.log(budget_s * len(grid))
    levels = [k / steps for k in range(steps + 1)]
    slots, nulls, alternatives, gains = [], [], [], []
    for j, a in enumerate(grid):
        above = a - edge
        room = above * above - 4 * product
        if above <= 0 or room < 0:
            continue
        null = edge + 2 * product / (above + math.sqrt(room))
        if not 0 < null < a:
            continue
        v = null * (1 - null) if steps == 1 else max(variance, _MIN_VARIANCE)
        stake = min((a - null) / v, _MAX_STAKE / null)
        slots.append(j)
        nulls.append(null)
        alternatives.append(a)
        gains.append(tuple(math.log1p(stake * (x - null)) for x in levels))
    if not slots:
        return None
    return Bets(tuple(slots), tuple(nulls), tuple(alternatives), tuple(gains))


def log_add(a: float, b: float) -> float:
    """log(e^a + e^b), without overflow; -inf is the log of 0."""
    if a < b:
        a, b = b, a
    if a == -math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


class SequentialTest:
    """The statistic of one (rule, service): the log-wealth `log R_j` of each alternative,
    its CUSUM `C_j`, when that run began and the verdicts it holds, and the time of the
    last batch."""

    __slots__ = ("evidence", "last", "log_wealth", "runs", "since")

    def __init__(self) -> None:
        self.log_wealth = [-math.inf] * MAX_ALTERNATIVES
        self.runs = [0.0] * MAX_ALTERNATIVES
        self.since = [0.0] * MAX_ALTERNATIVES
        # The verdicts of each run: samples, sum and sum of squares of their values.
        self.evidence = [Moments()] * MAX_ALTERNATIVES
        self.last: float | None = None

    def update(self, bets: Bets, histogram: Sequence[float], now: float) -> None:
        """Adds a batch that arrived by `now`, judged by `bets`: every running bettor's
        wealth times the batch's likelihood ratio, a new bettor staking the seconds the
        batch covered (the time since the previous one, at most `MAX_WEIGHT_S`)."""
        weight = 0.0 if self.last is None else min(max(now - self.last, 0.0), MAX_WEIGHT_S)
        log_weight = math.log(weight) if weight > 0 else -math.inf
        self.last = now
        steps = max(1, len(histogram) - 1)
        batch = Moments(
            int(sum(histogram)),
            sum(c * k / steps for k, c in enumerate(histogram)),
            sum(c * (k / steps) ** 2 for k, c in enumerate(histogram)),
        )
        ratios = dict(zip(bets.slots, bets.log_ratios(histogram), strict=True))
        for j in range(MAX_ALTERNATIVES):
            ratio = ratios.get(j)
            if ratio is None:
                # Alternatives that no longer fit (the baseline rose, or it is too thin for
                # them) stop betting.
                self.log_wealth[j], self.runs[j], self.evidence[j] = -math.inf, 0.0, Moments()
                continue
            self.log_wealth[j] = log_add(self.log_wealth[j], log_weight) + ratio
            run = self.runs[j] + ratio
            if run <= 0:
                self.runs[j], self.since[j], self.evidence[j] = 0.0, now, Moments()
            else:
                self.runs[j], self.evidence[j] = run, self.evidence[j].plus(batch)

    def log_statistic(self) -> float:
        """`log R`: the log of the mean wealth over the live alternatives."""
        live = [w for w in self.log_wealth if w > -math.inf]
        if not live:
            return -math.inf
        total = -math.inf
        for w in live:
            total = log_add(total, w)
        return total - math.log(len(live))

    def crossed(self, budget_s: float) -> bool:
        """Whether `R` reached `budget_s`: a page."""
        return self.log_statistic() >= math.log(budget_s)

    def progress(self, budget_s: float) -> float:
        """How far `R` is towards a page, on a log scale: 1 pages, 0 is one second."""
        return max(0.0, self.log_statistic()) / math.log(budget_s)

    def p_value(self) -> float:
        """The chance, while nothing rose, of a run as strong as the strongest starting at
        one given time (at most)."""
        live = max(1, sum(w > -math.inf for w in self.log_wealth))
        return min(1.0, live * math.exp(-max(self.runs)))

    def strongest(self) -> Moments:
        """The verdicts of the strongest run (what a page reports as its evidence)."""
        return self.evidence[max(range(MAX_ALTERNATIVES), key=self.runs.__getitem__)]

    def building_since(self) -> float | None:
        """When the earliest run whose p-value is below `HOLD_P` began (None: none)."""
        live = max(1, sum(w > -math.inf for w in self.log_wealth))
        floor = math.log(live / HOLD_P)
        starts = [t for t, c in zip(self.since, self.runs, strict=True) if c > floor]
        return min(starts) if starts else None

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def snapshot(self) -> dict[str, Any]:
        return {
            "log_wealth": [w if w > -math.inf else None for w in self.log_wealth],
            "runs": list(self.runs),
            "since": list(self.since),
            "evidence": [[e.samples, e.defects, e.squares] for e in self.evidence],
            "last": self.last,
        }

    def restore(self, raw: Any) -> None:
        """Takes back `snapshot()`; raises TypeError or ValueError on anything else."""
        if not isinstance(raw, dict):
            raise ValueError("sequential: an object expected")
        wealth = [-math.inf if w is None else _finite(w) for w in _list(raw["log_wealth"])]
        runs = [_finite(c) for c in _list(raw["runs"])]
        since = [_finite(s) for s in _list(raw["since"])]
        evidence = [[_finite(x) for x in row] for row in _list(raw["evidence"])]
        if any(c < 0 for c in runs):
            raise ValueError("sequential: a negative run")
        if any(len(row) != 3 or not 0 <= row[2] <= row[1] <= row[0] for row in evidence):
            raise ValueError("sequential: evidence out of order")
        last = raw["last"]
        self.log_wealth, self.runs, self.since = wealth, runs, since
        self.evidence = [Moments(int(n), d, q) for n, d, q in evidence]
        self.last = None if last is None else _finite(last)


def _list(raw: Any) -> list[Any]:
    if not isinstance(raw, list) or len(raw) != MAX_ALTERNATIVES:
        raise ValueError(f"sequential: {MAX_ALTERNATIVES} numbers expected")
    return raw


def _finite(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise TypeError(f"{raw!r} is not a number")
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(f"{raw!r} is not finite")
    return value
