"""Round 8's flagged forgers against the level and the season (issue 88, item 1): they are
learned from screened buckets as kappa is, so a flagged sender's forged hours teach the
rule neither a bad hour of the day nor a good level; the rate judged still holds its
verdicts, expected at its own rates while it sends.

The engine runs the default regression rule (`baseline: {}`) on a fake clock, fed counts
every 60 s and judged every 60 s; streams are seeded."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.alerts.rule import Origin
from monitor.evidence.senders import Senders
from monitor.telemetry import create_telemetry
from tests.alerts.honest_pods import FORGER, PODS, RATE, RULE, START, count_honest

pytestmark = pytest.mark.scorecard

DAY_S = 86_400.0
STEP_S = 60.0
PER_MIN = 60.0


def _run(
    forger: tuple[float, float, float, float] | None, rise: float | None, until: float
) -> list[float]:
    """The times of every evaluation at which an alert fires, up to `until` or the first
    after `rise`: honest pods at `RATE` from `START` (doubled from `rise`); `forger`: (share
    of the honest volume, its failing rate, from, until) sends from `FORGER` in the hour
    03:00 only when its rate is 1, else in every hour."""
    honest_rng, forger_rng = np.random.default_rng(21), np.random.default_rng(22)
    now = START
    engine = AlertEngine([RULE], create_telemetry(), clock=lambda: now, evaluation_interval_s=60.0)
    firing: list[float] = []
    while now < until:
        rate = 2 * RATE if rise is not None and now >= rise else RATE
        count_honest(engine, honest_rng, PER_MIN, PODS, rate, now)
        if forger is not None:
            share, fails, since, stop = forger
            at_three = int(now // 3600) % 24 == 3
            if since <= now < stop and (fails < 1 or at_three):
                n = int(forger_rng.poisson(PER_MIN * share))
                failing = int(forger_rng.binomial(n, fails))
                engine.count(0, Origin("shop", sender=FORGER), [n - failing, failing], None, now)
        now += STEP_S
        if any(alert.status == "firing" for alert in engine.evaluate()):
            firing.append(now)
            if rise is not None and now > rise:
                break
    return firing


def _minutes_to_page(forged_days: int) -> float:
    """Minutes from a doubling of the honest rate at 03:00 on day 3 to the page the rise
    starts (inf: none in 6 h), with a forger sending a fifth of the volume all failing at
    03:00 on `forged_days` days before it (quiet on day 3)."""
    rise = START + 3 * DAY_S + 3 * 3600
    forger = (0.2, 1.0, START, START + forged_days * DAY_S) if forged_days else None
    firing = _run(forger, rise, rise + 6 * 3600)
    assert not [t for t in firing if rise - 3600 <= t <= rise], "firing when the rise began"
    return min(((t - rise) / 60 for t in firing if t > rise), default=math.inf)


def test_a_forgers_failing_hour_does_not_teach_the_season_that_hour() -> None:
    """A forger flagged for failing all its verdicts at 03:00 on three days is left out of
    the season: a doubling of the honest rate at 03:00 on the fourth pages within 1.5
    times the same doubling without the forger (learned from all verdicts, the season
    expected the forger's 03:00 and the doubling paged only past 04:00)."""
    control = _minutes_to_page(0)
    forged = _minutes_to_page(3)
    assert control < 60
    assert forged <= 1.5 * control


def test_a_forger_that_passed_for_days_then_stops_leaves_no_rise() -> None:
    """A forger sending all passing verdicts, 0.7 times the honest volume (41 % of all),
    for two and a half days (flagged: it stands apart) then going quiet: the level learned
    without it is the honest rate, and nothing pages in the six hours after it stops
    (learned from all verdicts, the level read the forger's passes as the service's, and
    the honest rate paged as a rise 103 min after the forger stopped)."""
    stop = START + 2 * DAY_S + 12 * 3600
    firing = _run((0.7, 0.0, START, stop), None, stop + 6 * 3600)
    after = [(t - stop) / 60 for t in firing if t > stop]
    assert not after, f"paged {after[0]:.0f} min after it stopped"


def _canary_minutes(senders: bool) -> float:
    """Minutes from the rise of one pod of `PODS` (a canary, at three times `RATE` from
    the start, so that it stands apart; twice that from the second day at 12:00) to its
    page (inf: none in 3 h); `senders`: each pod its own sender, else none known."""
    rng = np.random.default_rng(23)
    now = START
    engine = AlertEngine([RULE], create_telemetry(), clock=lambda: now, evaluation_interval_s=60.0)
    rise = START + DAY_S + 12 * 3600
    while now < rise + 3 * 3600:
        for pod, n in enumerate(rng.multinomial(rng.poisson(PER_MIN), [1 / PODS] * PODS)):
            rate = RATE if pod else 3 * RATE * (2 if now >= rise else 1)
            fails = int(rng.binomial(n, rate))
            sender = f"10.0.0.{pod}/pod-{pod}" if senders else None
            engine.count(0, Origin("shop", sender=sender), [n - fails, fails], None, now)
        now += STEP_S
        if any(alert.status == "firing" for alert in engine.evaluate()):
            assert now > rise, "a page before the canary's rise"
            return (now - rise) / 60
    return math.inf


def test_a_flagged_canary_pods_rise_still_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """A canary pod that stands apart from the others (its rate three times theirs) is
    flagged; its verdicts are still in the rate judged, expected at its own clean rate,
    so its rise pages within 1.5 times the same verdicts from no known sender."""
    flagged: set[str] = set()
    screen = Senders.screen

    def spied(self: Senders) -> None:
        screen(self)
        flagged.update(self.flagged)

    monkeypatch.setattr(Senders, "screen", spied)
    unscreened = _canary_minutes(senders=False)
    screened = _canary_minutes(senders=True)
    assert flagged == {"10.0.0.0/pod-0"}
    assert unscreened < 60
    assert screened <= 1.5 * unscreened


def test_a_restart_keeps_the_flagged_senders_share() -> None:
    """A flagged forger (a fifth of the volume, failing 90 % of it) that stopped 5 minutes
    before the rule's state was saved: the engine restored from the state file expects
    what the engine that went on expects (the forger's share of the current window, still
    in the rate judged), minute by minute for the window after the restart (restored
    without that share, it expected the honest level alone for those minutes)."""
    restart = START + 2 * DAY_S + 12 * 3600
    honest_rng, forger_rng = np.random.default_rng(24), np.random.default_rng(25)
    now = START
    engine = AlertEngine([RULE], create_telemetry(), clock=lambda: now, evaluation_interval_s=60.0)
    while now < restart:
        count_honest(engine, honest_rng, PER_MIN, PODS, RATE, now)
        if now < restart - 300:
            n = int(forger_rng.poisson(PER_MIN * 0.25))
            failing = int(forger_rng.binomial(n, 0.9))
            engine.count(0, Origin("shop", sender=FORGER), [n - failing, failing], None, now)
        now += STEP_S
        engine.evaluate()
    restored = AlertEngine(
        [RULE], create_telemetry(), clock=lambda: now, evaluation_interval_s=60.0
    )
    restored.restore(json.loads(json.dumps(engine.snapshot())))
    first: list[float] = []
    for _ in range(30):
        for each in (engine, restored):
            count_honest(each, np.random.default_rng(int(now)), PER_MIN, PODS, RATE, now)
        now += STEP_S
        expected = []
        for each in (engine, restored):
            each.evaluate()
            state: RegressionState = next(iter(each._entries.values())).state
            assert state.judging.expected is not None
            expected.append(state.judging.expected.mean)
        assert expected[1] == pytest.approx(expected[0], abs=1e-6)
        first = first or expected
    assert first[0] > RATE + 0.05, "the forger's share was out of the window already"
