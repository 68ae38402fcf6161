"""A bucket's level sums with flagged senders' verdicts left out (`Buckets.screened_clean`):
the newest bucket's flagged share is estimated from the screen's counts, so it can name
defects where the bucket's clean verdicts hold none (the defects went to the held-out
rise)."""

from __future__ import annotations

from monitor.evidence.buckets import Buckets
from monitor.evidence.counts import Moments
from monitor.evidence.level import Profile
from monitor.evidence.season import SeasonProfile


def test_flagged_defects_where_the_clean_verdicts_hold_none_leave_a_rate_of_zero() -> None:
    buckets = Buckets("none", 3600.0, 24)
    buckets.add(10.0, Moments(8, 0.0, 0.0), Moments(8, 0.0, 0.0), rise=False)
    buckets.add(20.0, Moments(4, 4.0, 4.0), Moments(4, 4.0, 4.0), rise=True)
    buckets.screened_clean[0] = (2.0, 1.0, 2.0)
    profile = Profile(SeasonProfile("none"), kappa=1.0, rho=0.0, rho_bound=0.0)

    sums, covered = buckets._sums(0, -1, 3600.0, profile, seasonal=False)

    assert (sums.n, sums.d, sums.q, sums.solo) == (6.0, 0.0, 0.0, 6.0)
    assert covered == 3600.0
