"""A fresh rule's first verdicts as a level (`monitor.evidence.FirstLevel`): how many it
takes, the design effect its error counts them with, and its form in the state file."""

from __future__ import annotations

import json
import math
import random

import pytest

from monitor.evidence import FirstLevel, Moments
from monitor.evidence.dispersion import kappa_measured
from monitor.evidence.first_level import (
    DESIGN_PRIOR,
    HOLD_FACTOR,
    HOLD_RATIO,
    MIN_SHARE,
    MIN_UNITS,
    SPAN_S,
    UNIT_S,
)
from monitor.evidence.history import History
from monitor.evidence.level import Level


def verdicts(level: FirstLevel, values: list[float], start: float, per_s: float) -> None:
    for i, value in enumerate(values):
        level.add(Moments(1, value, value * value), start + i / per_s)


def test_it_takes_min_samples_in_enough_units_and_nothing_after() -> None:
    level = FirstLevel(500)
    # 600 verdicts within one unit: enough verdicts, too few units.
    verdicts(level, [0.0] * 600, 0.0, 100.0)
    for unit in range(1, MIN_UNITS):
        assert level.level(1000.0) is None
        verdicts(level, [1.0], UNIT_S * unit, 1.0)
    full = level.level(1000.0)
    assert full is not None and full.samples == 600 + MIN_UNITS - 1
    verdicts(level, [1.0] * 100, 1000.0, 1.0)  # a rise after it is not learned
    assert level.level(1000.0) == full
    assert level.level(SPAN_S) is None  # past its first hour it stands in no more


def test_an_arrival_that_crosses_min_samples_is_cut_there() -> None:
    level = FirstLevel(500)
    verdicts(level, [0.0] * 490, 0.0, 1.0)
    level.add(Moments(20, 20.0, 20.0), 491.0)
    full = level.level(1000.0)
    assert full is not None and full.samples == 500
    assert full.mean == pytest.approx(10 / 500)


def test_clustered_verdicts_count_with_their_design_effect() -> None:
    """Rows of 15 verdicts that share a rate (ICC about 0.3): the level's error units are
    several times its verdicts; independent ones stay at the prior."""
    rng = random.Random(3)
    # Enough that a level held open at a suspected change fills (at `HOLD_FACTOR` at most).
    enough = int(HOLD_FACTOR * 1000) + 30
    clustered: list[float] = []
    while len(clustered) < enough:
        p = min(1.0, max(0.0, rng.betavariate(0.47, 1.87)))  # mean 0.2, ICC 0.3
        clustered += [float(rng.random() < p) for _ in range(15)]
    independent = [float(rng.random() < 0.2) for _ in range(enough)]
    designs = []
    for values in (clustered, independent):
        level = FirstLevel(1000)
        verdicts(level, values, 0.0, 1.0)
        full = level.level(SPAN_S - 1)
        assert full is not None and full.samples == 1000
        designs.append(full.error_units / full.samples)
    assert designs[0] > 3.0
    assert designs[1] == DESIGN_PRIOR


def test_a_rise_while_it_fills_cuts_it_where_the_rise_began() -> None:
    """0.10 at 2 a second for two minutes, then 0.30: the level is the two minutes before
    the rise (what the test judges the rise against), not 500 verdicts mostly of it;
    healthy verdicts at the same rate fill it to `min_samples` uncut."""
    rng = random.Random(5)
    healthy = [float(rng.random() < 0.10) for _ in range(240)]
    rise = [float(rng.random() < 0.30) for _ in range(400)]
    level = FirstLevel(500)
    verdicts(level, healthy + rise, 0.0, 2.0)
    cut = level.level(1000.0)
    assert level.frozen and cut is not None
    assert cut.samples == 240  # the units before the rise, whole
    assert cut.mean == pytest.approx(sum(healthy) / 240)
    assert 240 >= 500 * MIN_SHARE
    again = FirstLevel(500)
    again.restore(json.loads(json.dumps(level.saved())))
    assert again.frozen and again.level(1000.0) == cut
    steady = FirstLevel(500)
    verdicts(steady, healthy + [float(rng.random() < 0.10) for _ in range(400)], 0.0, 2.0)
    full = steady.level(1000.0)
    assert not steady.frozen and full is not None and full.samples == 500


def test_its_state_survives_a_restart_and_an_old_file_has_none() -> None:
    level = FirstLevel(100)
    verdicts(level, [0.0, 1.0] * 60, 5.0, 1.0)
    again = FirstLevel(100)
    again.restore(json.loads(json.dumps(level.saved())))
    assert again.level(1000.0) == level.level(1000.0)
    assert not again.frozen
    again.restore(None)
    assert again.count == 0 and again.level(1000.0) is None
    old = level.saved()  # a state file from before levels were cut at a rise: no cut
    assert "frozen" not in old and old["cut_design"] is None
    again.restore(old)
    assert again.level(1000.0) == level.level(1000.0)
    with pytest.raises(TypeError):
        again.restore({**old, "frozen": "yes"})
    with pytest.raises(TypeError):
        again.restore({"units": [[0, 1.0]]})


def test_a_rise_not_yet_told_apart_at_min_samples_holds_the_level_open_until_it_is() -> None:
    """0.10 for two minutes at 2 a second, then 0.30: at 500 verdicts some of these rises
    read only a little above their first minutes; the level keeps filling while a change
    is suspected, and every one is cut where it began."""
    for seed in range(20):
        rng = random.Random(seed)
        healthy = [float(rng.random() < 0.10) for _ in range(240)]
        rise = [float(rng.random() < 0.30) for _ in range(int(HOLD_FACTOR * 500))]
        level = FirstLevel(500)
        verdicts(level, healthy + rise, 0.0, 2.0)
        cut = level.level(1000.0)
        assert level.frozen and cut is not None and cut.samples == 240, seed


def test_a_level_held_open_at_a_change_it_never_tells_apart_is_cut_where_it_began() -> None:
    """A x2 (0.10 to 0.20 at 2 a second, evenly) keeps the best split above `SUSPECT_Z` and
    below `CHANGE_Z`: the level holds open (across a restart too) until the verdicts since
    the split hold `HOLD_RATIO` times the 240 before it, when waiting longer could tell the
    split apart by little more, and still suspected then it is the units before the split,
    long before `HOLD_FACTOR` x `min_samples`: never a level filled with the rise (what
    comes after is the sequential test's to judge against it)."""
    values = [float(i % 10 == 0) for i in range(240)] + [float(i % 5 == 0) for i in range(1400)]
    settled = int(240 * (1 + HOLD_RATIO))
    assert settled + 2 * 60 < HOLD_FACTOR * 500
    level = FirstLevel(500)
    verdicts(level, values[: settled - 60], 0.0, 2.0)
    assert level.held and level.level(1000.0) is None
    again = FirstLevel(500)
    again.restore(json.loads(json.dumps(level.saved())))
    assert again.held and again.level(1000.0) is None  # held across a restart
    verdicts(level, values[settled - 60 : settled + 2 * 60], (settled - 60) / 2.0, 2.0)
    cut = level.level(1000.0)
    assert level.frozen and cut is not None and cut.samples == 240
    assert cut.mean == pytest.approx(0.10)
    verdicts(again, values[settled - 60 : settled + 2 * 60], (settled - 60) / 2.0, 2.0)
    assert again.level(1000.0) == cut


def _signed_units(signs: list[int], per_unit: int = 60) -> list[float]:
    """Units of `per_unit` verdicts at 0.20, each one binomial standard deviation above or
    below it (`signs`, +1 or -1), the level-to-be's four units 0.10."""
    sd = math.sqrt(per_unit * 0.16)
    out: list[float] = []
    for i, sign in enumerate([0] * MIN_UNITS + signs):
        defects = round(per_unit * 0.10) if i < MIN_UNITS else round(per_unit * 0.2 + sign * sd)
        out += [1.0] * defects + [0.0] * (per_unit - defects)
    return out


def test_a_suspicion_that_blocks_of_the_level_s_size_explain_fills_at_min_samples() -> None:
    """The same units after a low start, their deviations one binomial standard error each
    (no clustering within a unit), in two orders: alternating within blocks of the level's
    four units, the part after reads above the part before by more than `SUSPECT_Z` at the
    blocks' design effect too, and the level is cut where it began; the same sign through
    each block (clustering that spans units: a conversation's turns minutes apart), the
    blocks vary four times as much as their units say, the rise is no longer told apart
    from that, and the level fills with its first `min_samples` verdicts, as unheld."""
    blocks = [1, -1, -1, 1, 1, -1, 1, -1]
    spanning = [sign for sign in blocks for _ in range(MIN_UNITS)]
    alternating = [sign * (-1) ** i for sign in blocks for i in range(MIN_UNITS)]
    outcomes = []
    for signs in (alternating, spanning):
        values = _signed_units(signs)
        assert len(values) >= HOLD_FACTOR * 500
        level = FirstLevel(500)
        verdicts(level, values, 0.0, 2.0)
        full = level.level(1000.0)
        assert full is not None
        outcomes.append((level.frozen, full.samples))
    assert outcomes == [(True, MIN_UNITS * 60), (False, 500)]


def test_a_cut_level_counts_the_design_effect_of_every_unit_each_part_about_its_mean() -> None:
    """0.10 at 2 a second for two minutes, one of its units at 0.25 by chance, then 0.35:
    the before part's four units alone bound the design effect at about 5, which would hide
    the rise from the cut and leave its level unable to judge one; the stream's units, each
    part about its own mean, show no clustering. A state file without it counts the level's
    own units."""

    def unit(defects: int) -> list[float]:
        return [1.0] * defects + [0.0] * (60 - defects)

    healthy = unit(6) + unit(6) + unit(6) + unit(15)
    rise = [x for _ in range(8) for x in unit(21)]
    level = FirstLevel(500)
    verdicts(level, healthy + rise, 0.0, 2.0)
    cut = level.level(1000.0)
    assert level.frozen and cut is not None and cut.samples == 240
    assert cut.mean == pytest.approx(33 / 240)
    assert cut.error_units < 2.5 * cut.samples
    again = FirstLevel(500)
    again.restore(json.loads(json.dumps(level.saved())))
    assert again.level(1000.0) == cut
    # A state file from before the cut's design effect and the units after it were kept
    # says the level was cut.
    old = {**level.saved(), "frozen": True}
    del old["cut_design"], old["after"]
    again.restore(old)
    own = again.level(1000.0)
    assert own is not None and own.error_units > 4 * own.samples


def test_a_cut_level_measures_its_design_effect_on_the_units_after_the_cut() -> None:
    """0.10 at 2 a second for two minutes, one of its units at 0.25 by chance, then 0.35 in
    units one binomial standard deviation about it: cut soon after the rise, the level's
    design effect is what a dozen units bound, loosely (over 2); the units since the cut,
    each about their part's mean, measure it more closely as they come, near 1 by the end
    of the first hour; none past it counts, and a restart keeps them."""

    def unit(defects: int) -> list[float]:
        return [1.0] * defects + [0.0] * (60 - defects)

    healthy = unit(6) + unit(6) + unit(6) + unit(15)
    rise = [x for i in range(120) for x in unit(21 + (4 if i % 2 else -4))]
    values = healthy + rise
    level = FirstLevel(500)
    early_at = 900
    verdicts(level, values[:early_at], 0.0, 2.0)
    early = level.level(early_at / 2.0)
    assert level.frozen and early is not None and early.samples == 240
    again = FirstLevel(500)
    again.restore(json.loads(json.dumps(level.saved())))
    assert again.level(early_at / 2.0) == early
    late_at = 2 * int(SPAN_S - 100)
    verdicts(level, values[early_at:late_at], early_at / 2.0, 2.0)
    late = level.level(late_at / 2.0)
    assert late is not None and late.samples == 240 and late.mean == early.mean
    assert early.error_units / early.samples > 2.0
    assert 1.0 <= late.error_units / late.samples < 1.5
    units = len(level.after)
    verdicts(level, [1.0] * 100, SPAN_S + 1, 1.0)  # past its hour: nothing more counts
    assert len(level.after) == units


def test_kappa_is_measured_from_a_dozen_second_differences_of_hours() -> None:
    """Hourly buckets of verdicts without a conversation: a few hours are no measurement of
    their dispersion (the prior stands in for kappa, and a fresh rule's first level's
    design effect for that), fourteen are."""
    hours = {h: (3_600.0, 0.1) for h in range(5)}
    assert not kappa_measured(hours)
    assert not kappa_measured({})
    assert kappa_measured({h: (3_600.0, 0.1) for h in range(14)})


def test_a_fresh_rule_tempers_by_its_first_level_s_design_while_kappa_is_a_prior() -> None:
    """A history of three half-hours of verdicts without a conversation (kappa the prior of
    2, unmeasured) beside a first level whose units show a design effect of 1.2: the test
    tempers by 1.2, the stream's measurement, not by the prior; a history that measured
    its kappa tempers by the larger."""
    history = History(7 * 86_400.0, "none", 1, 90 * 86_400.0, 1_800.0)
    for half in range(3):
        verdicts_in = Moments(900, 90.0, 90.0)
        history.add(half * 1_800.0 + 1.0, verdicts_in, verdicts_in, rise=False)
    level = Level(0.10, 0.09, 120, 1.2 * 120)
    assert history.first(5_400.0, level).kappa == pytest.approx(1.2)
    measured = History(7 * 86_400.0, "none", 1, 90 * 86_400.0, 1_800.0)
    for bucket in range(20):  # buckets alternating 0.06 and 0.14: kappa far above 1.2
        defects = 90.0 + (36.0 if bucket % 2 else -36.0)
        verdicts_in = Moments(900, defects, defects)
        measured.add(bucket * measured.width_s + 1.0, verdicts_in, verdicts_in, rise=False)
    kappa = measured.first(20 * measured.width_s, level).kappa
    assert kappa > 5.0
