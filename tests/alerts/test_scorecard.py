"""The regression rule's scorecard (`bench/scorecard.py`): its golden values
(`bench/scorecard.json`, quoted by docs/quality.md) are what the engine computes.

Each test recomputes runs of the scorecard's cells with the seeds the golden file was
written with and compares every number exactly: the runs are on simulated time from seeded
generators, so a change of the engine that moves any of them shows here, and the scorecard
and its docs are rerun with it (`python bench/scorecard.py --write-golden --write-docs`).
Beside the comparison each test asserts what the cell is there to show, on the run it
recomputed.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import pytest

from harness import scorecard
from harness.simulated_sidecar_tests import CELLS as SIDECAR_CELLS
from harness.simulated_sidecar_tests import NAMES, limit_s

GOLDEN: dict[str, Any] = json.loads(scorecard.GOLDEN.read_text())


# Statistical behaviour on simulated time: the scorecard tier (tests/conftest.py).
pytestmark = pytest.mark.scorecard


def recomputed(name: str, trials: int = 1) -> list[dict[str, float]]:
    """The first `trials` runs of the cell named `name` (its row and name, as the golden
    file keys it), and the golden file's same runs, compared."""
    cell = next(c for c in scorecard.cells(GOLDEN["healthy_days"]) if scorecard.key(c) == name)
    engine_log = logging.getLogger("monitor")
    level = engine_log.level
    engine_log.setLevel(logging.ERROR)  # the engine logs every page; others' tests read logs
    try:
        runs = scorecard.run_cell(cell, trials, GOLDEN["seed"])
    finally:
        engine_log.setLevel(level)
    golden = GOLDEN["cells"][name][:trials]
    # As text: NaN (not paged) equals NaN there.
    assert json.dumps(runs, sort_keys=True) == json.dumps(golden, sort_keys=True), (name, runs)
    return runs


def test_a_fresh_rule_pages_a_rise_from_its_third_minute_against_the_healthy_rate() -> None:
    """The default rule started on 0.10 at 10 verdicts a second that rises x3 from its 3rd
    minute: its first verdicts (`FirstLevel`, four 30 s units) are its level, the rise is
    judged against them, and the page states the healthy rate it fired against; the
    compressed rule (a 3-minute baseline) too."""
    for name in ("fresh: default rule at 10/s", "fresh: compressed rule at 10/s"):
        (run,) = recomputed(name)
        assert run["minutes"] < 5
        assert run["expected"] == pytest.approx(0.10, abs=0.03)


def test_a_rise_not_yet_told_apart_when_the_first_level_would_fill_is_cut_out() -> None:
    """The default rule at 2 verdicts a second: the x3 from the 3rd minute reads under 3.5
    standard errors above the two minutes before it when 500 verdicts have come in, in this
    run; the level keeps filling while the change is suspected, is cut where the rise began
    once it is told apart, and the rise pages against the healthy rate."""
    (run,) = recomputed("fresh: default rule at 2/s")
    assert math.isfinite(run["minutes"])
    assert run["expected"] == pytest.approx(0.10, abs=0.03)


def test_a_rise_still_suspected_when_the_hold_ends_is_cut_out_not_filled_in() -> None:
    """The default rule at 1 verdict a second: in the fourth run the x3 from the 3rd minute
    reads only a little above its two minutes before it (108 verdicts: at the split's
    prior design effect of 2 no length of the rise takes it to 3.5 standard errors); once
    the verdicts since the split hold three times those before it the split is decided,
    and still suspected, the level is cut where the rise began, counts the design effect
    its first hour's units show, and the rise pages against the healthy rate within 25
    minutes (where a level filled with the rise paged nothing, and one cut at the hold's
    bound of three times `min_samples`, 25 minutes in, paged 37 minutes after the rise)."""
    runs = recomputed("fresh: default rule at 1/s", 4)
    assert runs[3]["minutes"] < 25
    assert runs[3]["expected"] == pytest.approx(0.10, abs=0.03)


def test_a_rule_whose_window_holds_fewer_than_min_samples_pages_on_its_evidence() -> None:
    """The compressed rule (a 30 s window, `min_samples` 100) at 2 verdicts a second: its
    window never holds 100 verdicts, and the sequential test's evidence, which reaches past
    the window, does: the x3 from the 3rd minute pages within minutes, against the healthy
    rate."""
    runs = recomputed("fresh: compressed rule at 2/s", 2)
    assert runs[1]["minutes"] < 2
    assert runs[1]["expected"] == pytest.approx(0.10, abs=0.03)


def test_a_fresh_rule_on_a_healthy_clustered_stream_does_not_page() -> None:
    """Fresh starts on conversations of ICC 0.3 without ids (a design effect near 5), a
    daily cycle and traffic x10 at 1 a second: the first level's error and the test's
    dispersion count its verdicts' design effect, and a level read low stands in for the
    first hour only: no page in 4 h of any start."""
    (run,) = recomputed("fresh: healthy, ICC 0.3, no ids, daily cycle, at 1/s")
    assert run["starts"] == scorecard.FRESH_STARTS
    assert run["pages"] == 0


def test_a_doubling_of_independent_verdicts_pages_near_the_information_limit() -> None:
    """0.35 doubling at 10 a second after four weeks of history: the page within twice the
    limit of a test that knew both rates, and none before the rise."""
    (run,) = recomputed("plain: 0.35 x2 at 10/s, no id")
    assert run["early"] == 0.0
    assert math.isfinite(run["ratio"])
    assert run["ratio"] <= 2.0


def test_a_doubling_from_four_days_of_history_pages_near_the_limit() -> None:
    """0.10 doubling at 10 a second after four days of history, the run's own: kappa's
    allowance for its own error is most of a young history's kappa, and the bettors of a
    rise near their null point pay little of it (their guard band covers it), so the page
    comes within 1.5 times the limit (the second run paged at 1.56 times where every bettor
    divided by kappa), none before the rise."""
    for run in recomputed("young: 4 days, x2 at 10/s", 2):
        assert run["early"] == 0.0
        assert run["ratio"] <= 1.5
        assert run["expected"] == pytest.approx(0.10, abs=0.01)


def test_a_switch_after_a_day_of_shadow_keeps_the_translated_level() -> None:
    """An evaluator's switch after four weeks of revision "a" and a day of "b" scoring a
    fifth of the records in shadow, then x2 a quarter hour later: judged against the level
    of "a" translated by the offset measured in shadow (0.15, never an interim level), and
    paged, none before the rise."""
    (run,) = recomputed("changeover: a day of shadow at 0.2, x2 a quarter hour after the switch")
    assert run["early"] == 0.0
    assert math.isfinite(run["ratio"])
    assert run["expected"] == pytest.approx(0.15, abs=0.01)
    assert run["interim"] == 0.0


def test_the_golden_file_holds_every_cell_and_its_healthy_rows_never_paged() -> None:
    names = {scorecard.key(c) for c in scorecard.cells(GOLDEN["healthy_days"])}
    assert set(GOLDEN["cells"]) == names
    healthy = [
        runs
        for name, runs in GOLDEN["cells"].items()
        if name.startswith(
            ("healthy:", "fresh: healthy", "changeover: healthy", "upgrade: healthy")
        )
    ]
    assert sum(r["pages"] for runs in healthy for r in runs) == 0
    early = [r for name, runs in GOLDEN["cells"].items() for r in runs if r.get("early")]
    assert early == []


def test_a_monitor_upgrade_that_changed_the_detector_pages_a_rise_soon_after_its_switch() -> None:
    """A release whose evaluator reads the service otherwise (a judge replacing the detector,
    the detector's threshold moved) shadows itself for a day, the switch at 02:00: a x2 of
    the true rate a quarter hour later pages within twice the limit, none before; every cell
    of the row's golden runs within it at the median, and the same release without the
    previous revision at night pages later than that or not at all."""
    for name in (
        "upgrade: detector -> judge at night, x2 a quarter hour after",
        "upgrade: moved threshold -> detector at night, x2 a quarter hour after",
    ):
        (run,) = recomputed(name)
        assert run["early"] == 0.0
        assert run["ratio"] <= 2.0
    timed = {
        name: sorted(r["ratio"] for r in runs)
        for name, runs in GOLDEN["cells"].items()
        if name.startswith("upgrade:") and "ratio" in runs[0]
    }
    shadowed = {n: r for n, r in timed.items() if "without the previous" not in n}
    assert len(shadowed) == 8
    assert all(r[len(r) // 2] <= 2.0 for r in shadowed.values()), shadowed
    without = [r for n, r in timed.items() if "without the previous" in n]
    assert len(without) == 2 and all(r[len(r) // 2] > 2.0 for r in without), without


def test_a_healthy_upgrade_pages_nothing() -> None:
    """The day shadowing itself and six hours after the switch, no rise: no page."""
    (run,) = recomputed("upgrade: healthy: detector -> judge at night")
    assert run["pages"] == 0


def test_a_night_switch_to_a_revision_of_another_slope_pages_a_rise_3_h_later() -> None:
    """After a day in shadow, a switch at 02:00 from the judge to the detector (which reads
    the day's swing with a slope of 0.45 where the judge's is 0.75): the offset measured by
    the hour (`Slope`) expects what the detector reads at night, and a x2 of the true rate
    3 h later pages within twice the limit."""
    (run,) = recomputed("night: judge -> detector, x2 3 h after")
    assert run["early"] == 0.0
    assert run["ratio"] <= 2.0
    medians = [
        sorted(r["ratio"] for r in runs)[len(runs) // 2]
        for name, runs in GOLDEN["cells"].items()
        if name.startswith("night:")
    ]
    assert len(medians) == 3 and max(medians) <= 2.0


# -- the `sidecar tests` row: what the alerting end-to-end tests once asserted in real time
# (`harness/simulated_sidecar_tests.py`); those tests keep the wiring.

SIDECAR = "sidecar tests: "


def test_a_fresh_compressed_rule_is_quiet_a_burst_is_no_page_and_a_rise_pages_soon() -> None:
    """The compressed rule (30 s window, 3 min baseline of 240 verdicts, a false page an
    hour, a look every second) started fresh on 0.20 at 8 a second: 240
    identical failing requests (one fingerprint) once it can judge are one piece of
    evidence and page nothing; a x2.5 from 200 s pages within 3 times its information
    limit, against the healthy rate, in every golden run; 20 minutes of the same healthy
    stream with the burst page nothing in any start."""
    name = SIDECAR + NAMES["burst"]
    (run,) = recomputed(name)
    assert run["early"] == 0.0 and run["ratio"] <= 3.0
    runs = GOLDEN["cells"][name]
    assert len(runs) >= 9
    assert all(r["early"] == 0.0 and r["ratio"] <= 3.0 for r in runs), runs
    assert all(abs(r["expected"] - 0.20) < 0.03 for r in runs), runs
    (quiet,) = recomputed(SIDECAR + NAMES["burst healthy"])
    assert quiet["pages"] == 0


def test_a_young_changeover_is_quiet_and_a_rise_after_it_pages() -> None:
    """The compressed rule 45 s into a fresh start, restarted (5 s) with a stricter revision
    of the evaluator that reads the healthy service at 0.36: 20 minutes of healthy traffic
    after the switch page nothing in any start; a x2.5 2 minutes after the switch pages
    within 10 times the limit, against the new revision's level, in the runs recomputed
    and in 8 of the 9 golden runs. The ninth is not paged: its level takes the rise in (a
    young history's changeover, left to issue 103's fresh-start work; the golden run keeps
    it in view)."""
    name = SIDECAR + NAMES["changeover"]
    for run in recomputed(name, 2):
        assert run["early"] == 0.0 and run["ratio"] <= 10.0
        assert abs(run["expected"] - (0.2 + 0.8 * 7 / 36)) < 0.05
    runs = GOLDEN["cells"][name]
    assert all(r["early"] == 0.0 for r in runs)
    assert sum(r["ratio"] <= 10.0 for r in runs) >= len(runs) - 1, runs
    (quiet,) = recomputed(SIDECAR + NAMES["changeover healthy"])
    assert quiet["pages"] == 0


def test_default_settings_on_short_windows_are_quiet_and_page_a_rise() -> None:
    """The rule of `tests/alerts/test_alerts_regression_e2e.py` (default settings, 30 s and
    3 min windows, an evaluation every 15 s) fresh on 0.20 at 24 a second: a x2.5 from
    90 s pages within 10 times the limit (under 40 s) in every golden run, none before;
    20 healthy minutes page nothing."""
    name = SIDECAR + NAMES["regression"]
    (run,) = recomputed(name)
    assert run["early"] == 0.0 and run["ratio"] <= 10.0
    assert all(r["early"] == 0.0 and r["ratio"] <= 10.0 for r in GOLDEN["cells"][name])
    (quiet,) = recomputed(SIDECAR + NAMES["regression healthy"])
    assert quiet["pages"] == 0


def test_the_fleet_rule_on_a_healthy_fleet_pages_nothing() -> None:
    """`FLEET_RULE` judging a healthy fleet's verdicts (0.10 at 12 a second, read per
    second, as the replicas of `tests/alerts/test_alerts_fleet_e2e.py` read Prometheus):
    no page in 20 minutes of any start."""
    (run,) = recomputed(SIDECAR + NAMES["fleet healthy"])
    assert run["pages"] == 0


def test_a_worse_version_pages_for_its_cohort_only_and_equal_versions_are_quiet() -> None:
    """The cohort rule of `tests/alerts/test_alerts_cohorts_e2e.py` (by version, defaults)
    on two versions at 1 a second each, v2 at x2.5 from its first request: v2 paged within
    300 of its verdicts (what that test sent of the rise) in every golden run, v1 never;
    the same versions at the same rate page nothing in 20 minutes."""
    name = SIDECAR + NAMES["cohorts"]
    rule, feed, _ = SIDECAR_CELLS[name.removeprefix(SIDECAR)]
    # v2's verdicts: one a second.
    most = 300.0 / limit_s(rule, feed)
    (run,) = recomputed(name)
    assert run["other"] == 0.0 and run["ratio"] <= most
    assert all(r["other"] == 0.0 and r["ratio"] <= most for r in GOLDEN["cells"][name])
    (quiet,) = recomputed(SIDECAR + NAMES["cohorts healthy"])
    assert quiet["pages"] == 0


def test_every_healthy_sidecar_test_stream_is_quiet_in_every_golden_start() -> None:
    healthy = [
        runs
        for name, runs in GOLDEN["cells"].items()
        if name.startswith(SIDECAR) and "pages" in runs[0]
    ]
    assert len(healthy) == 5
    assert all(len(runs) >= 9 and sum(r["pages"] for r in runs) == 0 for runs in healthy)
