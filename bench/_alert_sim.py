"""False pages of the sequential test over many simulated service-years at once.

Counting false pages against a budget of one a quarter needs years of service time at every
rate: more than replaying the engine verdict by verdict can give at 100 evaluations/s. This
runs the arithmetic of `monitor.alerts.sequential` (its `bets`, and `SequentialTest.update`
written over numpy arrays; `check_against_the_engine` holds the two to the same numbers)
for `streams` services side by side, each service a stream of pass/fail verdicts of a fixed
defect rate, with

- arrivals: a Poisson number of verdicts per step of `step_s` seconds (the engine's batch:
  `regression.BATCH` verdicts or an evaluation, whichever comes first; at most one per
  second here, so busy services are judged in slightly larger batches than the engine's);
- the baseline: the trailing `baseline_s` before the current window, kept in slices of
  1/60 of it as the engine keeps it, the bets re-derived whenever a slice moves;
- a page: the statistic reaching the budget; the service then fires for one `window_s`
  (nothing is judged, as in the engine) and starts again;
- a boost (optional): while a service's p-value is below `boost_p` (or it fires) its
  verdicts arrive at `boosted_rate`, as an evaluator sampled at a boosted rate (`step_s`
  sets the step, so that streams with and without a boost are batched alike).

It leaves out what only matters during a rise (the held-back slices) and the current
window's `min_samples` (a healthy busy service always has them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from monitor.alerts.regression import BATCH

from monitor.alerts.sequential import MAX_ALTERNATIVES, MAX_WEIGHT_S, SequentialTest, bets
from monitor.alerts.window import Moments

_INVALID = -1e9  # the log-gain of an alternative a service has not got: its wealth stays 0
_EVALUATION_S = 15.0


def advance(
    log_wealth: np.ndarray, runs: np.ndarray, ratios: np.ndarray, weight_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`SequentialTest.update` for many services: (services, alternatives) arrays, the
    batch's log-likelihood ratios, the seconds each batch covered (already capped)."""
    with np.errstate(divide="ignore"):
        log_weight = np.log(weight_s)[:, None]
    return np.logaddexp(log_wealth, log_weight) + ratios, np.maximum(runs + ratios, 0.0)


def log_statistic(log_wealth: np.ndarray, live: np.ndarray) -> np.ndarray:
    """`SequentialTest.log_statistic` for many services (`live`: alternatives of each)."""
    out: np.ndarray = np.logaddexp.reduce(log_wealth, axis=-1) - np.log(live)
    return out


def check_against_the_engine(seed: int = 0) -> None:
    """One random stream through `SequentialTest` and through `advance`: the same numbers."""
    rng = np.random.default_rng(seed)
    # A thin baseline, so that its smallest alternative is left out: slots, not positions.
    judged = bets(Moments(2_000, 600.0, 600.0), 0.03, 1, 90 * 86_400.0)
    assert judged is not None and judged.slots[0] > 0
    j = len(judged.alternatives)
    test = SequentialTest()
    log_wealth, runs = np.full((1, j), -np.inf), np.zeros((1, j))
    now, last = 0.0, None
    for _ in range(500):
        now += float(rng.exponential(5.0))
        k = int(rng.binomial(8, 0.36))
        test.update(judged, [8.0 - k, float(k)], now)
        weight = 0.0 if last is None else min(now - last, MAX_WEIGHT_S)
        last = now
        ratios = np.array([judged.log_ratios([8.0 - k, float(k)])])
        log_wealth, runs = advance(log_wealth, runs, ratios, np.array([weight]))
    assert np.allclose(runs[0], [test.runs[i] for i in judged.slots]), (runs, test.runs)
    expected = test.log_statistic()
    assert abs(float(log_statistic(log_wealth, np.array([j]))[0]) - expected) < 1e-9


@dataclass(frozen=True)
class FalsePages:
    pages: int
    service_days: float
    budget_s: float
    # Mean verdicts per second over all services and time (boosts included).
    mean_rate: float
    # The share of service time a boost was on.
    boosted_share: float = 0.0

    @property
    def budgets(self) -> float:
        """Budget periods simulated."""
        return self.service_days * 86_400 / self.budget_s

    @property
    def per_budget(self) -> float:
        """False pages per budget period: at most 1 when the promise holds."""
        return self.pages / self.budgets

    def interval(self) -> tuple[float, float]:
        """A 95 % interval of the pages per budget period (Poisson counts, Byar's
        approximation)."""
        k, z = self.pages, 1.96
        low = 0.0 if k == 0 else k * (1 - 1 / (9 * k) - z / (3 * math.sqrt(k))) ** 3
        high = (k + 1) * (1 - 1 / (9 * (k + 1)) + z / (3 * math.sqrt(k + 1))) ** 3
        return low / self.budgets, high / self.budgets


def false_pages(
    p0: float,
    rate: float,
    budget_s: float,
    *,
    min_increase: float,
    service_days: float,
    days_per_stream: float = 5.0,
    seed: int = 1,
    baseline_s: float = 86_400.0,
    window_s: float = 1_800.0,
    baseline_min: int = 500,
    boosted_rate: float | None = None,
    boost_p: float = 0.05,
    rise: float = 0.0,
    step_s: float | None = None,
) -> FalsePages:
    """Pages on streams of defect rate `p0` (`rate` verdicts/s) over `service_days` of
    service time; `per_budget` divides by `budget_s`. With `rise`, the verdicts come at
    `p0 + rise` against a baseline that stays at `p0` (none of the rise reaches it: the
    worst case for a rise that must not page)."""
    check_against_the_engine()
    rng = np.random.default_rng(seed)
    streams = max(1, math.ceil(service_days / days_per_stream))
    top = max(rate, boosted_rate or 0.0)
    step = step_s or min(_EVALUATION_S, max(1.0, BATCH / top))
    steps = int(days_per_stream * 86_400 / step)
    slice_s = baseline_s / 60
    per_slice = max(1, round(slice_s / step))
    lag = math.ceil(window_s / slice_s)  # slices between the newest and the baseline
    ring = 60 + lag + 1
    # Per-slice counts (verdicts, defects), newest last; start as if warmed up.
    warm_n = rng.poisson(rate * slice_s, (streams, ring)).astype(np.float64)
    counts = np.stack([warm_n, rng.binomial(warm_n.astype(np.int64), p0)], axis=-1)
    counts[:, -1] = 0.0
    log_wealth = np.full((streams, MAX_ALTERNATIVES), -np.inf)
    runs = np.zeros((streams, MAX_ALTERNATIVES))
    gains = np.full((streams, MAX_ALTERNATIVES, 2), _INVALID)
    live = np.ones(streams)
    elapsed = np.zeros(streams)
    firing_until = np.full(streams, -np.inf)
    boosted = np.zeros(streams, dtype=bool)
    pages, verdicts, boosted_steps = 0, 0.0, 0
    log_budget = math.log(budget_s)

    def rebet() -> None:
        base = counts[:, : ring - lag - 1].sum(axis=1)
        for s in range(streams):
            n, d = base[s]
            b = (
                bets(Moments(int(n), float(d), float(d)), min_increase, 1, budget_s)
                if n >= baseline_min
                else None
            )
            gains[s] = _INVALID
            live[s] = 1
            if b is not None:
                gains[s, list(b.slots)] = np.array(b.gains)
                live[s] = len(b.slots)

    rebet()
    evaluate_every = max(1, round(_EVALUATION_S / step))
    for i in range(steps):
        now = i * step
        r = np.where(boosted, boosted_rate or rate, rate)
        n = rng.poisson(r * step)
        k = rng.binomial(n, p0 + rise)
        verdicts += float(n.sum())
        counts[:, -1, 0] += n
        counts[:, -1, 1] += k
        elapsed += step
        judged = (n > 0) & (now >= firing_until)
        if judged.any():
            histogram = np.stack([n - k, k], axis=-1).astype(np.float64)
            ratios = np.einsum("sjk,sk->sj", gains, histogram)
            weight = np.minimum(elapsed, MAX_WEIGHT_S)
            new_wealth, new_runs = advance(log_wealth, runs, ratios, weight)
            log_wealth = np.where(judged[:, None], new_wealth, log_wealth)
            runs = np.where(judged[:, None], new_runs, runs)
            elapsed = np.where(judged, 0.0, elapsed)
            crossed = judged & (log_statistic(log_wealth, live) >= log_budget)
            if crossed.any():
                pages += int(crossed.sum())
                firing_until = np.where(crossed, now + window_s, firing_until)
                log_wealth[crossed] = -np.inf
                runs[crossed] = 0.0
        if boosted_rate is not None and i % evaluate_every == 0:
            p = np.minimum(1.0, live * np.exp(-runs.max(axis=1)))
            boosted = (p < boost_p) | (now < firing_until)
        boosted_steps += int(boosted.sum())
        if (i + 1) % per_slice == 0 and not rise:
            counts = np.roll(counts, -1, axis=1)
            counts[:, -1] = 0.0
            rebet()
    days = streams * steps * step / 86_400
    share = boosted_steps / (streams * steps)
    return FalsePages(pages, days, budget_s, verdicts / (days * 86_400), share)
