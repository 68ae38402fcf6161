"""Ids set aside as no conversations and judged by request: what a history holds of the
hours they counted as conversations is reclassified as requests (verdicts without a
conversation), so that their units' sizes (hundreds of verdicts of unrelated requests)
no longer widen the level's error through the correlation's prior.

Time is passed as numbers (an injected clock); the streams are deterministic.
"""

from __future__ import annotations

import random

from monitor.evidence.counts import Moments, Unit
from monitor.evidence.history import History
from monitor.evidence.units import Units

IDLE_S = 600.0
LEVELS = [0.0, 1.0]
PODS = 8
HOUR_S = 3_600.0
BUDGET_S = 90 * 86_400.0


def _pods(units: Units, start: float, seconds: int) -> list[Unit]:
    """One verdict a second, each in the id of one of `PODS` pods in turn (never quiet);
    returns the units `add` and `close_idle` hand on."""
    out = []
    rng = random.Random(5)
    for k in range(seconds):
        at = start + k
        fail = rng.random() < 0.2
        out += units.add(k % PODS, None, [0.0, 1.0] if fail else [1.0, 0.0], LEVELS, at)[1]
        if k % 60 == 0:
            out += units.close_idle(at)
    return out


def test_ids_judged_by_request_say_once_since_when_they_were_none() -> None:
    units = Units(IDLE_S)
    handed = _pods(units, 1_000.0, 10 * 3_600)
    assert units.fallback and not units.by_sessions
    said = [u for u in handed if u.none_since is not None]
    # Once, from the first verdict of the pods' ids, as a unit of no verdicts.
    assert len(said) == 1
    assert said[0].none_since == 1_000.0
    assert (said[0].samples, said[0].conversation) == (0, False)


def _row(history: History, index: int) -> list[float]:
    """Bucket `index` as saved: [N, D, Q, RN, RD, RQ, SN, SD, UN, M2, DD, ND, M3]."""
    for entry in history.snapshot()["buckets"]:
        if entry[0] == index:
            return [*entry[1:], *[0.0] * (14 - len(entry))]
    raise AssertionError(f"bucket {index} not held")


def test_the_hours_counted_as_conversations_become_requests() -> None:
    history = History(86_400.0, "day", 1, BUDGET_S)
    start = 100 * HOUR_S
    for hour in range(6):
        t = start + hour * HOUR_S
        history.add(t, Moments(400, 80.0, 80.0), Moments(), rise=False)
        for _ in range(4):
            history.add_unit(t + 600.0, Unit(100, 20.0, 20.0, conversation=True))
    held = {history.bucket(start + 5 * HOUR_S): (Moments(50, 20.0, 20.0), Moments())}
    history.add(start + 5 * HOUR_S, Moments(50, 20.0, 20.0), Moments(), rise=True)
    assert _row(history, history.bucket(start))[6] == 0  # no verdict without a conversation
    # The ids were none since the first hour; said 5.5 hours in.
    history.add_unit(start + 5.5 * HOUR_S, Unit(0, 0.0, 0.0, False, none_since=start))
    for hour in range(6):
        row = _row(history, history.bucket(start + hour * HOUR_S))
        assert row[6:8] == row[0:2]  # every clean verdict counts as a request
        assert row[8:] == [0.0] * 5  # no conversation's sums
    # What the current window still held of those hours comes as requests too, and so
    # does what was held out as a rise when it is released.
    history.add(start + 5.2 * HOUR_S, Moments(30, 6.0, 6.0), Moments(), rise=False)
    history.release(held)
    last = _row(history, history.bucket(start + 5 * HOUR_S))
    assert last[6:8] == last[0:2] == [480, 106]
    # An hour after the ids were set aside keeps its own split.
    history.add(start + 7 * HOUR_S, Moments(40, 8.0, 8.0), Moments(10, 2.0, 2.0), rise=False)
    assert _row(history, history.bucket(start + 7 * HOUR_S))[6:8] == [10, 2]


def test_the_reclassified_span_is_kept_in_the_state_file() -> None:
    history = History(86_400.0, "day", 1, BUDGET_S)
    history.add(HOUR_S, Moments(400, 80.0, 80.0), Moments(), rise=False)
    history.add_unit(2 * HOUR_S, Unit(0, 0.0, 0.0, False, none_since=0.0))
    saved = history.snapshot()
    restored = History(86_400.0, "day", 1, BUDGET_S)
    restored.restore(saved)
    restored.add(1.5 * HOUR_S, Moments(30, 6.0, 6.0), Moments(), rise=False)
    assert _row(restored, restored.bucket(HOUR_S))[6:8] == [430, 86]
