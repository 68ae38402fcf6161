"""A state file can never stop the process: any content loads, the entries it breaks are
left out alone (counted and logged), and an entry that cannot be judged at evaluation time
is dropped alone, never the other alerts of that evaluation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from monitor.alerts import AlertEngine
from monitor.telemetry import Telemetry
from tests.alerts.test_alerts import Clock, gauge
from tests.alerts.test_alerts_regression import RULE, Stream, loads, make


def _dropped(t: Any, when: str) -> float:
    return gauge(t, "alert_state_entries_dropped_total", when=when) or 0.0


# The file `_two_firing_services` saved first: every later test starts from its text (the
# stream and the injected clock are deterministic, so it would save the same again).
_SAVED: list[str] = []


async def _two_firing_services(path: Path) -> dict[str, Any]:
    """A saved state file in which the rule fires for `shop` and for `cart`."""
    if _SAVED:
        return _write(path, _SAVED[0])
    engine, _, clock = make(state_path=path)
    await engine.start()
    stream = Stream(engine, clock)
    for rate, rounds in ((0.2, 90), (0.5, 12)):  # a steady baseline, then a rise
        for _ in range(rounds):
            for service in ("shop", "cart"):
                stream.run(5, rate, service=service)
    assert engine.firing() == [(RULE.name, "cart"), (RULE.name, "shop")]
    await engine.shutdown(10)
    data = _read(path)
    _SAVED.append(json.dumps(data))
    return data


async def _started_with_cart_saved_as(
    tmp_path: Path, key: str, value: object
) -> tuple[AlertEngine, Telemetry]:
    """An engine started on a state file of `_two_firing_services` whose `cart` entry holds
    `value` at `key`."""
    path = tmp_path / "alerts.state"
    data = await _two_firing_services(path)
    data["rules"][RULE.name]["services"]["cart"][""][key] = value
    path.write_text(json.dumps(data))
    engine, t, _ = make(state_path=path)
    await engine.start()
    return engine, t


def _write(path: Path, text: str) -> dict[str, Any]:
    path.write_text(text)
    return _read(path)


def _read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.parametrize(
    "content",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"format": "rag-monitor-alert-state", "version": 1, "saved_at": 1'
        + b"0" * 400
        + b', "rules": {}}',
        b'{"format": "rag-monitor-alert-state", "version": 1, "saved_at": NaN, "rules": {}}',
        b'{"format": "rag-monitor-alert-state", "version": 1, "saved_at": 1e309, "rules": {}}',
        b'{"format": "rag-monitor-alert-state", "version": true, "saved_at": true, "rules": 3}',
    ],
    ids=["deep", "huge-integer", "nan", "infinity", "wrong-types"],
)
async def test_a_hostile_file_starts_empty_and_the_engine_runs(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "alerts.state"
    path.write_bytes(content)
    engine, t, clock = make(state_path=path)
    await engine.start()  # never raises
    assert engine.snapshot() == {} and engine.firing() == []
    assert sum(loads(t, o) for o in ("corrupt", "foreign")) == 1
    Stream(engine, clock).run(60, 0.2)
    await engine.shutdown(10)


@pytest.mark.parametrize(
    "bad",
    [float("nan"), float("inf"), 10**400, "soon", None, True],
    ids=["nan", "infinity", "huge-integer", "text", "null", "flag"],
)
async def test_an_entry_the_file_breaks_is_left_out_alone(tmp_path: Path, bad: object) -> None:
    # json writes NaN and Infinity as Python's json reads them back.
    engine, t = await _started_with_cart_saved_as(tmp_path, "started_at", bad)
    assert loads(t, "loaded") == 1
    assert engine.firing() == [(RULE.name, "shop")]
    assert _dropped(t, "load") == 1
    await engine.shutdown(10)
    saved = _read(tmp_path / "alerts.state")
    assert "cart" not in saved["rules"][RULE.name]["services"]  # the bad value is not saved back


@pytest.mark.parametrize(
    "where",
    [
        "model",
        ["model", "m2"],
        ["no-such-dimension", "m2", 1.7e9],
        ["model", "", 1.7e9],
        ["model", "m" * 129, 1.7e9],
        ["model", "\u0000\n\u202e<b>x</b>", 1.7e9],
        ["model", "m\u200b2", 1.7e9],
        ["model", 3, 1.7e9],
        ["model", "m2", float("nan")],
        ["model", "m2", 1e300],
        ["model", "m2", -1.0],
        ["model", "m2", True],
    ],
    ids=[
        "text",
        "short",
        "dimension",
        "empty",
        "long",
        "controls",
        "zero-width",
        "number",
        "nan",
        "far-future",
        "negative",
        "flag",
    ],
)
async def test_a_malformed_where_alert_leaves_its_entry_out_alone(
    tmp_path: Path, where: object
) -> None:
    engine, t = await _started_with_cart_saved_as(tmp_path, "where", where)
    assert engine.firing() == [(RULE.name, "shop")]
    assert _dropped(t, "load") == 1
    await engine.shutdown(10)


async def test_a_where_alert_is_restored_with_its_firing_entry_only(tmp_path: Path) -> None:
    """A firing entry's `where` comes back as saved; on an entry that does not fire it is
    malformed; a file of the layout before it (version 2, no `where`) restores without one."""
    path = tmp_path / "alerts.state"
    data = await _two_firing_services(path)
    services = data["rules"][RULE.name]["services"]
    services["shop"][""]["where"] = ["model", "m2", 1_700_000_100.5]
    data["version"] = 2
    del services["cart"][""]["where"]
    path.write_text(json.dumps(data))
    restarted = Clock()
    restarted.now = data["saved_at"]  # a time saved later than now would be clamped
    engine, t, _ = make(state_path=path, clock=restarted)
    await engine.start()
    assert engine.firing() == [(RULE.name, "cart"), (RULE.name, "shop")]
    assert _dropped(t, "load") == 0
    saved = engine.snapshot()[RULE.name]["services"]
    assert saved["shop"][""]["where"] == ["model", "m2", 1_700_000_100.5]
    assert saved["cart"][""]["where"] is None
    await engine.shutdown(10)
    services["cart"][""]["firing"] = False
    services["cart"][""]["where"] = ["model", "m2", 1_700_000_100.5]
    path.write_text(json.dumps(data))
    engine, t, _ = make(state_path=path)
    await engine.start()
    assert engine.firing() == [(RULE.name, "shop")] and _dropped(t, "load") == 1
    await engine.shutdown(10)


async def test_an_entry_that_cannot_be_judged_is_dropped_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "alerts.state"
    await _two_firing_services(path)
    engine, t, clock = make(state_path=path)
    await engine.start()
    entries = engine._entries
    broken = next(entry for (_, service, _), entry in entries.items() if service == "cart")

    def fail(*_: object) -> None:
        raise ZeroDivisionError("scripted fault")

    monkeypatch.setattr(broken.state.current, "expire", fail)
    stream = Stream(engine, clock)
    stream.run(30, 0.5, service="shop")  # evaluations go on: shop is judged every interval
    assert engine.firing() == [(RULE.name, "shop")]
    assert gauge(t, "alert_firing", service="shop", rule=RULE.name, severity="page", cohort="") == 1
    assert _dropped(t, "evaluation") == 1  # once: the entry is gone after its failure
    await engine.shutdown(10)
