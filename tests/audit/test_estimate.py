"""The audit estimate's maths: exact values on small hand-computed windows, and the
interval's coverage on simulated streams (i.i.d., clustered by conversation, drifting)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from monitor.evidence.ppi import MIN_AUDITED, Tally, Trace, estimate, t_critical

# Unaudited: 10 records, detector fails 2. Audited (detector, reference): (1,1), (0,1),
# (0,0) ×3. By hand: mean_N f = 0.2, var_N f = (2 − 10·0.04)/9 = 1.6/9; audited f =
# [1,0,0,0,0], Y = [1,1,0,0,0]: var f = 0.2, var Y = 0.3, cov(Y, f) = (1 − 5·0.2·0.4)/4 =
# 0.15, Y − f = [0,1,0,0,0]: mean 0.2, var 0.2. Five audited traces: the critical value of
# z = 1 is Student's t with 4 degrees of freedom.
T4 = t_critical(1.0, 4)
HAND = Tally(unaudited=10, unaudited_defects=2, agree_pass=3, misses=1, agree_defect=1)


def test_plain_ppi_on_a_hand_computed_window() -> None:
    got = estimate(HAND, tuned=False, z=1.0, min_audited=2, exact_below=0)
    assert got.weight == 1.0
    assert got.corrected is not None and got.audited_only is not None
    # θ = 0.2 + 0.2; Var = (1.6/9)/10 + 0.2/5
    sd = T4 * math.sqrt(1.6 / 9 / 10 + 0.2 / 5)
    assert got.corrected.estimate == pytest.approx(0.4)
    assert got.corrected.lower == pytest.approx(0.4 - sd)
    assert got.corrected.upper == pytest.approx(0.4 + sd)
    # The audited records alone: mean 0.4, variance 0.3/5.
    assert got.audited_only.lower == pytest.approx(0.4 - T4 * math.sqrt(0.06))
    assert got.raw == pytest.approx(3 / 15)
    assert got.miss_rate == pytest.approx(0.5)
    assert got.false_alarm_rate == 0.0
    assert (got.evaluated, got.audited) == (15, 5)


def test_tuned_weight_on_a_hand_computed_window() -> None:
    got = estimate(HAND, z=1.0, min_audited=2, exact_below=0)
    # λ of least variance: (cov/n) / (var_N f / N + var_n f / n) = 0.03 / (1.6/90 + 0.04)
    weight = (0.15 / 5) / (1.6 / 9 / 10 + 0.2 / 5)
    assert got.weight == pytest.approx(weight)
    residual = 0.3 - 2 * weight * 0.15 + weight**2 * 0.2
    sd = T4 * math.sqrt(weight**2 * (1.6 / 9) / 10 + residual / 5)
    assert got.corrected is not None
    assert got.corrected.estimate == pytest.approx(weight * 0.2 + 0.4 - weight * 0.2)
    assert got.corrected.upper - got.corrected.lower == pytest.approx(2 * sd)
    # Tuning never widens the interval of plain PPI on the same window.
    plain = estimate(HAND, tuned=False, z=1.0, min_audited=2, exact_below=0).corrected
    assert plain is not None and got.corrected.width < plain.width


def test_a_detector_that_says_nothing_gets_no_weight() -> None:
    """A detector that fails everything carries no information: λ = 0, and the estimate
    is the audited sample's."""
    tally = Tally(unaudited=100, unaudited_defects=100, false_alarms=20, agree_defect=20)
    got = estimate(tally, min_audited=2)
    assert got.weight == 0.0
    assert got.corrected == got.audited_only
    assert got.raw == 1.0 and got.false_alarm_rate == 1.0 and got.miss_rate == 0.0


def test_no_interval_below_the_minimum_of_audited_records() -> None:
    tally = Tally(unaudited=1000, unaudited_defects=300, agree_pass=MIN_AUDITED - 1)
    got = estimate(tally)
    assert got.corrected is None and got.audited_only is None
    assert got.raw == pytest.approx(300 / (1000 + MIN_AUDITED - 1))
    assert got.miss_rate is None  # the reference saw no defect
    tally.add_audited(False, False)
    assert estimate(tally).corrected is not None


def test_tallies_add_up() -> None:
    one, two = Tally(), Tally()
    for detector, reference in [(True, True), (True, False), (False, True), (False, False)]:
        one.add_audited(detector, reference)
    two.add_unaudited(True)
    two.add_unaudited(False)
    one.merge(two)
    assert (one.audited, one.evaluated, one.unaudited_defects) == (4, 6, 1)
    assert (one.agree_defect, one.false_alarms, one.misses, one.agree_pass) == (1, 1, 1, 1)


def test_tallies_of_their_own_traces_add_up_to_the_tally_of_all_of_them() -> None:
    """Every count and every trace sum of two tallies, merged, is what one tally of all
    their records holds."""
    rng = random.Random(7)
    parts, whole = [Tally(), Tally()], Tally()
    for trace in range(60):
        part = parts[trace % 2]
        sums = {id(part): Trace(), id(whole): Trace()}
        for _ in range(rng.randint(1, 4)):
            flagged, defect = rng.random() < 0.3, rng.random() < 0.2
            for tally in (part, whole):
                if trace % 3 == 0:
                    sums[id(tally)] = tally.add_audited(flagged, defect, sums[id(tally)])
                else:
                    sums[id(tally)] = tally.add_unaudited(flagged, sums[id(tally)])
    parts[0].merge(parts[1])
    assert parts[0] == whole
    assert whole.audited_traces.mm > 0 and whole.unaudited_traces.mf > 0


# Simulated windows: each record has a true verdict Y and a detector verdict f that misses
# 60 % of defects and fails 25 % of good records (the embedded detector's order); a record
# is audited by a hash of its id, i.e. independently of its content, with probability
# `share`. The target is the window's own defect rate.
Stream = Callable[[random.Random, int], list[bool]]


def _iid(rng: random.Random, n: int) -> list[bool]:
    return [rng.random() < 0.2 for _ in range(n)]


def _clustered(rng: random.Random, n: int) -> list[bool]:
    """Conversations of 1-30 turns, each with its own rate (mean 0.2)."""
    out: list[bool] = []
    while len(out) < n:
        rate = rng.betavariate(0.5, 2.0)
        out.extend(rng.random() < rate for _ in range(rng.randint(1, 30)))
    return out[:n]


def _drifting(rng: random.Random, n: int) -> list[bool]:
    """A rate that creeps from 0.05 to 0.40 across the window."""
    return [rng.random() < 0.05 + 0.35 * i / n for i in range(n)]


def _coverage(stream: Stream, share: float, runs: int = 300, size: int = 3000) -> float:
    rng = random.Random(7)
    covered = 0
    for _ in range(runs):
        truth = stream(rng, size)
        tally = Tally()
        for defect in truth:
            flagged = rng.random() < (0.4 if defect else 0.25)
            if rng.random() < share:
                tally.add_audited(flagged, defect)
            else:
                tally.add_unaudited(flagged)
        got = estimate(tally).corrected
        assert got is not None
        covered += got.lower <= sum(truth) / size <= got.upper
    return covered / runs


@pytest.mark.parametrize("stream", [_iid, _clustered, _drifting], ids=lambda s: s.__name__)
def test_the_interval_covers_the_window_rate(stream: Stream) -> None:
    """At 5 % audited (150 records a window), the nominal 95 % interval covers the window's
    true rate in at least 92 % of 300 windows (the binomial spread of 300 runs at 95 %
    reaches 92.5 % about one time in a hundred)."""
    assert _coverage(stream, 0.05) >= 0.92


def _traced(tally: Tally, traces: list[list[tuple[bool, bool]]]) -> None:
    """Audited traces of (detector, reference) pairs, each trace's records counted together."""
    for pairs in traces:
        trace = Trace()
        for detector, reference in pairs:
            trace = tally.add_audited(detector, reference, trace)


def test_a_trace_s_records_vary_together_in_the_variance() -> None:
    """Audited traces A (1,1)(1,1), B (0,0)(0,0), C (0,1), plain PPI: residuals Y − f per
    trace 0, 0, 1, mean 1/5; centred trace sums −0.4, −0.4, 0.8; variance of the mean
    3/2 · 0.96 / 5² = 0.0576 (five independent records would give 0.2 / 5 = 0.04), with
    Student's t at 2 degrees of freedom (three traces)."""
    tally = Tally(unaudited=10, unaudited_defects=2)
    _traced(tally, [[(True, True)] * 2, [(False, False)] * 2, [(False, True)]])
    assert (tally.audited, tally.audited_trace_count) == (5, 3)
    assert tally.effective_audited_traces == pytest.approx(25 / 9)
    got = estimate(tally, tuned=False, z=1.0, min_audited=2, exact_below=0)
    assert got.corrected is not None and got.audited_only is not None
    half = t_critical(1.0, 2) * math.sqrt(1.6 / 9 / 10 + 0.0576)
    assert got.corrected.estimate == pytest.approx(0.2 + 0.2)
    assert got.corrected.upper - got.corrected.estimate == pytest.approx(half)
    # The audited records alone: Y per trace 2, 0, 1, mean 3/5: centred sums 0.8, −1.2, 0.4.
    alone = t_critical(1.0, 2) * math.sqrt(1.5 * (0.64 + 1.44 + 0.16) / 25)
    assert got.audited_only.estimate - got.audited_only.lower == pytest.approx(alone)


def test_the_same_records_one_trace_each_give_the_i_i_d_interval() -> None:
    traced, single = Tally(), Tally()
    for tally, traces in ((traced, [[(True, False)], [(False, True)]]), (single, [])):
        _traced(tally, traces)
    single.add_audited(True, False)
    single.add_audited(False, True)
    assert traced == single  # a trace of one record adds nothing to the counts


def test_few_traces_give_no_interval_however_many_records() -> None:
    """Readiness counts effective traces, (Σ m)² / Σ m²: 60 audited records in two traces
    are two, not sixty."""
    tally = Tally(unaudited=1000, unaudited_defects=300)
    _traced(tally, [[(True, True), (False, False)] * 15] * 2)
    assert tally.effective_audited_traces == pytest.approx(2.0)
    assert estimate(tally).corrected is None
    one_each = Tally(unaudited=1000, unaudited_defects=300)
    _traced(one_each, [[(True, True)], [(False, False)]] * 30)
    assert estimate(one_each).corrected is not None


def _trace_coverage(share: float, runs: int = 200, traces: int = 600) -> tuple[float, float]:
    """Conversations of 1-30 turns, each its own rate (mean 0.2), each one trace audited
    as a whole (a hash of its trace id) with probability `share`: how often the interval
    covers the window's rate when the tally is told which records share a trace, and when
    it counts each record as a trace of its own."""
    rng = random.Random(11)
    covered = [0, 0]
    for _ in range(runs):
        told, untold, defects, records = Tally(), Tally(), 0, 0
        for _ in range(traces):
            rate = rng.betavariate(0.5, 2.0)
            audited = rng.random() < share
            trace = Trace()
            for _ in range(rng.randint(1, 30)):
                defect = rng.random() < rate
                flagged = rng.random() < (0.4 if defect else 0.25)
                if audited:
                    trace = told.add_audited(flagged, defect, trace)
                    untold.add_audited(flagged, defect)
                else:
                    trace = told.add_unaudited(flagged, trace)
                    untold.add_unaudited(flagged)
                defects, records = defects + defect, records + 1
        for i, tally in enumerate((told, untold)):
            got = estimate(tally).corrected
            assert got is not None
            covered[i] += got.lower <= defects / records <= got.upper
    return covered[0] / runs, covered[1] / runs


def test_the_interval_covers_the_rate_when_a_trace_holds_a_conversation() -> None:
    """A quarter of 600 conversation traces audited (about 150 traces, 2,300 records): the
    per-trace interval covers the window's rate in at least 92 % of 200 windows; counting
    each record as its own trace, as if independent, it covers far less."""
    told, untold = _trace_coverage(0.25)
    assert told >= 0.92
    assert untold < 0.75


def _at_most(k: int, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p), term by term (k is small here)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def _holds_the_exact_interval(lower: float, upper: float, defects: int, audited: int) -> bool:
    """[lower, upper] contains the exact 95 % (Clopper-Pearson) interval: the exact upper
    bound is the p where P(X ≤ defects) falls to 2.5 %, so an upper bound at or past it has
    that tail at most 2.5 % (1 holds every p); the same for the lower bound, mirrored."""
    n, k = audited, defects
    upper_ok = upper >= 1.0 or _at_most(k, n, upper) <= 0.025 + 1e-12
    lower_ok = lower <= 0.0 or _at_most(n - k, n, 1 - lower) <= 0.025 + 1e-12
    return upper_ok and lower_ok


@pytest.mark.parametrize("audited", [30, 48, 100])
@pytest.mark.parametrize("defects", ["none", "all", "two"])
@pytest.mark.parametrize("detector", ["agrees", "flags a tenth"])
def test_a_unanimous_or_nearly_unanimous_audit_claims_no_more_than_the_exact_interval(
    audited: int, defects: str, detector: str
) -> None:
    """48 audited traces all labelled pass once gave [0.0, 0.0]; the exact interval is
    [0, 0.074]. Where the reference's rarer verdict is few (or none), both intervals
    contain the exact binomial interval on the audited traces alone, and have width."""
    failed = {"none": 0, "all": audited, "two": 2}[defects]
    tally = Tally()
    for i in range(audited):
        reference = i < failed
        flagged = reference if detector == "agrees" else i % 10 == 0
        tally.add_audited(flagged, reference)
    for i in range(20 * audited):
        tally.add_unaudited(i % 10 == 0 if detector != "agrees" else failed == audited)
    got = estimate(tally)
    assert got.corrected is not None and got.audited_only is not None
    if failed == 0:  # the closed form: [0, 1 − 0.025^(1/n)]; 48 audited: [0, 0.074]
        assert got.corrected.upper >= 1 - 0.025 ** (1 / audited) - 1e-12
    for interval in (got.corrected, got.audited_only):
        assert _holds_the_exact_interval(interval.lower, interval.upper, failed, audited)
        assert interval.width > 0
        assert interval.lower <= interval.estimate <= interval.upper


def test_the_exact_floor_leaves_a_balanced_audit_as_it_was() -> None:
    """Where both verdicts are many, the interval is the t interval alone: narrower than
    the exact one, as prediction-powered inference promises."""
    tally = Tally()
    for i in range(100):
        tally.add_audited(i % 3 == 0, i % 3 == 0)
    for i in range(2000):
        tally.add_unaudited(i % 3 == 0)
    got = estimate(tally)
    assert got.corrected is not None and got.audited_only is not None
    # Narrower than the exact interval: it does not hold it.
    interval = got.audited_only
    assert not _holds_the_exact_interval(interval.lower, interval.upper, 34, 100)
    assert got.corrected.width <= interval.width
