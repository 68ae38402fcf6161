"""The sequential test of a regression rule: a page budget in time.

**What it tests.** A rule's verdicts (defect values `x` in [0, 1]: 0 or 1 for pass/fail,
steps of 1/20 for scores) are compared with what the service is expected to show now
(`history.Expectation`: its level and season, mean `mu0`, the baseline's own standard error
`se`). The null hypothesis is "the mean rose by at most the rule's margin `m`"
(`Terms.margin`, half of its rise `r`, `Terms.rise`: `min_increase`). The alternatives are
rises to `a_j = mu0 + r x 2^j` (j = 0 .. 7, below 1: the grid, `J` of them), each judged
against a **null point** of its own, `q_j = mu0 + m + M_j`, where the margin `M_j` covers
the baseline's error:
`M_j (a_j - q_j) = c se^2 ln(J T)` (budget `T` in seconds). At `c = 1`, averaged over a
normal error of the baseline, the margin keeps the factor by which a baseline reading low
inflates a bettor's wealth at most 1 (the inflation is `exp(2 (L se / b)^2 - 2 L M / b)`,
`L = ln(J T)`, `b = a_j - q_j`). That average overstates the harm (a bettor far above its
null point pages once, not at the exponential's rate), and `c = MARGIN_SCALE = 0.5` is a
measured choice (`bench/alert_production.py`), not a derived one. An alternative no
margin fits is left out: the baseline cannot tell so small a rise from its own error.

**The evidence** is each arrival of verdicts: one verdict that came without a
conversation, or the verdicts of one conversation that arrived together
(`counts.Arrival`). For each alternative a bettor stakes on an arrival's
mean `m` the factor `1 + lambda (m - p_j)` against its **predicted mean** `p_j`, with
`lambda = (pa_j - p_j) / W`, `pa_j` the prediction under the alternative and `W` the
variance of `m` given what is predicted; at most `0.95 / p_j`, so that wealth stays
positive. For a verdict without a conversation `p_j = q_j`, `pa_j = a_j`, `W = V`, the
variance of one verdict at the null point (`q_j (1 - q_j)` for verdicts, the measured
variance for scores): the likelihood ratio of `a_j` against `q_j`; their factor's log is
divided by the measured dispersion `kappa` (tempering), less the part of kappa's allowance
for its own error that the bettor's guard band (`min_increase / 2` between the expected
mean and its null point) covers: `kappa / (1 + min_increase / (a_j - q_j))`, never below
kappa's estimate alone (`_tempering`). The `n` verdicts of a conversation
that already showed `N` verdicts with mean `x` are predicted as conversations with a
correlation `rho` between their verdicts predict them (the credibility, or linear Bayes,
predictor): `p_j = q_j + w (x - q_j)`, `w = N rho / (1 + (N - 1) rho)`, so
`pa_j - p_j = (1 - w) (a_j - q_j)`, and `W = V (rho (1 - w) + (1 - rho) / n)`; for a
conversation's first verdicts that is `V (1 + (n - 1) rho) / n`. A conversation counts as
its verdicts come, never waiting for it to end, and its later verdicts count for less the
more it already showed.

**How.** Units are taken in small batches; a batch that covered `w` seconds of the
service's time starts a new bettor with stake `w` (at most `MAX_WEIGHT_S`, so a long
silence does not count in full), and every running bettor's wealth is multiplied by the
batch's factor: a Shiryaev-Roberts procedure, `R_j <- (R_j + w) F_j`. The statistic is `R =
(1 / J) sum_j R_j`, `J` the grid's size (the alternatives below 1, fitted or not: an
alternative whose margin stops fitting adds nothing but still divides). The rule pages
when `R` reaches the budget `T`.

**What is guaranteed, and under which assumptions.** Let every unit's expected mean be at
most the lowest null point given everything before it. Then each factor has expectation at
most 1, `R` minus the time elapsed is a supermartingale, and the expected time until `R`
first reaches `T` is at least `T` (optional stopping): false pages come at most once per
`false_page_every` on average, per rule and service, whatever the rate of verdicts (stakes
are time, not verdicts) or the evaluation interval. That premise holds when

1. conversations are independent of each other, and the verdicts of one are exchangeable
   with a correlation of at most the `rho` the test uses (`dispersion.py` takes an upper
   bound of the measured one). The expected mean of a conversation's next verdicts given
   its earlier ones is then `p_j` where the conversation's rate has a beta distribution
   (exactly) and, for any other distribution, to second order in the stakes: a pair of
   factors has expectation `1 + lambda lambda' (Cov - w V)` at most 1 when the correlation is
   at most `rho`. Overstating `rho` only costs evidence. Each arrival must be judged
   against all of its conversation's earlier verdicts: `conversations.py` remembers a closed
   conversation for `REMEMBER_S` (among the `MAX_REMEMBERED` closed last), and one that
   returns later is judged as new, outside the guarantee;
2. the expectation is right up to a normal error of the stated `se` (the margin), which
   needs the season and level to describe the service (`history.py`);
3. sampling depends only on the trace id and on past evidence (boosts), never on the
   verdict being sampled.

Verdicts without a conversation are tempered by `kappa`, an upper confidence bound of
their dispersion: exact for independent verdicts (`kappa` >= 1 only shrinks a likelihood
ratio, by Jensen's inequality), and for dependent ones valid as far as a normal
approximation of their sums over the evidence is (dependence longer than a history bucket
is not measured). Those parts are approximate; `bench/alert_production.py` measures them
on streams whose conversations' rates are beta distributed and on streams where they are
not.

**Evidence building.** Beside `R` each alternative keeps a CUSUM of its log-factors,
`C_j <- max(0, C_j + log F_j)`, and the time its run began. `p_value()`, the chance of a
run this strong starting at one given time while nothing rose (Ville's inequality over the
`J` alternatives), tells how far the evidence has built before a page (boosted sampling,
the `p_value` annotation); `building_since()` is when a run whose p-value is below `HOLD_P`
began, and verdicts since then are held out of the level until the evidence fades.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.evidence.counts import Arrival, Moments
from monitor.evidence.history import Expectation
from monitor.evidence.terms import Terms
from monitor.evidence.window import saved_number

# Alternatives: rises of the rule's rise x ALTERNATIVE_STEP^j over the expected mean.
ALTERNATIVE_STEP = 2.0
MAX_ALTERNATIVES = 8
# Each null point's margin for the expectation's error, as a share of the margin that
# holds the inflation bound at 1 (the module docstring): measured, not derived.
MARGIN_SCALE = 0.5
# A batch's stake counts at most this much of the time since the previous batch.
MAX_WEIGHT_S = 60.0
# A run's verdicts are held out of the level while its p-value is below this.
HOLD_P = 0.05
# Stakes keep every bettor's wealth positive on a defect value of 0.
_MAX_STAKE = 0.95
_MIN_VARIANCE = 1e-4


@dataclass(frozen=True, slots=True)
class Bets:
    """What the next batches are judged against, fixed from the expectation at an
    evaluation: per alternative its grid index `j` (its slot in `SequentialTest`), its null
    point, the variance of one verdict there and its stake on one verdict; the log-gains of
    a verdict without a conversation at each level (tempered by `kappa`), and the `rho`
    conversations are predicted with (an upper bound)."""

    slots: tuple[int, ...]
    nulls: tuple[float, ...]
    alternatives: tuple[float, ...]
    variances: tuple[float, ...]
    # solo_gains[i][k]: the log of alternative i's factor on one verdict at level k,
    # divided by kappa.
    solo_gains: tuple[tuple[float, ...], ...]
    rho: float
    kappa: float
    # The alternatives of the grid (below 1), fitted or not: what the statistic averages
    # over. It changes only when the expected mean crosses a grid point, never when an
    # alternative's margin stops fitting.
    grid: int
    # What a conversation's or a repeated request's log-factor is divided by: clustering
    # nobody declared (`Expectation.excess`).
    excess: float = 1.0

    @property
    def null(self) -> float:
        """The lowest null point: every bettor loses on average on a mean at most this."""
        return min(self.nulls)

    def log_ratios(
        self, histogram: Sequence[float], arrivals: Iterable[Arrival] = ()
    ) -> list[float]:
        """Per alternative, the batch's log-factor: `histogram[k]` verdicts without a
        conversation at level `k / (levels - 1)`, and the conversations' `arrivals`."""
        out = [
            sum(g * c for g, c in zip(row, histogram, strict=True) if c) for row in self.solo_gains
        ]
        for arrival in arrivals:
            n, earlier = arrival.samples, arrival.earlier
            if n <= 0:
                continue
            rho = self.rho if arrival.rho is None else arrival.rho
            mean = arrival.defects / n
            w = earlier * rho / (1 + (earlier - 1) * rho) if earlier else 0.0
            shown = arrival.earlier_defects / earlier if earlier else 0.0
            spread = rho * (1 - w) + (1 - rho) / n
            for i, (q, a, v) in enumerate(
                zip(self.nulls, self.alternatives, self.variances, strict=True)
            ):
                predicted = q + w * (shown - q)
                stake = (1 - w) * (a - q) / (v * spread) if spread > 0 else 0.0
                if predicted > 0:
                    stake = min(stake, _MAX_STAKE / predicted)
                out[i] += math.log1p(stake * (mean - predicted)) / self.excess
        return out


def bets(expected: Expectation, terms: Terms) -> Bets | None:
    """The bets against `expected` of a rule of `terms` (its values on `steps + 1` levels,
    `steps == 1`: pass/fail verdicts; its rise and its budget); None when no alternative
    fits between its null point and 1."""
    mu0, steps, budget_s = expected.mean, terms.steps, terms.budget_s
    edge = mu0 + terms.margin(mu0)
    rise = terms.rise(mu0)
    grid = [a for a in (mu0 + rise * ALTERNATIVE_STEP**j for j in range(MAX_ALTERNATIVES)) if a < 1]
    # M_j (B_j - M_j) = MARGIN_SCALE se^2 ln(J T), B_j = a_j - edge: the smaller root.
    product = MARGIN_SCALE * max(expected.se2, 0.0) * math.log(budget_s * max(1, len(grid)))
    levels = [k / steps for k in range(steps + 1)]
    slots, nulls, alternatives, variances, gains = [], [], [], [], []
    for j, a in enumerate(grid):
        above = a - edge
        room = above * above - 4 * product
        if above <= 0 or room < 0:
            continue
        null = edge + 2 * product / (above + math.sqrt(room))
        if not 0 < null < a:
            continue
        v = null * (1 - null) if steps == 1 else max(expected.variance, _MIN_VARIANCE)
        stake = min((a - null) / v, _MAX_STAKE / null)
        slots.append(j)
        nulls.append(null)
        alternatives.append(a)
        variances.append(v)
        temper = _tempering(expected, rise, a - null)
        gains.append(tuple(math.log1p(stake * (x - null)) / temper for x in levels))
    if not slots:
        return None
    return Bets(
        tuple(slots),
        tuple(nulls),
        tuple(alternatives),
        tuple(variances),
        tuple(gains),
        expected.rho_bound,
        expected.kappa,
        len(grid),
        expected.excess,
    )


def _tempering(expected: Expectation, rise: float, above: float) -> float:
    """What a bettor whose alternative is `above` its null point divides its log-factor on
    a verdict without a conversation by: kappa, less the part its guard band covers.

    The null point is at least `rise / 2` above the expected mean (`Terms.margin`), and a bettor on
    verdicts whose sums vary `K` times as independent ones do loses, tempered by `t`, at a
    rate that keeps its wealth a supermartingale to the power `(t / K) (1 + r)`,
    `r = rise / above` (to second order: its drift per verdict is `-lambda m / 2 -
    lambda^2 V / 2` for a mean `m / 2` below its null point, the variance of its sum
    `K lambda^2 V` per verdict). Tempering by `kappa / (1 + r)` keeps that power where
    `kappa` alone put it on a mean at its null point, so the allowance for kappa's own
    error costs the bettors near their null point (small rises) less than it costs those
    far above it; never below kappa's estimate alone (nor 1): the second-order argument is
    the allowance's, and a measured dispersion is tempered by in full."""
    kappa = expected.kappa
    floor = kappa if expected.kappa_estimate is None else min(kappa, expected.kappa_estimate)
    return max(1.0, floor, kappa / (1 + rise / above))


def log_add(a: float, b: float) -> float:
    """log(e^a + e^b), without overflow; -inf is the log of 0."""
    if a < b:
        a, b = b, a
    if a == -math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


_HOLD_FLOOR = math.log(1 / HOLD_P)


class SequentialTest:
    """The statistic of one (rule, service): the log-wealth `log R_j` of each alternative,
    its CUSUM `C_j`, when that run began and the verdicts it holds, and the time of the
    last batch."""

    __slots__ = (
        "distinct",
        "evidence",
        "grid",
        "holding",
        "last",
        "log_wealth",
        "runs",
        "since",
    )

    def __init__(self) -> None:
        self.log_wealth = [-math.inf] * MAX_ALTERNATIVES
        self.runs = [0.0] * MAX_ALTERNATIVES
        self.since = [0.0] * MAX_ALTERNATIVES
        # Runs that reached `HOLD_P` and have not ended since (their CUSUM is above 0).
        self.holding = [False] * MAX_ALTERNATIVES
        # The verdicts of each run: samples, sum and sum of squares of their values.
        self.evidence = [Moments()] * MAX_ALTERNATIVES
        # The distinct requests of each run's verdicts: verdicts of their own, and
        # conversations and repeated requests at their first arrival in it.
        self.distinct = [0] * MAX_ALTERNATIVES
        self.last: float | None = None
        # The grid of the last bets: the statistic's divisor.
        self.grid = MAX_ALTERNATIVES

    def update(
        self, bets: Bets, histogram: Sequence[float], arrivals: Sequence[Arrival], now: float
    ) -> None:
        """Adds a batch that arrived by `now` (verdicts without a conversation as a
        histogram of levels, and conversations' arrivals), judged by `bets`: every running bettor's
        wealth times the batch's factor, a new bettor staking the seconds the batch covered
        (the time since the previous one, at most `MAX_WEIGHT_S`)."""
        weight = 0.0 if self.last is None else min(max(now - self.last, 0.0), MAX_WEIGHT_S)
        log_weight = math.log(weight) if weight > 0 else -math.inf
        self.last = now
        self.grid = bets.grid
        steps = max(1, len(histogram) - 1)
        batch = Moments(
            int(sum(histogram)) + sum(u.samples for u in arrivals),
            sum(c * k / steps for k, c in enumerate(histogram)) + sum(u.defects for u in arrivals),
            sum(c * (k / steps) ** 2 for k, c in enumerate(histogram))
            + sum(u.squares for u in arrivals),
        )
        distinct = int(sum(histogram)) + sum(1 for u in arrivals if u.earlier == 0)
        ratios = dict(zip(bets.slots, bets.log_ratios(histogram, arrivals), strict=True))
        for j in range(MAX_ALTERNATIVES):
            ratio = ratios.get(j)
            if ratio is None:
                # Alternatives that no longer fit (the expectation rose, or its error is
                # too wide for them) stop betting.
                self.log_wealth[j], self.runs[j], self.evidence[j] = -math.inf, 0.0, Moments()
                self.holding[j], self.distinct[j] = False, 0
                continue
            self.log_wealth[j] = log_add(self.log_wealth[j], log_weight) + ratio
            run = self.runs[j] + ratio
            if run <= 0:
                self.runs[j], self.since[j], self.evidence[j] = 0.0, now, Moments()
                self.holding[j], self.distinct[j] = False, 0
            else:
                self.runs[j], self.evidence[j] = run, self.evidence[j].plus(batch)
                self.distinct[j] += distinct
                self.holding[j] = self.holding[j] or run > _HOLD_FLOOR

    def log_statistic(self) -> float:
        """`log R`: the log of the wealth summed over the alternatives, over the grid's
        size `J`."""
        total = -math.inf
        for w in self.log_wealth:
            if w > -math.inf:
                total = log_add(total, w)
        return total - math.log(self.grid)

    def crossed(self, budget_s: float) -> bool:
        """Whether `R` reached `budget_s`: a page."""
        return self.log_statistic() >= math.log(budget_s)

    def progress(self, budget_s: float) -> float:
        """How far `R` is towards a page, on a log scale: 1 pages, 0 is one second."""
        return max(0.0, self.log_statistic()) / math.log(budget_s)

    def p_value(self) -> float:
        """The chance, while nothing rose, of a run as strong as the strongest starting at
        one given time (at most)."""
        return min(1.0, self.grid * math.exp(-max(self.runs)))

    def strongest(self) -> Moments:
        """The verdicts of the strongest run (what a page reports as its evidence)."""
        return self.evidence[self._strongest()]

    def strongest_distinct(self) -> int:
        """The distinct requests among the strongest run's verdicts."""
        return self.distinct[self._strongest()]

    def _strongest(self) -> int:
        return max(range(MAX_ALTERNATIVES), key=self.runs.__getitem__)

    def building_since(self) -> float | None:
        """When the earliest run began that reached a p-value of its own below `HOLD_P`
        and has not ended since (None: none). Holding is cautious (held verdicts join the
        level when the evidence fades), so each alternative is taken alone, not over all
        `J`, and a run holds until it ends rather than while it stays that strong."""
        starts = [t for t, held in zip(self.since, self.holding, strict=True) if held]
        return min(starts) if starts else None

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def snapshot(self) -> dict[str, Any]:
        return {
            "log_wealth": [w if w > -math.inf else None for w in self.log_wealth],
            "runs": list(self.runs),
            "since": list(self.since),
            "holding": list(self.holding),
            "evidence": [[e.samples, e.defects, e.squares] for e in self.evidence],
            "distinct": list(self.distinct),
            "last": self.last,
            "grid": self.grid,
        }

    def restore(self, raw: Any) -> None:
        """Takes back `snapshot()`; raises TypeError or ValueError on anything else."""
        if not isinstance(raw, dict):
            raise ValueError("sequential: an object expected")
        wealth = [-math.inf if w is None else saved_number(w) for w in _list(raw["log_wealth"])]
        runs = [saved_number(c) for c in _list(raw["runs"])]
        since = [saved_number(s) for s in _list(raw["since"])]
        evidence = [[saved_number(x) for x in row] for row in _list(raw["evidence"])]
        if any(c < 0 for c in runs):
            raise ValueError("sequential: a negative run")
        if any(len(row) != 3 or not 0 <= row[2] <= row[1] <= row[0] for row in evidence):
            raise ValueError("sequential: evidence out of order")
        holding = raw.get("holding", [c > _HOLD_FLOOR for c in runs])
        if not isinstance(holding, list) or not all(isinstance(h, bool) for h in holding):
            raise TypeError("sequential: holding is not a list of true or false")
        last = raw["last"]
        self.log_wealth, self.runs, self.since = wealth, runs, since
        self.holding = list(_list(holding))
        grid = raw.get("grid", MAX_ALTERNATIVES)
        if isinstance(grid, bool) or not isinstance(grid, int) or not 1 <= grid <= MAX_ALTERNATIVES:
            raise ValueError("sequential: grid is not a count of alternatives")
        self.grid = grid
        self.evidence = [Moments(int(n), d, q) for n, d, q in evidence]
        # A file from before distinct requests were kept: each verdict taken as one.
        distinct = raw.get("distinct", [e.samples for e in self.evidence])
        counts = [saved_number(c) for c in _list(distinct)]
        if any(not 0 <= c <= e.samples for c, e in zip(counts, self.evidence, strict=True)):
            raise ValueError("sequential: more distinct requests than verdicts")
        self.distinct = [int(c) for c in counts]
        self.last = None if last is None else saved_number(last)


def _list(raw: Any) -> list[Any]:
    if not isinstance(raw, list) or len(raw) != MAX_ALTERNATIVES:
        raise ValueError(f"sequential: {MAX_ALTERNATIVES} numbers expected")
    return raw
