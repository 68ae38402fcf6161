"""Per-partition offset bookkeeping for at-least-once Kafka consumption.

Every message handed to the pipeline is registered with the number of units it still
owes (records, or traces it contributed spans to); a run of messages handed on as one
delivery is registered once, at its first offset, and stretched over its last. When a
unit finishes, the entry's count drops; the partition's committable offset advances over
the contiguous prefix of entries whose counts reached zero. A slow message therefore
holds back the commit of everything after it, never the other way round: a crash
re-delivers, it never skips.

Messages finished after the first unfinished one (behind an open trace, most often) are
named in the commit's metadata (`finished_metadata`), so that whoever reads the
partition next from the committed offset — another replica after a rebalance, this one
after a restart — skips them (`PartitionTracker.skip`) instead of evaluating them a second
time: a trace's late half read again without its first half would be a cut record.

Only the consumer thread touches a tracker; completions reach it through a thread-safe
deque of `(tracker, offset)` tokens, so the event loop never takes a lock.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from typing import Any

FINISHED_PREFIX = "rag-monitor finished:"
# Brokers refuse commit metadata over `offset.metadata.max.bytes` (4096 by default); the
# ranges nearest the committed offset are kept, the rest are read again.
MAX_METADATA_CHARS = 3_000
_RANGE = re.compile(r"(\d{1,19})(?:-(\d{1,19}))?")


@dataclass(eq=False)
class PartitionTracker:
    """Offsets of one assigned partition (one assignment generation: a new assignment of
    the same partition gets a new tracker, and tokens of the old one are ignored)."""

    topic: str
    partition: int
    committed: int | None = None
    """The offset last committed by us (the next offset to read), if any."""
    committed_metadata: str = ""
    """The metadata committed with it (`finished_metadata`)."""
    read_to: int = -1
    """One past the last offset registered: what the client delivers again below it (its
    position reset to the committed offset, on a partition given straight back) was read
    already and is not registered twice."""
    skip: list[tuple[int, int]] = field(default_factory=list)
    """Offset ranges (inclusive) past the committed offset that a previous reader of the
    partition finished (`parse_finished`): not handed on again."""
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
        self.read_to = offset + 1
        if units > 0:
            self._pending[offset] = entry
            self.outstanding += units
        else:  # finished already: the prefix may move (an unfinished entry cannot move it)
            self._advance()

    def stretch(self, offset: int, last: int) -> None:
        """The entry registered at `offset` (the newest, still unfinished) stands for every
        message through `last`: a run handed on as one delivery."""
        self._pending[offset][2] = last
        self.read_to = last + 1

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

    def commit_point(self) -> tuple[int, str] | None:
        """What a commit sends now: the committable offset (or, when only later messages
        finished, the first unfinished one) and the metadata naming what finished beyond
        it; None when neither changed since the last commit."""
        ranges = self._finished_beyond()
        offset = self._next
        if offset is None:
            if not ranges:
                return None
            offset = self._entries[0][0]
        metadata = finished_metadata(ranges)
        if (offset, metadata) == (self.committed, self.committed_metadata):
            return None
        return offset, metadata

    def _finished_beyond(self) -> list[tuple[int, int]]:
        """The finished entries behind the first unfinished one, as merged ranges."""
        ranges: list[tuple[int, int]] = []
        for first, units, last in self._entries:
            if units:
                continue
            if ranges and ranges[-1][1] + 1 == first:
                ranges[-1] = (ranges[-1][0], last)
            else:
                ranges.append((first, last))
        return ranges

    def skipped(self, offset: int) -> bool:
        """Whether a previous reader finished the message at `offset` (`skip`)."""
        index = bisect_right(self.skip, (offset, float("inf"))) - 1
        return index >= 0 and self.skip[index][0] <= offset <= self.skip[index][1]

    @property
    def first_unfinished(self) -> int | None:
        """The offset of the first message not finished yet (None when all are)."""
        return self._entries[0][0] if self._entries else None


def finished_metadata(ranges: list[tuple[int, int]]) -> str:
    """Commit metadata naming offset ranges finished beyond the committed offset; as many
    as fit in `MAX_METADATA_CHARS`, nearest first."""
    if not ranges:
        return ""
    parts: list[str] = []
    size = len(FINISHED_PREFIX)
    for first, last in ranges:
        part = str(first) if first == last else f"{first}-{last}"
        size += len(part) + 1
        if size > MAX_METADATA_CHARS:
            break
        parts.append(part)
    return FINISHED_PREFIX + ",".join(parts)


def parse_finished(metadata: str | None, committed: int) -> list[tuple[int, int]]:
    """The ranges `finished_metadata` wrote, past `committed`, sorted; nothing for
    metadata that is not ours or not well formed (it is only a hint: what it does not name
    is read again)."""
    if not metadata or not metadata.startswith(FINISHED_PREFIX):
        return []
    ranges = []
    for part in metadata[len(FINISHED_PREFIX) :].split(","):
        match = _RANGE.fullmatch(part)
        if match is None:
            return []
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if last < first or first < committed:
            return []
        ranges.append((first, last))
    return sorted(ranges)
