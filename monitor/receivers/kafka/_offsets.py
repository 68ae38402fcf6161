"""Per-partition offset bookkeeping for at-least-once Kafka consumption.

Every message handed to the pipeline is registered with the number of units it still
owes (records, or traces it contributed spans to); a run of messages handed on as one
delivery is registered once, at its first offset, and stretched over its last. When a
unit finishes, the entry's count drops; the partition's committable offset advances over
the contiguous prefix of entries whose counts reached zero. A slow message therefore
holds back the commit of everything after it, never the other way round: a crash
re-delivers, it never skips.

Only the consumer thread touches a tracker; completions reach it through a thread-safe
deque of `(tracker, offset)` tokens, so the event loop never takes a lock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class PartitionTracker:
    """Offsets of one assigned partition (one assignment generation: a new assignment of
    the same partition gets a new tracker, and tokens of the old one are ignored)."""

    topic: str
    partition: int
    committed: int | None = None
    """The offset last committed by us (the next offset to read), if any."""
    _entries: deque[list[int]] = field(default_factory=deque)
    _pending: dict[int, list[int]] = field(default_factory=dict)
    _next: int | None = None
    outstanding: int = 0
    """Units handed out and not yet finished, across all messages of the partition."""
    revoked: bool = False
    """The partition was revoked from us: completions of its messages are ignored."""
    given_away: bool = False
    """Its open traces are being handed back: their messages are abandoned, not failed."""
    messages: dict[int, list[Any]] = field(default_factory=dict)
    """The messages of each unfinished delivery, by the offset it is registered at, kept
    only where a failed delivery is dead-lettered (the receiver's to fill and empty)."""
    dead_lettered: set[int] = field(default_factory=set)
    """Unfinished deliveries whose failed records were dead-lettered one by one."""

    def add(self, offset: int, units: int) -> None:
        """Register a message at `offset` that finishes after `units` completions."""
        entry = [offset, units, offset]  # first offset, units owed, last offset
        self._entries.append(entry)
        if units > 0:
            self._pending[offset] = entry
            self.outstanding += units
        else:  # finished already: the prefix may move (an unfinished entry cannot move it)
            self._advance()

    def stretch(self, offset: int, last: int) -> None:
        """The entry registered at `offset` (the newest, still unfinished) stands for every
        message through `last`: a run handed on as one delivery."""
        self._pending[offset][2] = last

    def owe(self, offset: int, units: int) -> None:
        """Add `units` to the message at `offset`, which must still be unfinished."""
        if units <= 0:
            return
        entry = self._pending[offset]
        entry[1] += units
        self.outstanding += units

    def finish(self, offset: int, units: int = 1) -> None:
        """`units` of the message at `offset` finished (unknown offsets are ignored)."""
        entry = self._pending.get(offset)
        if entry is None:
            return
        done = min(units, entry[1])
        entry[1] -= done
        self.outstanding -= done
        if entry[1] == 0:
            del self._pending[offset]
            if entry is self._entries[0]:  # only a finished head moves the prefix
                self._advance()

    def drop(self, offset: int) -> None:
        """One unit of the message at `offset` was abandoned: it no longer counts as
        outstanding, and the message is never finished, so the committable offset stops
        before it (the next owner reads it again)."""
        entry = self._pending.get(offset)
        if entry is not None and self.outstanding > 0:
            self.outstanding -= 1

    def _advance(self) -> None:
        entries = self._entries
        while entries and entries[0][1] == 0:
            self._next = entries.popleft()[2] + 1

    @property
    def committable(self) -> int | None:
        """The offset to commit now (one past the finished prefix), or None when no
        message finished since the last commit."""
        if self._next is None or self._next == self.committed:
            return None
        return self._next

    @property
    def first_unfinished(self) -> int | None:
        """The offset of the first message not finished yet (None when all are)."""
        return self._entries[0][0] if self._entries else None
