"""Delivery acknowledgement: a delivery's `on_done` is called once everything built from it
has finished.

Spans of one trace may come in several deliveries (Kafka messages), so each delivery owes
one unit per trace it added spans to, and a trace settles every delivery that contributed
once all its records are finished (at once when it yields none: not sampled, not a RAG
trace, or unreadable). A late span of a released trace owes its unit to that trace until
its records are finished, and nothing after. Everything here runs on the event loop (the
trace stage's `consume`, the evaluation stage finishing items), so nothing is locked.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable

from monitor.component import OnDone


class Ack:
    """What one delivery still owes before its `on_done` is called. Starts held by one
    unit while the delivery is taken apart, so it cannot finish half-registered."""

    __slots__ = ("_ok", "_on_done", "_owed", "origin")

    def __init__(self, on_done: OnDone, origin: Hashable | None) -> None:
        self._on_done = on_done
        self._owed = 1
        self._ok = True
        self.origin = origin  # the delivery's, for `TraceStage.abandon`

    def owe(self, units: int) -> None:
        self._owed += units

    def settle(self, ok: bool = True) -> None:
        self._owed -= 1
        self._ok &= ok
        if not self._owed:
            self._on_done(self._ok)


class Contributors:
    """The deliveries of a released, sampled trace, settled together once it is finished.
    Until then the deliveries of its late spans join them: a late span is acknowledged
    only once the trace it belongs to was really evaluated (False if it was abandoned)."""

    __slots__ = ("_acks", "_registry", "_trace_id")

    def __init__(self, trace_id: str, acks: list[Ack], registry: Acknowledgements) -> None:
        self._trace_id = trace_id
        self._acks: list[Ack] | None = acks  # None once settled
        self._registry = registry

    def __bool__(self) -> bool:
        return bool(self._acks)

    def join(self, ack: Ack) -> None:
        """Add a late span's delivery (the trace is not settled yet)."""
        assert self._acks is not None
        self._acks.append(ack)
        ack.owe(1)

    def settle(self, ok: bool = True) -> None:
        acks, self._acks = self._acks or [], None
        self._registry.evaluated(self._trace_id, self)
        for ack in acks:
            ack.settle(ok)


class Acknowledgements:
    """One trace stage's acknowledgement state: the deliveries of open traces, and of the
    released, sampled traces whose records are not finished yet."""

    def __init__(self) -> None:
        self._open: dict[str, list[Ack]] = {}
        self._evaluating: dict[str, Contributors] = {}

    def register(self, ack: Ack, assembling: Iterable[str], late: Iterable[str]) -> None:
        """The delivery owes one unit per trace still being assembled that it added spans
        to (`assembling`: open, or released by this very delivery); its late spans (of
        `late`, released traces) owe one to their trace while its records are not
        finished, and nothing after."""
        joined = 0
        for trace_id in assembling:
            self._open.setdefault(trace_id, []).append(ack)
            joined += 1
        for trace_id in late:
            evaluating = self._evaluating.get(trace_id)
            if evaluating is not None:
                evaluating.join(ack)
        ack.owe(joined)

    def released(self, trace_id: str) -> list[Ack]:
        """The deliveries of a trace that assembly just released."""
        return self._open.pop(trace_id, [])

    def evaluating(self, trace_id: str, acks: list[Ack]) -> Contributors:
        """The deliveries of a released, sampled trace, waiting for its records; its late
        spans' deliveries join them meanwhile."""
        contributors = Contributors(trace_id, acks, self)
        if acks:
            self._evaluating[trace_id] = contributors
        return contributors

    def evaluated(self, trace_id: str, contributors: Contributors) -> None:
        if self._evaluating.get(trace_id) is contributors:
            del self._evaluating[trace_id]

    def holds(self, origins: Collection[Hashable]) -> int:
        """How many acknowledged deliveries of `origins` wait in open traces."""
        wanted = frozenset(origins)
        waiting = {
            id(ack): ack for acks in self._open.values() for ack in acks if ack.origin in wanted
        }
        return len(waiting)

    def from_any(self, trace_id: str, origins: Collection[Hashable]) -> bool:
        """Whether the open trace holds an acknowledged delivery of one of `origins`."""
        return any(ack.origin in origins for ack in self._open.get(trace_id, ()))

    def handed_back(
        self, origins: frozenset[Hashable], is_open: Callable[[str], bool]
    ) -> list[str]:
        """The open traces whose acknowledged deliveries all came from `origins`; those
        deliveries are settled as not finished."""
        gone = [
            trace_id
            for trace_id, acks in self._open.items()
            if acks and is_open(trace_id) and all(ack.origin in origins for ack in acks)
        ]
        for trace_id in gone:
            for ack in self._open.pop(trace_id):
                ack.settle(False)
        return gone
