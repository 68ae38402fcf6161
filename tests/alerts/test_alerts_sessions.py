"""Conversation ids set aside fall back to the unit their traffic supports: an id reused
only after a pause (a recycled slot, a user back later) is judged by its sessions, each a
conversation of its own; an id never quiet that long (a constant, pods) by request.

Time is passed to `Units` as numbers (an injected clock); the streams are deterministic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from monitor.evidence.conversations import conversation_key
from monitor.evidence.counts import Arrival
from monitor.evidence.units import Units

IDLE_S = 600.0
LEVELS = [0.0, 1.0]
PASS = [1.0, 0.0]
TURNS = 8
TURN_S = 30.0


def _slots(units: Units, slots: int, hours: float, start: float = 0.0) -> float:
    """Conversations of `TURNS` turns `TURN_S` apart, one starting every minute, each on
    slot `k % slots` (a slot comes back `slots` minutes later, after a pause longer than
    the idle time); returns when the last one started."""
    turns = []
    for k in range(int(hours * 60)):
        begin = start + 60.0 * k
        turns += [(begin + TURN_S * j, k % slots) for j in range(TURNS)]
    for at, slot in sorted(turns):
        units.add(slot, None, PASS, LEVELS, at)
        if int(at) % 60 == 0:
            units.close_idle(at)
    return start + 60.0 * (int(hours * 60) - 1)


def test_a_slot_reused_after_a_pause_is_judged_by_its_sessions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    units = Units(IDLE_S)
    with caplog.at_level(logging.WARNING, logger="monitor.evidence.units"):
        # A slot spans more than a unit may last (6 h) from its seventh hour on.
        now = _slots(units, 40, 9.0)
    assert units.fallback
    said = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert len(said) == 1 and "sessions" in said[0]
    # A slot's next conversation is judged against its own turns only, never the days of
    # unrelated conversations the slot carried before.
    slot = 7
    units.close_idle(now + 3 * IDLE_S)  # as the engine does at each evaluation
    arrivals: list[Arrival | None] = []
    for j in range(TURNS):
        arrival, _ = units.add(slot, None, PASS, LEVELS, now + 3 * IDLE_S + TURN_S * j)
        arrivals.append(arrival)
    assert all(a is not None for a in arrivals)
    assert [a.earlier for a in arrivals if a is not None] == list(range(TURNS))


def test_a_session_closes_into_a_unit_of_its_own_turns() -> None:
    units = Units(IDLE_S)
    now = _slots(units, 40, 9.0)
    assert units.fallback
    closed = units.close_idle(now + 2 * IDLE_S)
    assert closed
    assert all(u.conversation and u.samples == TURNS for u in closed)


@pytest.mark.parametrize(
    "id_of", [lambda k: "everyone", lambda k: f"pod-{k % 8}"], ids=["constant", "pods"]
)
def test_ids_never_quiet_for_the_idle_time_are_judged_by_request(
    id_of: Callable[[int], str],
) -> None:
    units = Units(IDLE_S)
    # Two verdicts a second for seven hours, round robin over the ids: no id pauses.
    for k in range(7 * 3600 * 2):
        arrival, closed = units.add(conversation_key(id_of(k)), None, PASS, LEVELS, k / 2)
    assert units.fallback
    assert arrival is None and closed == []
    assert units.close_idle(7 * 3600.0 + 2 * IDLE_S) == []


def test_sessions_and_the_unit_judged_by_survive_a_restart() -> None:
    units = Units(IDLE_S)
    now = _slots(units, 40, 9.0)
    units.close_idle(now + 3 * IDLE_S)
    units.add(3, None, PASS, LEVELS, now + 3 * IDLE_S)
    again = Units(IDLE_S)
    again.restore(units.snapshot())
    assert again.fallback
    arrival, _ = again.add(3, None, PASS, LEVELS, now + 3 * IDLE_S + TURN_S)
    assert arrival is not None and arrival.earlier == 1
    assert again.fallback and again.by_sessions


@pytest.mark.parametrize(
    ("flags", "fallback", "by_sessions"),
    [
        ({"fallback": True, "by_sessions": True}, True, True),
        ({"fallback": True, "by_sessions": False}, True, False),
        ({"fallback": True}, True, False),
        ({"fallback": False, "by_sessions": False}, False, False),
        ({}, False, False),
    ],
)
def test_what_ids_set_aside_are_judged_by_is_one_value_and_files_of_two_flags_read(
    flags: dict[str, bool], fallback: bool, by_sessions: bool
) -> None:
    """Saved as one value (null, "sessions" or "requests"); files that kept it as two flags
    (`fallback`, `by_sessions`), or as one before sessions, restore as they said."""
    saved = Units(IDLE_S).snapshot()
    saved.pop("fallback")
    units = Units(IDLE_S)
    units.restore({**saved, **flags})
    assert (units.fallback, units.by_sessions) == (fallback, by_sessions)
    again = Units(IDLE_S)
    again.restore(units.snapshot())
    assert (again.fallback, again.by_sessions) == (fallback, by_sessions)
    assert units.snapshot()["fallback"] == (
        None if not fallback else "sessions" if by_sessions else "requests"
    )
    assert "by_sessions" not in units.snapshot()
    for malformed in ({"fallback": "yes"}, {"fallback": True, "by_sessions": "yes"}):
        with pytest.raises(TypeError):
            Units(IDLE_S).restore({**saved, **malformed})
