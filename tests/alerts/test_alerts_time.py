"""Time in the alert state (issue 70, item 6): a firing page keeps being re-sent, and
shows on `GET /alerts`, whatever the wall clock or a hand-edited state file says.

The engine reads the wall clock (`time.time()`), which can step back (NTP, a VM restored);
a state file can hold any time. A `last_sent` later than now must neither silence the page
(Alertmanager would expire it at its `endsAt`) nor be kept."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.alerts.test_alerts_regression import INTERVAL, RULE, Stream, make
from tests.alerts.test_alerts_state_hostile import _two_firing_services

RESEND_S = 60.0


def _resends(stream: Stream, service: str) -> int:
    return sum(1 for a in stream.sent if a.status == "firing" and a.service == service)


async def test_a_future_last_sent_in_the_state_is_clamped_and_the_page_resent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "alerts.state"
    data = await _two_firing_services(path)
    cart = data["rules"][RULE.name]["services"]["cart"][""]
    cart["last_sent"] = cart["started_at"] = data["saved_at"] + 10 * 365 * 86_400.0
    path.write_text(json.dumps(data))

    engine, _, clock = make(state_path=path)
    clock.now = data["saved_at"] + INTERVAL
    with caplog.at_level(logging.WARNING, logger="monitor.alerts.entries"):
        await engine.start()
    assert "a time later than now" in caplog.text and "service cart" in caplog.text
    entry = engine.snapshot()[RULE.name]["services"]["cart"][""]
    assert entry["last_sent"] <= clock.now and entry["started_at"] <= clock.now

    stream = Stream(engine, clock)
    stream.run(RESEND_S + INTERVAL, 0.5, service="cart")
    assert (RULE.name, "cart") in engine.firing()
    assert _resends(stream, "cart") >= 1
    shown = [(a["rule"], a["service"]) for a in engine.attribution.firing_alerts()]
    assert (RULE.name, "cart") in shown
    await engine.shutdown(10)


async def test_a_wall_clock_stepped_back_keeps_resending_a_firing_page(tmp_path: Path) -> None:
    engine, _, clock = make()
    stream = Stream(engine, clock)
    stream.run(900, 0.20)
    stream.run(60, 0.50)
    assert engine.firing() == [(RULE.name, "shop")]
    clock.now -= 3600.0  # the clock steps back an hour
    stream.sent.clear()
    stream.run(3 * RESEND_S, 0.50)
    assert engine.firing() == [(RULE.name, "shop")]
    # Re-sent at the step and then every resend interval, not an hour later.
    assert _resends(stream, "shop") >= 3
    assert [a["service"] for a in engine.attribution.firing_alerts()] == ["shop"]
