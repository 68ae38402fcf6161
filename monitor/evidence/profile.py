"""What a regression rule's history measures of itself, once per new bucket
(`history.History`): how its verdicts cluster — the correlation within conversations
(`rho`), the dispersion of verdicts without one (`kappa`), the clustering nobody declared
(`excess`) — and, with those as its error, its season (`season.learn`), and a wander about
the season that lasts hours (`wander`). Flagged senders' verdicts (`senders.py`) are left
out of kappa's, the excess's, the season's and the wander's inputs: one sender's forged
hours teach the rule neither its dispersion nor a bad or good hour of the day.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.evidence.dispersion import (
    conversation_rho,
    kappa_measured,
    solo_dispersion,
    wander_error,
)
from monitor.evidence.level import Profile, conversation_design
from monitor.evidence.season import Season, learn


@dataclass(frozen=True, slots=True)
class BucketSums:
    """One bucket of a history (`index`): its clean verdicts (`n`, the sum of their defect
    values `d`, of their squares `q`), those held out as a rise (`rn`, `rd`, `rq`), the
    clean ones without a conversation (`solo_n`, `solo_d`), the sums of the
    conversations that closed in it (their verdicts `conv_n`, sizes squared `m2`, defects
    squared `dd`, verdicts times defects `nd`, sizes cubed `m3`), and the verdicts of
    flagged senders (`senders.py`) among the clean ones (`screened_n`, `screened_d`, without a conversation `screened_sn`) and
    the held ones (`screened_rn`, `screened_rd`), out of the excess's and the season's
    inputs."""

    index: int
    n: float
    d: float
    q: float
    rn: float
    rd: float
    rq: float
    solo_n: float
    solo_d: float
    conv_n: float
    m2: float
    dd: float
    nd: float
    m3: float
    screened_n: float = 0.0
    screened_d: float = 0.0
    screened_sn: float = 0.0
    screened_rn: float = 0.0
    screened_rd: float = 0.0


def measure_profile(
    buckets: Sequence[BucketSums],
    season: Season,
    steps: int,
    origin: int,
    newest: int,
    log_budget: float,
) -> Profile:
    """The profile of a history's `buckets` (oldest first; `steps`: the rule's defect
    value steps, 1 for pass/fail; `log_budget`: ln(J T) of the rule's test, what an error
    of kappa's estimate would cost)."""
    all_n = sum(b.n + b.rn for b in buckets)
    pooled_var = _variance(
        all_n, sum(b.d + b.rd for b in buckets), sum(b.q + b.rq for b in buckets), steps
    )
    rho, rho_bound = conversation_rho(
        (
            b.conv_n,
            b.m2,
            b.m3,
            b.dd,
            b.nd,
            n,
            (b.d + b.rd) / n,
            _variance(n, b.d + b.rd, b.q + b.rq, steps),
        )
        for b in buckets
        if b.conv_n > 0 and (n := b.n + b.rn) > 0
    )
    solo = {b.index: (b.solo_n, b.solo_d / b.solo_n) for b in buckets if b.solo_n > 0}
    kappa = solo_dispersion(solo, pooled_var, log_budget)
    kappa_estimate = min(kappa, solo_dispersion(solo, pooled_var, log_budget, raised=False))
    # How much more the history's verdicts vary than independent ones, kappa's allowance
    # for its error included: what the excess is measured against.
    solo_n = sum(n for n, _ in solo.values())
    conv_n = sum(b.conv_n for b in buckets)
    conv_design = conversation_design(rho, conv_n, sum(b.m2 for b in buckets))
    counted = solo_n + conv_n
    design = (kappa * solo_n + conv_design * conv_n) / counted if counted > 0 else 1.0
    # Clustering nobody declared: the dispersion of all clean verdicts' rates over
    # what their conversations and the others' dispersion explain. Its estimate alone:
    # `design` already holds kappa's allowance for error, and a young history's
    # allowance would otherwise count twice against conversations.
    clean = {
        b.index: (n, (b.d - b.screened_d) / n)
        for b in buckets
        if (n := b.n - b.screened_n) > 0 and b.rn <= b.n
    }
    dispersion = solo_dispersion(clean, pooled_var, log_budget, raised=False)
    excess = max(1.0, dispersion / design)
    design *= excess
    hours = [
        (b.index, n, (b.d + b.rd - b.screened_d - b.screened_rd) / n)
        for b in buckets
        if (n := b.n + b.rn - b.screened_n - b.screened_rn) > 0
    ]
    # What the season's offsets and the wander are as uncertain as: kappa's estimate, not
    # its allowance for its own error, which is the bettors' (their log-factors' error
    # grows with ln(J T) / 2 times kappa's, the expectation's error enters the test's
    # margin at a small fraction of that: docs/alerts.md, "Young histories"), or what all
    # clean verdicts show, the larger.
    estimated = design
    if counted > 0:
        estimated = max((kappa_estimate * solo_n + conv_design * conv_n) / counted, dispersion)
    learned = learn(season, hours, origin, newest, pooled_var * estimated)
    wander = wander_error(clean, learned.day, learned.days, origin, pooled_var * estimated)
    return Profile(
        learned, kappa, rho, rho_bound, excess, wander, kappa_estimate, kappa_measured(solo)
    )


def _variance(n: float, d: float, q: float, steps: int) -> float:
    """One defect value's: p (1 - p) for verdicts, the scores' own (at least 1e-4)."""
    mean = d / n if n else 0.0
    return mean * (1 - mean) if steps == 1 else max(1e-4, q / n - mean * mean if n else 0.0)
