"""The ids of the traces released lately, each with what released it and who sent its root:
a span of one of them that comes later is late (`TraceAssembler`), not a new trace.

Two generations, each of at most `RELEASED_S` of releases and half `max_open_traces` ids:
an id is remembered for `RELEASED_S` (or half `max_open_traces` releases) at least, and
twice that at most; under steady traffic the memory is flat after that time, not only
once `max_open_traces` ids have been released (hours at a few traces a second)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

# A collector retries a failed export for up to 5 minutes: its spans can come that late.
RELEASED_S = 600.0

V = TypeVar("V")


class Released(Generic[V]):
    __slots__ = ("_before", "_clock", "_half", "_now", "_since")

    def __init__(self, max_ids: int, clock: Callable[[], float]) -> None:
        self._half = max(1, max_ids // 2)
        self._clock = clock
        self._now: dict[str, V] = {}
        self._before: dict[str, V] = {}
        self._since = clock()

    def get(self, trace_id: str) -> V | None:
        found = self._now.get(trace_id)
        return self._before.get(trace_id) if found is None else found

    def add(self, trace_id: str, value: V) -> None:
        now = self._clock()
        if len(self._now) >= self._half or now - self._since >= RELEASED_S:
            self._before, self._now = self._now, {}
            self._since = now
        self._now[trace_id] = value

    def __len__(self) -> int:
        return len(self._now) + len(self._before)
