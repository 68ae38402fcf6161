"""Conversations: what their verdicts are judged with.

Verdicts of one conversation (`RagRecord.conversation`: `session.id`,
`gen_ai.conversation.id`, or the attribute the config names) share its user, topic and
documents, so they fail together more often than independent verdicts would. Each
conversation's verdicts are gathered here:

- as they arrive, each arrival (`Arrival`) carries what the conversation's earlier verdicts
  were, so the sequential test judges it against what they predict, at once;
- once the conversation has been quiet for `alerts.conversation_idle`, has `MAX_VERDICTS`
  verdicts, or is `MAX_AGE_S` old (a longer conversation goes on as a new one), it closes
  into one `Unit`: what the history measures the correlation within conversations from,
  and what the windows' design effect counts.

A conversation that goes on after its unit closed (a user back after a pause, an agent
session past `MAX_VERDICTS`) is the same conversation to the test: what it showed is
remembered, and its next arrival is judged against all of its earlier verdicts, never as a
new conversation's (its verdicts would then be bet on twice, as if independent). The
memory is bounded: a conversation is remembered for `REMEMBER_S` after its unit closed,
among the `MAX_REMEMBERED` closed most recently; one that returns later counts as new
(what the sequential test's guarantee does not cover, `sequential.py`).

Memory is bounded: at most `MAX_OPEN` conversations are gathered per (rule, service,
cohort); past that the one quiet longest is handed on early. Conversation ids are kept as a
64-bit hash (never the id itself, which may be a user's session).
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.config import CONVERSATION_MAX_AGE, parse_duration

MAX_VERDICTS = 100
# `alerts.conversation_idle` is at most this: a conversation is never quiet for longer.
MAX_AGE_S = parse_duration(CONVERSATION_MAX_AGE)
MAX_OPEN = 20_000
MAX_REMEMBERED = 20_000
REMEMBER_S = 86_400.0


@dataclass(slots=True)
class _Open:
    """A unit under way: its verdicts, and the conversation's before it began (`shown`,
    summing to `shown_defects`)."""

    samples: int
    defects: float
    squares: float
    first: float
    last: float
    shown: int = 0
    shown_defects: float = 0.0


@dataclass(frozen=True, slots=True)
class Unit:
    """What a rule judges as one observation: the verdicts of one conversation (`samples`
    of them, whose defect values sum to `defects` and their squares to `squares`), or one
    verdict that came without a conversation (`conversation` False)."""

    samples: int
    defects: float
    squares: float
    conversation: bool

    @property
    def mean(self) -> float:
        return self.defects / self.samples if self.samples else 0.0


@dataclass(frozen=True, slots=True)
class Arrival:
    """Verdicts of one conversation that arrived together (`samples` of them, their defect
    values summing to `defects`, their squares to `squares`), after `earlier` verdicts of
    the same conversation whose values summed to `earlier_defects`."""

    samples: int
    defects: float
    squares: float
    earlier: int
    earlier_defects: float


def conversation_key(conversation: str) -> int:
    return int.from_bytes(hashlib.blake2b(conversation.encode(), digest_size=8).digest(), "big")


class Conversations:
    """The open conversations of one (rule, service, cohort), and what the ones closed
    recently showed."""

    __slots__ = ("_closed", "_idle_s", "_open")

    def __init__(self, idle_s: float) -> None:
        self._idle_s = idle_s
        # Least recently active first.
        self._open: OrderedDict[int, _Open] = OrderedDict()
        # Closed conversations: (verdicts, their defect sum, when closed), oldest first.
        self._closed: OrderedDict[int, tuple[int, float, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    @property
    def remembered(self) -> int:
        """How many closed conversations are remembered."""
        return len(self._closed)

    def oldest(self) -> float:
        """When the conversation `evict` takes was closed (or, with none closed, last
        active); infinity with none."""
        if self._closed:
            return next(iter(self._closed.values()))[2]
        if self._open:
            return next(iter(self._open.values())).last
        return math.inf

    def evict(self) -> Unit | None:
        """A process-wide memory budget's eviction hook (`monitor.alerts.entries`): forgets
        the conversation closed longest ago, or with none closed, closes the one quiet
        longest, not remembered, and returns its unit."""
        if self._closed:
            self._closed.popitem(last=False)
            return None
        return _unit(self._open.popitem(last=False)[1])

    def add(
        self, key: int, histogram: Sequence[float], levels: Sequence[float], now: float
    ) -> tuple[Arrival, list[Unit]]:
        """Adds `histogram[k]` verdicts at `levels[k]` to conversation `key`; returns them
        as an arrival, and the units that close now (this conversation if it is full or
        old, or the quietest one if too many are open)."""
        entry = self._open.get(key)
        if entry is None:
            shown, shown_defects, _ = self._closed.pop(key, (0, 0.0, 0.0))
            entry = self._open[key] = _Open(0, 0.0, 0.0, now, now, shown, shown_defects)
        else:
            self._open.move_to_end(key)
        samples, defects, squares = 0, 0.0, 0.0
        for count, value in zip(histogram, levels, strict=True):
            if count:
                samples += int(count)
                defects += count * value
                squares += count * value * value
        arrival = Arrival(
            samples,
            defects,
            squares,
            entry.shown + entry.samples,
            entry.shown_defects + entry.defects,
        )
        entry.samples += samples
        entry.defects += defects
        entry.squares += squares
        entry.last = max(entry.last, now)
        out = []
        if entry.samples >= MAX_VERDICTS or now - entry.first >= MAX_AGE_S:
            out.append(self._close(key, self._open.pop(key), now))
        while len(self._open) > MAX_OPEN:
            quietest, oldest = self._open.popitem(last=False)
            out.append(self._close(quietest, oldest, now))
        return arrival, out

    def close_idle(self, now: float) -> list[Unit]:
        """The conversations quiet for the idle time (or old) by `now`, closed; and the
        closed ones past `REMEMBER_S`, forgotten."""
        out = []
        while self._open:
            key, entry = next(iter(self._open.items()))
            if now - entry.last < self._idle_s and now - entry.first < MAX_AGE_S:
                break
            del self._open[key]
            out.append(self._close(key, entry, now))
        # An old conversation still active sits behind quiet ones: found at its next add.
        while self._closed and now - next(iter(self._closed.values()))[2] >= REMEMBER_S:
            self._closed.popitem(last=False)
        return out

    def _close(self, key: int, entry: _Open, now: float) -> Unit:
        """`entry`'s unit, its conversation remembered."""
        self._closed[key] = (
            entry.shown + entry.samples,
            entry.shown_defects + entry.defects,
            now,
        )
        self._closed.move_to_end(key)
        while len(self._closed) > MAX_REMEMBERED:
            self._closed.popitem(last=False)
        return _unit(entry)

    def snapshot(self) -> dict[str, list[list[float]]]:
        return {
            "open": [
                [key, e.samples, e.defects, e.squares, e.first, e.last, e.shown, e.shown_defects]
                for key, e in self._open.items()
            ],
            "closed": [[key, n, d, at] for key, (n, d, at) in self._closed.items()],
        }

    def restore(self, raw: Any) -> None:
        """Takes back what `snapshot` gave (or a list of open conversations, as state files
        written before closed ones were remembered hold)."""
        if isinstance(raw, list):
            raw = {"open": raw, "closed": []}
        if not isinstance(raw, dict) or not all(
            isinstance(raw.get(part), list) for part in ("open", "closed")
        ):
            raise TypeError("conversations: lists of open and closed ones expected")
        opened: OrderedDict[int, _Open] = OrderedDict()
        for entry in raw["open"][-MAX_OPEN:]:
            if not isinstance(entry, list) or len(entry) not in (6, 8):
                raise ValueError(
                    "conversations: [key, samples, defects, squares, first, last, shown, "
                    "shown defects]"
                )
            key, n, *numbers = entry
            shown, shown_defects = numbers[4:] if len(numbers) == 6 else (0, 0.0)
            d, q, first, last = _numbers(numbers[:4])
            _check_counts(key, n, d, q)
            _check_counts(key, shown, float(shown_defects), float(shown_defects))
            opened[key] = _Open(int(n), d, q, first, last, int(shown), float(shown_defects))
        closed: OrderedDict[int, tuple[int, float, float]] = OrderedDict()
        for entry in raw["closed"][-MAX_REMEMBERED:]:
            if not isinstance(entry, list) or len(entry) != 4:
                raise ValueError("conversations: a closed one is [key, samples, defects, closed]")
            key, n, *numbers = entry
            d, at = _numbers(numbers)
            _check_counts(key, n, d, d)
            closed[key] = (int(n), d, at)
        self._open, self._closed = opened, closed


def _numbers(raw: list[Any]) -> list[float]:
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw):
        raise TypeError("conversations: a value is not a number")
    values = [float(v) for v in raw]
    if not all(math.isfinite(v) for v in values):
        raise ValueError("conversations: a value is not finite")
    return values


def _check_counts(key: Any, samples: Any, defects: float, squares: float) -> None:
    if isinstance(key, bool) or not isinstance(key, int):
        raise TypeError("conversations: a key is not an integer")
    if isinstance(samples, bool) or not isinstance(samples, int | float):
        raise TypeError("conversations: a count is not a number")
    if not math.isfinite(samples):
        raise ValueError("conversations: a count is not finite")
    if not 0 <= squares <= defects <= samples:
        raise ValueError("conversations: counts out of order")


def _unit(entry: _Open) -> Unit:
    return Unit(entry.samples, entry.defects, entry.squares, conversation=True)
