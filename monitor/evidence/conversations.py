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
from monitor.evidence.counts import Arrival, Unit

MAX_VERDICTS = 100
# `alerts.conversation_idle` is at most this: a conversation is never quiet for longer.
MAX_AGE_S = parse_duration(CONVERSATION_MAX_AGE)
MAX_OPEN = 20_000
MAX_REMEMBERED = 20_000
REMEMBER_S = 86_400.0
# A conversation is none (an id shared by unrelated requests: a constant, a pod, a recycled
# slot, a user over days) once it holds this many verdicts, this many units, spans longer
# than a unit may last, or holds more than this share of its traffic (past this many
# verdicts).
DEGENERATE_VERDICTS = 1_000
DEGENERATE_UNITS = 10
DEGENERATE_SPAN_S = MAX_AGE_S
DEGENERATE_SHARE = 0.5
DEGENERATE_SHARE_MIN = 20
# The share of verdicts in such conversations is followed over this time (decayed), from
# this many verdicts on; the ids are set aside above FALLBACK_ON, taken back below
# FALLBACK_OFF.
SHARE_DECAY_S = 6 * 3_600.0
SHARE_MIN_VERDICTS = 50.0


@dataclass(slots=True)
class _Open:
    """A unit under way: its verdicts, and the conversation's before it began (`shown`,
    summing to `shown_defects`, in `units` units since `since`); `seen` is how many
    verdicts its (rule, service, cohort) had counted when the unit opened."""

    samples: int
    defects: float
    squares: float
    first: float
    last: float
    shown: int = 0
    shown_defects: float = 0.0
    since: float = math.nan
    units: int = 0
    seen: float = 0.0
    # Found to be no conversation (its verdicts so far were counted as such then).
    found: bool = False

    def degenerate(self, now: float, counted: float) -> bool:
        """Whether the conversation is no conversation (`counted`: the verdicts of its
        (rule, service, cohort) so far): it spans days, holds thousands of verdicts or
        many units, or holds most of the traffic since it opened."""
        since = self.first if math.isnan(self.since) else self.since
        return _none(self.shown + self.samples, self.units, now - since) or (
            self.samples >= DEGENERATE_SHARE_MIN
            and self.samples > DEGENERATE_SHARE * (counted - self.seen)
        )


def _none(verdicts: float, units: int, span_s: float) -> bool:
    """Whether an id of so many verdicts, units and span is no conversation."""
    return (
        verdicts >= DEGENERATE_VERDICTS or span_s >= DEGENERATE_SPAN_S or units >= DEGENERATE_UNITS
    )


def conversation_key(conversation: str) -> int:
    return int.from_bytes(hashlib.blake2b(conversation.encode(), digest_size=8).digest(), "big")


class Conversations:
    """The open conversations of one (rule, service, cohort), and what the ones closed
    recently showed; and how much of the traffic is in conversations that are none
    (`degenerate_share`)."""

    __slots__ = (
        "_carry",
        "_closed",
        "_counted",
        "_degenerate",
        "_idle_s",
        "_open",
        "_remember_s",
        "_share_at",
        "_total",
    )

    def __init__(
        self, idle_s: float, remember_s: float = REMEMBER_S, *, carry: bool = True
    ) -> None:
        self._idle_s = idle_s
        self._remember_s = remember_s
        # Whether a closed one's verdicts are carried into its next unit (or only its key).
        self._carry = carry
        # Least recently active first.
        self._open: OrderedDict[int, _Open] = OrderedDict()
        # Closed conversations: (verdicts, their defect sum, when closed, since when the
        # conversation was seen, its units), oldest first.
        self._closed: OrderedDict[int, tuple[int, float, float, float, int]] = OrderedDict()
        self._counted = 0.0
        # Verdicts of degenerate conversations and all, decayed over `SHARE_DECAY_S`.
        self._degenerate = 0.0
        self._total = 0.0
        self._share_at: float | None = None

    def __len__(self) -> int:
        return len(self._open)

    @property
    def remembered(self) -> int:
        """How many closed conversations are remembered."""
        return len(self._closed)

    def sizes(self) -> tuple[int, int]:
        """`len(self)` and `remembered` in one call (asked twice per verdict counted)."""
        return len(self._open), len(self._closed)

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
            shown, shown_defects, _, since, units = self._closed.pop(key, (0, 0.0, 0.0, now, 0))
            entry = self._open[key] = _Open(
                0, 0.0, 0.0, now, now, shown, shown_defects, since, units, self._counted
            )
            # One found to be none before (at its close) was counted as such then.
            entry.found = entry.degenerate(now, self._counted)
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
        self._counted += samples
        degenerate = entry.degenerate(now, self._counted)
        # Once found to be none, what the id gathered (this unit's verdicts) counts as none
        # too: an id known late (a recycled slot past six hours) is set aside at once.
        found = entry.samples - samples if degenerate and not entry.found else 0
        entry.found = entry.found or degenerate
        self._count_share(samples, samples + found if degenerate else 0, now)
        out = []
        if entry.samples >= MAX_VERDICTS or now - entry.first >= MAX_AGE_S:
            out.append(self._close(key, self._open.pop(key), now))
        while len(self._open) > MAX_OPEN:
            quietest, oldest = self._open.popitem(last=False)
            out.append(self._close(quietest, oldest, now))
        return arrival, out

    def _count_share(self, samples: int, degenerate: int, now: float) -> None:
        """`samples` new verdicts, and `degenerate` verdicts (new or counted before) found
        to be of ids that are none."""
        if self._share_at is not None and now > self._share_at:
            decay = math.exp(-(now - self._share_at) / SHARE_DECAY_S)
            self._degenerate *= decay
            self._total *= decay
        self._share_at = now if self._share_at is None else max(self._share_at, now)
        self._total += samples
        self._degenerate = min(self._degenerate + degenerate, self._total)

    def degenerate_share(self) -> float | None:
        """The share of recent verdicts (decayed over `SHARE_DECAY_S`) that came in
        conversations that are none (`_Open.degenerate`); None before `SHARE_MIN_VERDICTS`
        (as after a restart: the share is not saved)."""
        if self._total < SHARE_MIN_VERDICTS:
            return None
        return self._degenerate / self._total

    def degenerate_since(self) -> float | None:
        """When the earliest id known to be no conversation (open and found so, or closed
        and past a count or span that makes one none) was first seen; None: none known."""
        open_ = (
            e.first if math.isnan(e.since) else e.since for e in self._open.values() if e.found
        )
        closed = (
            since for n, _, at, since, units in self._closed.values() if _none(n, units, at - since)
        )
        return min((*open_, *closed), default=None)

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
        while self._closed and now - next(iter(self._closed.values()))[2] >= self._remember_s:
            self._closed.popitem(last=False)
        return out

    def knows(self, key: int) -> bool:
        """Whether `key` is open or remembered."""
        return key in self._open or key in self._closed

    def remember(self, key: int, samples: int, defects: float, at: float) -> None:
        """Takes `key` as a conversation that showed `samples` verdicts summing to
        `defects` and closed at `at` (a request seen once before it repeated)."""
        self._closed[key] = (samples, defects, at, at, 0)
        self._closed.move_to_end(key)
        while len(self._closed) > MAX_REMEMBERED:
            self._closed.popitem(last=False)

    def _close(self, key: int, entry: _Open, now: float) -> Unit:
        """`entry`'s unit, its conversation remembered (and, found to be none only now, its
        unit's verdicts counted as such)."""
        if not entry.found and entry.degenerate(now, self._counted):
            self._count_share(0, entry.samples, now)
        since = entry.first if math.isnan(entry.since) else entry.since
        carried = self._carry
        self._closed[key] = (
            entry.shown + entry.samples if carried else 0,
            entry.shown_defects + entry.defects if carried else 0.0,
            now,
            since,
            entry.units + 1,
        )
        self._closed.move_to_end(key)
        while len(self._closed) > MAX_REMEMBERED:
            self._closed.popitem(last=False)
        return _unit(entry)

    def snapshot(self) -> dict[str, list[list[float]]]:
        return {
            "open": [
                [
                    key,
                    e.samples,
                    e.defects,
                    e.squares,
                    e.first,
                    e.last,
                    e.shown,
                    e.shown_defects,
                    e.first if math.isnan(e.since) else e.since,
                    e.units,
                ]
                for key, e in self._open.items()
            ],
            "closed": [
                [key, n, d, at, since, units]
                for key, (n, d, at, since, units) in self._closed.items()
            ],
        }

    def restore(self, raw: Any) -> None:
        """Takes back what `snapshot` gave (or a list of open conversations, as state files
        written before closed ones were remembered hold; or open ones without `since` and
        `units`, and closed ones without either, as files before those were kept)."""
        if isinstance(raw, list):
            raw = {"open": raw, "closed": []}
        if not isinstance(raw, dict) or not all(
            isinstance(raw.get(part), list) for part in ("open", "closed")
        ):
            raise TypeError("conversations: lists of open and closed ones expected")
        opened: OrderedDict[int, _Open] = OrderedDict()
        for entry in raw["open"][-MAX_OPEN:]:
            if not isinstance(entry, list) or len(entry) not in (6, 8, 10):
                raise ValueError(
                    "conversations: [key, samples, defects, squares, first, last, shown, "
                    "shown defects, since, units]"
                )
            key, n, *numbers = entry
            shown, shown_defects = numbers[4:6] if len(numbers) >= 6 else (0, 0.0)
            d, q, first, last = _numbers(numbers[:4])
            since, units = _numbers(numbers[6:8]) if len(numbers) == 8 else (first, 0.0)
            _check_counts(key, n, d, q)
            _check_counts(key, shown, float(shown_defects), float(shown_defects))
            _check_counts(key, units, 0.0, 0.0)
            opened[key] = _Open(
                int(n), d, q, first, last, int(shown), float(shown_defects), since, int(units)
            )
        closed: OrderedDict[int, tuple[int, float, float, float, int]] = OrderedDict()
        for entry in raw["closed"][-MAX_REMEMBERED:]:
            if not isinstance(entry, list) or len(entry) not in (4, 6):
                raise ValueError(
                    "conversations: a closed one is [key, samples, defects, closed, since, units]"
                )
            key, n, *numbers = entry
            d, at = _numbers(numbers[:2])
            since, units = _numbers(numbers[2:]) if len(numbers) == 4 else (at, 0.0)
            _check_counts(key, n, d, d)
            _check_counts(key, units, 0.0, 0.0)
            closed[key] = (int(n), d, at, since, int(units))
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
