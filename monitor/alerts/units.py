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


@dataclass(slots=True)
class _Open:
    samples: int
    defects: float
    squares: float
    first: float
    last: float


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
    """The open conversations of one (rule, service, cohort)."""

    __slots__ = ("_idle_s", "_open")

    def __init__(self, idle_s: float) -> None:
        self._idle_s = idle_s
        # Least recently active first.
        self._open: OrderedDict[int, _Open] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def add(
        self, key: int, histogram: Sequence[float], levels: Sequence[float], now: float
    ) -> tuple[Arrival, list[Unit]]:
        """Adds `histogram[k]` verdicts at `levels[k]` to conversation `key`; returns them
        as an arrival, and the units that close now (this conversation if it is full or
        old, or the quietest one if too many are open)."""
        entry = self._open.get(key)
        if entry is None:
            entry = self._open[key] = _Open(0, 0.0, 0.0, now, now)
        else:
            self._open.move_to_end(key)
        samples, defects, squares = 0, 0.0, 0.0
        for count, value in zip(histogram, levels, strict=True):
            if count:
                samples += int(count)
                defects += count * value
                squares += count * value * value
        arrival = Arrival(samples, defects, squares, entry.samples, entry.defects)
        entry.samples += samples
        entry.defects += defects
        entry.squares += squares
        entry.last = max(entry.last, now)
        out = []
        if entry.samples >= MAX_VERDICTS or now - entry.first >= MAX_AGE_S:
            out.append(_unit(self._open.pop(key)))
        while len(self._open) > MAX_OPEN:
            out.append(_unit(self._open.popitem(last=False)[1]))
        return arrival, out

    def close_idle(self, now: float) -> list[Unit]:
        """The conversations quiet for the idle time (or old) by `now`, closed."""
        out = []
        while self._open:
            key, entry = next(iter(self._open.items()))
            if now - entry.last < self._idle_s and now - entry.first < MAX_AGE_S:
                break
            del self._open[key]
            out.append(_unit(entry))
        # An old conversation still active sits behind quiet ones: found at its next add.
        return out

    def close_all(self) -> list[Unit]:
        out = [_unit(entry) for entry in self._open.values()]
        self._open.clear()
        return out

    def snapshot(self) -> list[list[float]]:
        return [
            [key, e.samples, e.defects, e.squares, e.first, e.last] for key, e in self._open.items()
        ]

    def restore(self, raw: Any) -> None:
        if not isinstance(raw, list):
            raise TypeError("conversations: a list expected")
        opened: OrderedDict[int, _Open] = OrderedDict()
        for entry in raw[-MAX_OPEN:]:
            if not isinstance(entry, list) or len(entry) != 6:
                raise ValueError("conversations: [key, samples, defects, squares, first, last]")
            key, n, d, q, first, last = entry
            if isinstance(key, bool) or not isinstance(key, int):
                raise TypeError("conversations: a key is not an integer")
            values = [float(v) for v in (n, d, q, first, last)]
            if not all(math.isfinite(v) for v in values) or not 0 <= values[2] <= values[1] <= n:
                raise ValueError("conversations: counts out of order")
            opened[key] = _Open(int(n), values[1], values[2], values[3], values[4])
        self._open = opened


def _unit(entry: _Open) -> Unit:
    return Unit(entry.samples, entry.defects, entry.squares, conversation=True)
