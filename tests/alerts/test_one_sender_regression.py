"""A regression rule robust to one sender: a sender that sends a share of a service's
verdicts in hours that swing (all failing, then all passing; or at twice the service's
mean, then none), so that the dispersion the history measures of itself (`kappa`, the
`excess`) follows its hours, must not delay the page of a real doubling beyond a small
factor; honest senders change nothing of what the history measures.

The engine runs the default regression rule (`baseline: {}`) on a fake clock, fed counts
every 10 s and judged every 60 s; streams are seeded."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.rule import Origin
from monitor.component import Evaluated
from monitor.evidence import History, Moments
from monitor.evidence.senders import (
    ADMIT_VERDICTS,
    MAX_ROWS,
    MAX_SENDERS,
    SCREEN_BUCKETS,
    Senders,
)
from monitor.records import CLIENT_ADDRESS, INSTANCE_ID, RagRecord
from monitor.telemetry import create_telemetry
from tests.alerts.honest_pods import FORGER, PODS, RATE, RULE, START, count_honest
from tests.alerts.test_alerts import verdict

STEP_S = 10.0
PER_S = 1.0


def _minutes_to_page(share: float, forgery: str | None, *, warmup_days: float = 2.0) -> float:
    """Minutes from a doubling of the rate (after `warmup_days`) to its page, with
    `1 - share` of the volume sent by `PODS` honest senders and `share` by `FORGER`
    (`forgery`: `"swing"`, all failing in even hours and all passing in odd ones;
    `"twice"`, at twice the service's rate in even hours and none failing in odd ones;
    None: no forger, the honest verdicts the same); inf: none within six hours. A page
    before the doubling fails the test."""
    honest_rng, forger_rng = np.random.default_rng(11), np.random.default_rng(12)
    now = START
    engine = AlertEngine([RULE], create_telemetry(), clock=lambda: now, evaluation_interval_s=60.0)

    def second(rate: float) -> None:
        count_honest(engine, honest_rng, PER_S * STEP_S * (1 - share), PODS, rate, now)
        n = int(forger_rng.poisson(PER_S * STEP_S * share))
        if forgery is None or not n:
            return
        even = int(now // 3600) % 2 == 0
        if forgery == "swing":
            fails = n if even else 0
        else:
            fails = int(forger_rng.binomial(n, 2 * RATE)) if even else 0
        engine.count(0, Origin("shop", sender=FORGER), [n - fails, fails], None, now)

    rise = START + warmup_days * 86_400
    while now < rise + 6 * 3600:
        second(2 * RATE if now >= rise else RATE)
        now += STEP_S
        if now % 60 == 0 and any(alert.status == "firing" for alert in engine.evaluate()):
            assert now > rise, "a page before the doubling"
            return (now - rise) / 60
    return math.inf


@pytest.mark.e2e
@pytest.mark.parametrize(("share", "forgery"), [(0.02, "swing"), (0.2, "twice")])
def test_one_senders_swinging_hours_do_not_delay_the_page_of_a_doubling(
    share: float, forgery: str
) -> None:
    clean = _minutes_to_page(share, None)
    forged = _minutes_to_page(share, forgery)
    # Without the screen neither forged stream paged within six hours.
    assert clean < 60
    assert forged <= 2 * clean


def _history_of(senders: list[str | None], seed: int) -> list[tuple[float, float]]:
    """(kappa, excess) a history of the default rule expects, hour by hour over three days,
    of one honest stream whose verdicts come from `senders` in unequal shares (a rate that
    wanders by the hour, shared by all of them, and follows the day)."""
    rng = np.random.default_rng(seed)
    shares = np.array([0.55, 0.2, 0.1, 0.1, 0.05][: len(senders)])
    shares = shares / shares.sum()
    history = History(86_400.0, "week", 1, 90 * 86_400.0)
    out = []
    hour_rate = RATE
    t = START
    while t < START + 3 * 86_400:
        if t % 3600 == 0:
            day = 0.03 * math.sin(2 * math.pi * t / 86_400)
            hour_rate = min(0.9, max(0.01, RATE + day + rng.normal(0, 0.02)))
            if t >= START + 86_400:
                expected = history.expectation(t, 500)
                assert expected is not None
                out.append((expected.kappa, expected.excess))
        for sender, n in zip(senders, rng.multinomial(rng.poisson(2 * 60), shares), strict=True):
            if n:
                fails = int(rng.binomial(n, hour_rate))
                moments = Moments(int(n), float(fails), float(fails))
                history.add(t, moments, moments, rise=False)
                history.sent(t, sender, moments, solo=True)
        t += 60
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_honest_senders_change_nothing_the_history_measures(seed: int) -> None:
    pods: list[str | None] = [f"10.0.0.{k}/pod-{k}" for k in range(5)]
    screened = _history_of(pods, seed)
    unknown = _history_of([None] * 5, seed)
    assert screened == unknown
    assert max(kappa for kappa, _ in screened) > 1.0  # the wandering rate is measured


def test_a_records_sender_reaches_the_regression_history() -> None:
    """`emit` takes a record's sender (`monitor.records.sender`) to the rule's history,
    which keeps it across a restart: a key followed once it sent `ADMIT_VERDICTS`, its
    first verdicts counted as its address's, as a key that sends one trace is."""
    now = START
    engine = AlertEngine([RULE], create_telemetry(), clock=lambda: now)
    senders = [("10.0.0.7", "pod-7f9c", int(ADMIT_VERDICTS)), ("10.0.0.8", None, 1)]
    senders.append(("10.0.0.9", "sprayed", 1))
    for address, instance, records in senders:
        metadata = {CLIENT_ADDRESS: address} | ({INSTANCE_ID: instance} if instance else {})
        for k in range(records):
            record = RagRecord(request_id=f"{address}-{k}", service="shop", metadata=metadata)
            engine.emit(
                [Evaluated(record, {"local_groundedness": verdict("local_groundedness", True)})]
            )
    saved = engine.snapshot()
    history = saved["regression"]["services"]["shop"][""]["state"]["history"]
    assert set(history["senders"]["senders"]) == {
        "10.0.0.7",
        "10.0.0.7/pod-7f9c",
        "10.0.0.8",
        "10.0.0.9",
    }
    restored = AlertEngine([RULE], create_telemetry(), clock=lambda: now)
    restored.restore(saved)
    assert restored.snapshot() == saved


def test_the_screen_follows_a_bounded_number_of_senders() -> None:
    """Senders past `MAX_SENDERS` are screened together; idle ones give their place up."""
    screen = Senders()
    for k in range(MAX_SENDERS + 10):
        screen.add(0, f"10.0.0.{k}", 1, 0, 0, solo=True)
    assert len(screen.snapshot()["senders"]) == MAX_SENDERS + 1
    screen.add(SCREEN_BUCKETS, "late", ADMIT_VERDICTS, 0, 0, solo=True)  # bucket 0 leaves
    assert set(screen.snapshot()["senders"]) == {"late"}


NO_BUCKETS = [-1] * SCREEN_BUCKETS


@pytest.mark.parametrize(
    "saved",
    [
        {"index": [0] * SCREEN_BUCKETS, "senders": {}},  # a bucket not of its slot
        {"index": NO_BUCKETS, "senders": {"a": [[SCREEN_BUCKETS, 1, 0, 0, 0, 0]]}},
        {"index": NO_BUCKETS, "senders": {"a": [[0, -1, 0, 0, 0, 0]]}},
        {"index": NO_BUCKETS, "senders": {"a": [[0, math.nan, 0, 0, 0, 0]]}},
        {"index": NO_BUCKETS, "senders": {"a": [[0, 1, 0]]}},
        {"index": NO_BUCKETS, "senders": {f"s{k}": [] for k in range(MAX_ROWS + 1)}},
        {"index": NO_BUCKETS, "senders": {"s" * 1000: []}},
        {"index": NO_BUCKETS[1:], "senders": {}},
        {"index": NO_BUCKETS},
    ],
)
def test_a_malformed_saved_screen_is_refused(saved: dict[str, object]) -> None:
    """What the state file says of a history's senders is checked as it is read; the entry
    holding it is then left out (`monitor.alerts.entries`)."""
    with pytest.raises((TypeError, ValueError, KeyError)):
        Senders().restore(saved)
