"""What a regression rule logs of its sender screen at a service's start: a key is followed
only once it sent a few verdicts, so a new service's first verdicts (`rag-monitor
send-sample`, the first minutes of a quiet service) are all counted as their address's and
the screen reads `full` for a while. That is not the traffic's doing: no line may tell the
user of "a new instance id in every trace" then, and what the traffic does show later (one
sender behind one address) is what is said."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.rule import Origin
from monitor.evidence.senders import FULL, ONE_SENDER
from monitor.records import resource_digest, sender_key
from monitor.telemetry import create_telemetry
from tests.alerts.honest_pods import RATE, RULE, START

SAID = "cannot tell this service's senders apart"


def _run(
    caplog: pytest.LogCaptureFixture, pods: list[str], per_minute: int, minutes: int
) -> tuple[AlertEngine, list[logging.LogRecord]]:
    now = START
    engine = AlertEngine([RULE], create_telemetry(), clock=lambda: now, evaluation_interval_s=60.0)
    rng = np.random.default_rng(3)
    caplog.set_level("WARNING", logger="monitor.alerts.engine")
    for _ in range(minutes):
        for key in pods:
            fails = int(rng.binomial(per_minute, RATE))
            engine.count(0, Origin("客服", sender=key), [per_minute - fails, fails], None, now)
        now += 60.0
        engine.evaluate()
    return engine, [r for r in caplog.records if SAID in r.getMessage()]


def _pod(name: str) -> str:
    key = sender_key("10.0.0.7", name, resource_digest({"service.name": "客服", "pod": name}))
    assert key is not None
    return key


def test_a_new_services_first_verdicts_are_not_said_to_be_unscreenable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Three pods told apart by their ids, a verdict a minute each: the screen reads
    `full` over the first minutes (no key followed yet), then screens them; nothing is
    logged over three hours."""
    engine, said = _run(caplog, [_pod(f"pod-{i}") for i in range(3)], 1, 180)
    assert said == [], [r.getMessage() for r in said]
    assert engine.screened_senders()[0]["cannot_screen"] is None


def test_what_the_traffic_shows_is_said_not_the_start(caplog: pytest.LogCaptureFixture) -> None:
    """One sender alone, a verdict a minute: `full` at the start, then one sender for
    good; the one line says `one_sender`, never `full`."""
    engine, said = _run(caplog, [_pod("pod-0")], 1, 26 * 60)
    assert engine.screened_senders()[0]["cannot_screen"] == ONE_SENDER
    assert [ONE_SENDER in r.getMessage() and FULL not in r.getMessage() for r in said] == [True]
