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
    reads only a little above its two minutes before it when the level has held three
    times `min_samples` (the split's test counts the prior design effect of 2); the level
    is cut where the rise began all the same, counts the design effect its units showed,
    and the rise pages against the healthy rate (where a level filled with the rise
    paged nothing)."""
    runs = recomputed("fresh: default rule at 1/s", 4)
    assert math.isfinite(runs[3]["minutes"])
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
        if name.startswith(("healthy:", "fresh: healthy", "changeover: healthy"))
    ]
    assert sum(r["pages"] for runs in healthy for r in runs) == 0
    early = [r for name, runs in GOLDEN["cells"].items() for r in runs if r.get("early")]
    assert early == []
