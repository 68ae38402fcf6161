"""Round 9's flagged forgers (issue 104, item 3): a flagged forger cannot make a page. Its
hours are expected at its clean rate of that hour of the day, an hour it was never seen
clean in at what it sends in it now (never at another hour's rate); a page does not
resolve while the rate is still risen because a forger passed into its failing hour; and
the Where of a page is the model that regressed, not a decoy's.

The engine runs the default regression rule (`baseline: {}`) on a fake clock, fed counts
every 60 s and judged every 60 s; streams are seeded."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.rule import Origin
from monitor.records.where import DIMENSIONS, Where
from monitor.telemetry import create_telemetry
from tests.alerts.honest_pods import FORGER, PODS, RATE, RULE, START, count_honest

pytestmark = pytest.mark.scorecard

HOUR_S = 3600.0
PER_MIN = 60.0
RISE_H = 60.0  # day 3, 12:00


def _pages(since_h: float, until_h: float, seed: int = 71) -> tuple[list[float], float | None]:
    """(hours from the rise to each page's start, hours from the rise to the first resolve
    after it; None: none) up to `until_h` hours from `START`: `PODS` honest pods at `RATE`
    (doubled from `RISE_H`), and from `since_h` a forger sending a fifth of the volume,
    all failing in even hours and all passing in odd ones."""
    honest_rng, forger_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    now = START
    engine = AlertEngine([RULE], create_telemetry(), clock=lambda: now, evaluation_interval_s=60.0)
    pages: list[float] = []
    resolved: float | None = None
    firing = False
    while now < START + until_h * HOUR_S:
        hour = (now - START) / HOUR_S
        rate = 2 * RATE if hour >= RISE_H else RATE
        count_honest(engine, honest_rng, PER_MIN * 0.8, PODS, rate, now)
        n = int(forger_rng.poisson(PER_MIN * 0.2))
        if hour >= since_h and n:
            fails = n if int(now // HOUR_S) % 2 == 0 else 0
            engine.count(0, Origin("shop", sender=FORGER), [n - fails, fails], None, now)
        now += 60.0
        fires = any(alert.status == "firing" for alert in engine.evaluate())
        if fires and not firing:
            pages.append(hour - RISE_H)
        if firing and not fires and hour >= RISE_H and resolved is None:
            resolved = hour - RISE_H
        firing = fires
    return pages, resolved


def test_an_alternating_forgers_rise_pages_once_and_holds_while_risen() -> None:
    """A forger flagged from the first day, a fifth of the volume alternating failing and
    passing hours; the honest rate doubles on the third day and stays doubled: nothing
    pages before, the rise pages within the hour, and the page holds for the five risen
    hours (round 9: it resolved as the forger passed into its failing hour, 1 h 59 min in,
    and paged twice more)."""
    pages, resolved = _pages(0.0, RISE_H + 5)
    assert len(pages) == 1, pages
    assert 0 < pages[0] < 1
    assert resolved is None, f"resolved {resolved:.2f} h into the rise"


def test_a_forger_joining_a_settled_history_pages_only_as_it_arrives() -> None:
    """The same forger joining on the second day at 06:00: its first failing hour pages as
    a new sender failing all it sends must (a new pod of a broken version), but once seen
    clean it pages no more before the rise, and the rise pages (round 9: its failing hours
    were expected at its passing hours' rate, a page every other hour, 16 before the
    rise; then its second failing hour paged: its first passing hour, held out by the
    first page, counted as seen clean only from the next hour's start)."""
    arrives_h = 30.0
    pages, _ = _pages(arrives_h, RISE_H + 2)
    before = [p + RISE_H for p in pages if p <= 0]
    assert len(before) == 1 and arrives_h <= before[0] < arrives_h + 1, before
    assert [p for p in pages if p > 0], "the rise never paged"


MODELS = ("m1", "m2", "m3")
DECOY_AT = START + 2 * 86_400
REAL_AT = DECOY_AT + 2 * HOUR_S
GATEWAY = "10.9.9.9"


def _first_named(decoy: str) -> tuple[str, str]:
    """(dimension, value) the first `Where` alert after the real rise names: honest pods
    behind `GATEWAY` (each its own resource) over `MODELS` at `RATE`; from `DECOY_AT`,
    for an hour, `decoy` (a sender key) sends a tenth of the volume under m2 from source
    `decoy`, 90 % failing; from `REAL_AT` m3 fails at three times `RATE`."""
    rng = np.random.default_rng(5)
    now = START
    engine = AlertEngine([RULE], create_telemetry(), clock=lambda: now, evaluation_interval_s=60.0)

    def count(origin: Origin, source: str, n: int, fails: int) -> None:
        key = engine.count(0, origin, [n - fails, fails], None, now)
        assert key is not None and origin.model is not None
        values = ("1.0", origin.model, "/ask", source, *[""] * (len(DIMENSIONS) - 4))
        where = Where(values, sender=origin.sender)
        engine.attribution.observe(key, where, [n - fails, fails], None, now)

    while now < REAL_AT + 3 * HOUR_S:
        for pod in range(PODS):
            for model in MODELS:
                n = int(rng.poisson(57.0 / (PODS * len(MODELS))))
                rate = 3 * RATE if model == "m3" and now >= REAL_AT else RATE
                if n:
                    origin = Origin("shop", model=model, sender=f"{GATEWAY}/~pod{pod}")
                    count(origin, "kb", n, int(rng.binomial(n, rate)))
        if DECOY_AT <= now < DECOY_AT + HOUR_S:
            n = int(rng.poisson(6.0))
            if n:
                count(
                    Origin("shop", model="m2", sender=decoy), "decoy", n, int(rng.binomial(n, 0.9))
                )
        now += 60.0
        for alert in engine.evaluate():
            labels = alert.labels
            if labels["alertname"] == "regression_where" and now > REAL_AT:
                if alert.status == "firing":
                    return labels["dimension"], labels["value"]
    return "", ""


@pytest.mark.parametrize("decoy", [f"{GATEWAY}/~decoy", "6.6.6.6/decoy"])
def test_a_decoy_two_hours_before_a_regression_does_not_take_its_where(decoy: str) -> None:
    """A decoy (behind the pods' gateway, or from an address of its own) fails 90 % of a
    tenth of the volume under m2 for an hour; two hours after it began, m3 triples its
    rate. The real page's first `Where` names m3: the decoy's verdicts, flagged, are left
    out of the slices compared as the screen flags them, those of its first bucket too."""
    assert _first_named(decoy) == ("model", "m3")
