"""A bucket's level sums with flagged senders' verdicts left out (`Buckets.screened_clean`):
the newest bucket's flagged share is estimated from the screen's counts, so it can name
defects where the bucket's clean verdicts hold none (the defects went to the held-out
rise); and a flagged sender's clean verdicts of the newest bucket count in its rates as
they arrive."""

from __future__ import annotations

import pytest

from monitor.evidence.buckets import Buckets
from monitor.evidence.counts import Moments
from monitor.evidence.history import History
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


HONEST = ("10.0.0.1/pod-1", "10.0.0.2/pod-2", "10.0.0.3/pod-3")
FORGER = "6.6.6.6/forged"


def _expected_at_end(clean_after_s: float) -> float:
    """The expected mean at the end of hour 3 of a day-seasonal history: three honest
    senders at 0.1 from hour 0 (15 verdicts a minute each), and from hour 2 a forger (10
    a minute) failing all of hour 2 and passing all of hour 3; every verdict of hour 2,
    and of hour 3 those of its first `clean_after_s` seconds, held out (as a page holds
    them), the rest clean. Verdicts reach the history as they are sent, judged every
    minute."""
    history = History(86_400.0, "day", 1, 90 * 86_400.0, window_s=600.0)
    t = 0.0
    while t < 4 * 3600:
        hour = int(t // 3600)
        held = hour == 2 or (hour == 3 and t - 3 * 3600 < clean_after_s)
        sends = [(sender, 15, 2 if int(t // 60) % 2 else 1) for sender in HONEST]
        if hour >= 2:
            sends.append((FORGER, 10, 10 if hour == 2 else 0))
        for sender, n, d in sends:
            moments = Moments(n, float(d), float(d))
            history.sent(t, sender, moments, solo=True)
            history.add(t, moments, moments, rise=held)
        expected = history.expectation(t, 30)
        t += 60.0
    assert history.senders.flagged == {FORGER}
    assert expected is not None
    return expected.mean


def test_a_flagged_senders_clean_verdicts_in_the_newest_bucket_count_as_they_arrive() -> None:
    """The forger's first passing hour, its first half held out: its clean verdicts of
    the second half are its rate of that hour while the hour is still the history's
    newest, so its share of the verdicts sent (10 of 55) is expected at 0, not at the
    screened level as if it had never been seen clean (which paged its next failing
    hour); with the whole hour held out it is still never seen clean."""
    assert _expected_at_end(1800.0) == pytest.approx(0.1 * 45 / 55)
    assert _expected_at_end(3600.0) == pytest.approx(0.1)
