"""The instruction template of each service and route, learned from its prompts: the
opening and closing lines every distinct prompt of a sender has held (`PromptTemplates`;
`_prompt_documents.py` leaves them out of the documents it splits from a prompt)."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass

# Senders a route's template is learned from, and how many routes (least recently seen
# forgotten).
SENDERS_PER_ROUTE = 8
MAX_ROUTES = 512
# Distinct prompts of a sender that tell its template, and that relearn it once broken.
MIN_PROMPTS = 2
RELEARN_PROMPTS = 32
_RECENT = 8  # prompts' hashes a sender keeps to tell a repeat


@dataclass(slots=True)
class _Generation:
    """What every distinct prompt of one sender on a route has opened and closed with
    since the generation began, and how many such prompts there were."""

    opening: tuple[int, ...]
    closing: tuple[int, ...]
    prompts: int = 1

    def add(self, lines: tuple[int, ...]) -> None:
        self.opening = _common(self.opening, lines)
        self.closing = _common(self.closing[::-1], lines[::-1])[::-1]
        self.prompts += 1

    def holds(self, lines: tuple[int, ...]) -> bool:
        """Whether `lines` opens and closes as every prompt of the generation did."""
        return lines[: len(self.opening)] == self.opening and (
            not self.closing or lines[-len(self.closing) :] == self.closing
        )

    def lines(self) -> frozenset[int]:
        return frozenset(self.opening) | frozenset(self.closing)


@dataclass(slots=True)
class _Sender:
    learned: _Generation
    recent: deque[int]  # the last prompts' hashes: a repeat tells nothing
    # Begun after a prompt broke `learned`: replaces it once it has `RELEARN_PROMPTS`.
    next: _Generation | None = None
    broken: bool = False


def _common(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = 0
    most = min(len(a), len(b))
    while n < most and a[n] == b[n]:
        n += 1
    return a[:n]


class PromptTemplates:
    """What the prompts of each (service, route) share, learned per sender: the opening
    and closing lines every distinct prompt of a sender has held are its instruction
    template. Thread-safe (worker threads extract in parallel); each worker process learns
    its own."""

    def __init__(self, routes: int = MAX_ROUTES, senders: int = SENDERS_PER_ROUTE) -> None:
        self._routes = routes
        self._senders = senders
        self._seen: OrderedDict[tuple[str, str], dict[str, _Sender]] = OrderedDict()
        self._lock = threading.Lock()

    def shared(
        self, key: tuple[str, str], lines: tuple[int, ...], sender: str = "", asked: str = ""
    ) -> frozenset[int] | None:
        """The template lines of `key` for a prompt of `sender` (None while too few
        prompts tell), then `lines` learned as its latest prompt, asked `asked`: prompts
        of other questions are other prompts, even with the same lines (a system prompt
        that never changes is the template).

        A line is the template's when it opens or closes every distinct prompt the sender
        has sent on the route since it was first seen (`MIN_PROMPTS` at least): a
        document retrieved first for many questions in a row was not first in the
        sender's earlier prompts. A sender with too few prompts of its own gets what every
        sender with enough agrees on, when two at least do: no single sender teaches
        another's template. A prompt that breaks a sender's template shrinks it; the
        lines its next `RELEARN_PROMPTS` distinct prompts share then replace it (a new
        version of the template)."""
        with self._lock:
            route = self._seen.pop(key, None)
            if route is None:
                route = {}
            self._seen[key] = route
            while len(self._seen) > self._routes:
                self._seen.popitem(last=False)
            template = _template(route, sender)
            self._learn(route, sender, lines, hash((lines, asked)))
        return template

    def known(self, key: tuple[str, str], sender: str = "") -> frozenset[int] | None:
        """The template lines of `key` for `sender`'s prompts, learning nothing (None while
        too few prompts tell)."""
        with self._lock:
            route = self._seen.get(key)
            return None if route is None else _template(route, sender)

    def _learn(
        self, route: dict[str, _Sender], sender: str, lines: tuple[int, ...], digest: int
    ) -> None:
        own = route.get(sender)
        if own is None:
            if len(route) >= self._senders:
                # The sender that has shown least (then the first met) makes room: one
                # that rotates its key cannot push out those that keep theirs.
                del route[min(route, key=lambda s: route[s].learned.prompts)]
            route[sender] = _Sender(_Generation(lines, lines), deque([digest], maxlen=_RECENT))
            return
        if digest in own.recent:
            return
        own.recent.append(digest)
        learned = own.learned
        if learned.prompts >= MIN_PROMPTS and not learned.holds(lines):
            own.broken, own.next = True, None  # a new generation begins with the next one
            learned.add(lines)
            return
        learned.add(lines)
        if not own.broken:
            return
        if own.next is None:
            own.next = _Generation(lines, lines)
        else:
            own.next.add(lines)
        if own.next.prompts >= RELEARN_PROMPTS:
            own.learned, own.next, own.broken = own.next, None, False

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


def _template(route: dict[str, _Sender], sender: str) -> frozenset[int] | None:
    own = route.get(sender)
    if own is not None and own.learned.prompts >= MIN_PROMPTS:
        return own.learned.lines()
    return _agreed(route)


def _agreed(route: dict[str, _Sender]) -> frozenset[int] | None:
    """The lines every sender of the route with enough prompts has learned, when two at
    least have."""
    learned = [s.learned.lines() for s in route.values() if s.learned.prompts >= MIN_PROMPTS]
    if len(learned) < 2:
        return None
    return frozenset.intersection(*learned)


TEMPLATES = PromptTemplates()
"""What this process has learned of its services' prompt templates."""
