"""Issue 85's acceptance, held on the scorecard's golden values (`bench/scorecard.json`, which
`tests/alerts/test_scorecard.py` holds to what the engine computes and docs/quality.md
quotes): a golden file rewritten with a cell past its bound fails here.

- independent verdicts (no ids) at 1 and 10 a second, base 0.10 and 0.35: x1.5 and x2 paged
  at a median within 1.5 times the information limit (x1.5 at 1 a second within 2 times);
- the slow rise 0.10 -> 0.15 at 0.2 a second paged at the median;
- the id corners as the issue found them or better (x2: a constant id 1.89 times, user ids
  0.95 times);
- a fresh start with a x3 rise from its 3rd minute paged in every trial, the expectation
  it states at the healthy rate 0.10;
- an evaluator's switch after a day of shadow (at the default share of 0.2): x2 a quarter
  hour after it paged at a median within 1.5 times the limit, against the translated level;
  without shadow or previous: x2 in the change's first hour paged in every trial within 3
  times at the median, each page saying it judged on an interim level; no switch pages by
  itself.

A cell the issue's decisions leave open is a strict `xfail` saying which: it fails here once
the cell meets its bound, so that its mark goes with the change that met it. Healthy rows'
false pages and pages before a rise are held by test_scorecard.py."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from harness import scorecard

CELLS: dict[str, list[dict[str, float]]] = json.loads(scorecard.GOLDEN.read_text())["cells"]

# The ×1.5 decision (issue 85, open): the rule's null point, half of `min_increase`, caps the
# cell near 1.8 times the limit at a base of 0.10.
X15_DECISION = "issue 85: the x1.5 decision at base 0.10 (the null point at min_increase / 2)"
# The 1 and 2 a second fresh start (issue 85, open): the first level holds only the
# verdicts of the 2 minutes before the rise, too few to judge a x3 against at the floor of
# the design effect.
FRESH_DECISION = "issue 85: a fresh start's first minutes at 1 and 2 a second (decision open)"


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _plain(name: str, bound: float, open_decision: str | None = None) -> Any:
    marks = [pytest.mark.xfail(reason=open_decision, strict=True)] if open_decision else []
    return pytest.param(f"plain: {name}, no id", bound, marks=marks, id=name)


PLAIN = [
    _plain("0.10 x1.5 at 1/s", 2.0),
    _plain("0.10 x2 at 1/s", 1.5),
    _plain("0.10 x1.5 at 10/s", 1.5, X15_DECISION),
    _plain("0.10 x2 at 10/s", 1.5),
    _plain("0.35 x1.5 at 1/s", 2.0),
    _plain("0.35 x2 at 1/s", 1.5),
    _plain("0.35 x1.5 at 10/s", 1.5),
    _plain("0.35 x2 at 10/s", 1.5),
]


@pytest.mark.parametrize(("cell", "bound"), PLAIN)
def test_independent_verdicts_page_near_the_information_limit(cell: str, bound: float) -> None:
    ratio = _median([r["ratio"] for r in CELLS[cell]])
    assert ratio <= bound, f"{cell}: median {ratio:.2f}x the limit, bound {bound}x"


def test_a_slow_rise_at_a_fifth_of_a_verdict_a_second_pages() -> None:
    ratio = _median([r["ratio"] for r in CELLS["slow: 0.10 -> 0.15 at 0.2/s"]])
    assert math.isfinite(ratio)


@pytest.mark.parametrize(("kind", "found"), [("constant", 1.89), ("user", 0.95)])
def test_id_corners_page_as_the_issue_found_them_or_sooner(kind: str, found: float) -> None:
    ratio = _median([r["ratio"] for r in CELLS[f"corners: x2 at 1/s, ids: {kind}"]])
    assert ratio <= found


def _fresh(rule: str, rate: str, open_decision: str | None = None) -> Any:
    marks = [pytest.mark.xfail(reason=open_decision, strict=True)] if open_decision else []
    return pytest.param(f"fresh: {rule} at {rate}", marks=marks, id=f"{rule} at {rate}")


@pytest.mark.parametrize(
    "cell",
    [
        _fresh("default rule", "1/s", FRESH_DECISION),
        _fresh("default rule", "2/s", FRESH_DECISION),
        _fresh("default rule", "10/s"),
        _fresh("compressed rule", "1/s", FRESH_DECISION),
        _fresh("compressed rule", "2/s", FRESH_DECISION),
        _fresh("compressed rule", "10/s"),
    ],
)
def test_a_fresh_start_pages_a_rise_from_its_third_minute_against_the_healthy_rate(
    cell: str,
) -> None:
    runs = CELLS[cell]
    paged = [r for r in runs if math.isfinite(r["minutes"])]
    assert len(paged) == len(runs), f"{cell}: {len(paged)} of {len(runs)} paged"
    assert all(r["expected"] == pytest.approx(0.10, abs=0.03) for r in paged), paged


def _changeover(name: str) -> list[dict[str, float]]:
    return CELLS[f"changeover: {name}"]


def test_a_doubling_a_quarter_hour_after_a_switch_with_a_day_of_shadow_pages_near_the_limit() -> (
    None
):
    runs = _changeover("a day of shadow at 0.2, x2 a quarter hour after the switch")
    ratio = _median([r["ratio"] for r in runs])
    assert ratio <= 1.5, f"median {ratio:.2f}x the limit"
    # Against the level of the revision replaced, translated by the offset measured in shadow.
    assert all(r["expected"] == pytest.approx(0.15, abs=0.02) for r in runs), runs
    assert not any(r["interim"] for r in runs)


def test_a_doubling_in_a_changes_first_hour_without_shadow_or_previous_pages_within_3x() -> None:
    runs = _changeover("neither shadow nor previous, x2 20 min after")
    assert all(math.isfinite(r["ratio"]) for r in runs), runs
    ratio = _median([r["ratio"] for r in runs])
    assert ratio <= 3.0, f"median {ratio:.2f}x the limit"
    assert all(r["interim"] for r in runs), "a page on an interim level did not say so"


def test_no_switch_pages_by_itself() -> None:
    healthy = [
        r for name, runs in CELLS.items() if name.startswith("changeover: healthy") for r in runs
    ]
    assert len(healthy) >= 3
    assert sum(r["pages"] for r in healthy) == 0
