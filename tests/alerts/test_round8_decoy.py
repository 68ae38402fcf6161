"""Round 8's decoy (issue 88): failing verdicts under one model from a decoy source two
hours before a real regression of another model. The page names the decoy's model first;
once the later slice's rise outweighs the decoy's in the rise's newest window, a new
`Where` alert names the model that regressed.

The engine runs the default regression rule (`baseline: {}`) on a fake clock, fed counts
and the attribution's values every 60 s and judged every 60 s; streams are seeded."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.rule import Origin
from monitor.config import AlertBaseline, RegressionRule
from monitor.records.where import DIMENSIONS, Where
from monitor.telemetry import create_telemetry

pytestmark = pytest.mark.scorecard

RULE = RegressionRule(name="regression", evaluator="local_groundedness", baseline=AlertBaseline())
START = 1_767_225_600.0  # a Thursday, 00:00 UTC
STEP_S = 60.0
RATE = 0.1
MODELS = ("m1", "m2", "m3")
PODS = 4
PER_MIN = 57.0  # honest verdicts a minute, over every pod and model
DECOY_AT = START + 2 * 86_400
REAL_AT = DECOY_AT + 2 * 3600


def _count(
    engine: AlertEngine, origin: Origin, source: str, n: int, fails: int, now: float
) -> None:
    """`n` verdicts, `fails` failing, of `origin` (its model and sender) from `source`."""
    key = engine.count(0, origin, [n - fails, fails], None, now)
    assert key is not None and origin.model is not None
    values = ("1.0", origin.model, "/ask", source, *[""] * (len(DIMENSIONS) - 4))
    where = Where(values, sender=origin.sender)
    engine.attribution.observe(key, where, [n - fails, fails], None, now)


def _named(decoy_h: float, share: float, real_rate: float) -> list[tuple[float, str, str, str]]:
    """(minutes after the real rise, status, dimension, value) of every `Where` alert sent,
    up to three hours after it: honest pods spread over `MODELS` at `RATE`, from two days
    before the decoy; the decoy sends `share` of the volume under m2 from source `decoy`,
    90 % failing, for `decoy_h` hours; m3 fails at `real_rate` from `REAL_AT`."""
    rng = np.random.default_rng(5)
    now = START
    engine = AlertEngine([RULE], create_telemetry(), clock=lambda: now, evaluation_interval_s=60.0)
    out: list[tuple[float, str, str, str]] = []
    while now < REAL_AT + 3 * 3600:
        for pod in range(PODS):
            for model in MODELS:
                n = int(rng.poisson(PER_MIN / (PODS * len(MODELS))))
                rate = real_rate if model == "m3" and now >= REAL_AT else RATE
                if n:
                    origin = Origin("shop", model=model, sender=f"10.0.0.{pod}/pod-{pod}")
                    _count(engine, origin, "kb", n, int(rng.binomial(n, rate)), now)
        if DECOY_AT <= now < DECOY_AT + decoy_h * 3600:
            n = int(rng.poisson(60 * share))
            if n:
                origin = Origin("shop", model="m2", sender="6.6.6.6/decoy")
                _count(engine, origin, "decoy", n, int(rng.binomial(n, 0.9)), now)
        now += STEP_S
        for alert in engine.evaluate():
            if alert.labels["alertname"] == "regression_where":
                labels = alert.labels
                minutes = (now - REAL_AT) / 60
                out.append((minutes, alert.status, labels["dimension"], labels["value"]))
    return out


def test_a_decoy_that_rose_first_gives_the_where_alert_to_the_model_that_regressed() -> None:
    """The decoy pages and is named; it goes quiet after an hour; two hours after it began
    m3 triples its rate. The page that follows names m2 first (its rise still fills the
    older part of the rise), then a new `Where` alert names m3 within the hour (round 8:
    the whole rise's shares held m2 for 2 h 27 min after m3's rise)."""
    sent = _named(decoy_h=1.0, share=0.1, real_rate=0.3)
    assert sent[0][1:] == ("firing", "model", "m2") and sent[0][0] < 0, "the decoy is not named"
    named_m3 = [m for m, status, d, v in sent if status == "firing" and (d, v) == ("model", "m3")]
    assert named_m3, "m3 never named"
    assert 0 < named_m3[0] <= 60
    # Once named, m3 keeps the `Where` alert: the decoy's older rise does not take it back.
    after = [(status, d, v) for m, status, d, v in sent if m > named_m3[0]]
    assert ("firing", "model", "m2") not in after


def test_a_decoy_that_keeps_failing_is_screened_and_the_model_that_regressed_is_named() -> None:
    """The decoy never goes quiet: its 5 % of the volume, 90 % failing, outweighs m3's
    rise in every window, but its sender stands apart from the pods and is flagged; m2's
    and the decoy source's rises came from it (without it they do not rise), so neither is
    named over m3 once m3 rises (round 8: the decoy's model and source held the `Where`
    alert and m3 was never named for long)."""
    sent = _named(decoy_h=99.0, share=0.05, real_rate=0.3)
    firing = [(m, d, v) for m, status, d, v in sent if status == "firing"]
    named_m3 = [m for m, d, v in firing if (d, v) == ("model", "m3")]
    assert named_m3, "m3 never named"
    assert 0 < named_m3[0] <= 60
    assert all(v == "m3" for m, d, v in firing if m > named_m3[0]), firing
