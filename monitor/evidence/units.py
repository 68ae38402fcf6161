"""What the verdicts of a rule are judged as: their conversation's (`conversations.py`),
or what is not a conversation: a request asked again (its fingerprint,
`monitor.records.fingerprint`) is gathered as one, its repeats predicted with their own
measured correlation (`RepeatCorrelation`) and counted in the windows up to a share of the
traffic; and ids that are no conversations (`_Open.degenerate`: a constant, pods, recycled
slots, users over days) are set aside while they carry most of the traffic.

Ids set aside fall back to the unit their traffic supports. An id's **sessions** (its
verdicts split at every pause of `alerts.conversation_idle`, a return after the pause a new
one: `Conversations` that remember a closed one for the idle time only) are conversations
where an id is reused only after a pause (a recycled slot, a user back the next day): they
are judged as conversations while they are (`_Open.degenerate` of the sessions). An id
never quiet that long (a constant, the pods that served the requests, a slot shared by
overlapping conversations) has sessions that are none too: its verdicts then count as
requests, and the clustering nobody declared (`dispersion.solo_dispersion`) tempers them.
The assumption sessions add: verdicts of an id's different sessions are independent, as
those of different conversations are (`sequential.py`, premise 1).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from monitor.evidence.conversations import (
    DEGENERATE_UNITS,
    DEGENERATE_VERDICTS,
    Conversations,
)
from monitor.evidence.counts import Arrival, Unit
from monitor.evidence.dispersion import RHO_PRIOR

_log = logging.getLogger(__name__)

# The ids are set aside while the share of verdicts in ones that are no conversations
# (`Conversations.degenerate_share`) is FALLBACK_ON or more, taken back below FALLBACK_OFF.
FALLBACK_ON = 0.5
FALLBACK_OFF = 0.1
# A request asked again within this long counts with its earlier askings; the requests
# seen once are remembered for that long, at most this many per (rule, service, cohort).
REPEAT_S = 3_600.0
MAX_SEEN = 4_096
# The correlation of a repeated request's verdicts is measured from this many repeats on
# (before: RHO_PRIOR), and taken at its estimate plus this many standard errors.
MIN_REPEAT_PAIRS = 30.0
REPEAT_RHO_Z = 2.0
# A request counts in the windows (and so in the level and season) for at most this share
# of its (rule, service, cohort)'s verdicts over the last `REPEAT_S` (decayed), and at least
# `REPEAT_MIN_COUNTED` times: a burst of one request would otherwise be most of its hour.
# The cut depends on counts alone, never on verdicts, so what is counted is not biased.
REPEAT_SHARE = 0.05
REPEAT_MIN_COUNTED = 10
# What verdicts of ids set aside are judged by (`Units.by_sessions`), in log lines and in
# the state file.
_FALLBACK_SAVED = {True: "sessions", False: "requests"}
_BY = {
    True: "their id's sessions (split at each pause of alerts.conversation_idle)",
    False: "request",
}


class RepeatCorrelation:
    """How alike the verdicts of one request asked again are: the correlation of each
    repeat's verdicts (mean `x` of `n`) with what the same request showed before (mean `s`
    of `N`), `1 - (x - s)^2 / (V (1 / n + 1 / N))` averaged over the repeats (`V` the
    variance of all verdicts; for exchangeable verdicts of correlation rho its expectation
    is rho, whatever the request's own rate), its
    upper bound the estimate plus `REPEAT_RHO_Z` standard errors; all decayed over
    `REPEAT_S`, so a burst of one request repeated (identical verdicts) is known as one
    within tens of repeats, and a few questions asked over and over with verdicts of their
    own keep their evidence. `RHO_PRIOR` until `MIN_REPEAT_PAIRS` repeats."""

    __slots__ = ("_at", "_n", "_pairs", "_products", "_squares", "_sum", "_sum2")

    def __init__(self) -> None:
        self._at: float | None = None
        # All verdicts: count, sum, sum of squares.
        self._n = self._sum = self._sum2 = 0.0
        # Repeats: count, sum of products, sum of products squared.
        self._pairs = self._products = self._squares = 0.0

    def observe(self, histogram: Sequence[float], levels: Sequence[float], now: float) -> None:
        if self._at is not None and now > self._at:
            decay = math.exp(-(now - self._at) / REPEAT_S)
            self._n *= decay
            self._sum *= decay
            self._sum2 *= decay
            self._pairs *= decay
            self._products *= decay
            self._squares *= decay
        self._at = now if self._at is None else max(self._at, now)
        for count, value in zip(histogram, levels, strict=True):
            if count:
                self._n += count
                self._sum += count * value
                self._sum2 += count * value * value

    def verdicts(self) -> float:
        """The verdicts seen lately (decayed over `REPEAT_S`)."""
        return self._n

    def _variance(self) -> float:
        mean = self._sum / self._n if self._n else 0.0
        return max(self._sum2 / self._n - mean * mean if self._n else 0.0, 1e-4)

    def pair(self, arrival: Arrival) -> None:
        """A request's verdicts (`arrival`) against what it showed before."""
        if arrival.earlier <= 0 or arrival.samples <= 0:
            return
        variance = self._variance()
        # Var(mean of n - mean of the N before) = V (1 - rho) (1 / n + 1 / N).
        gap = arrival.defects / arrival.samples - arrival.earlier_defects / arrival.earlier
        product = 1 - gap * gap / (variance * (1 / arrival.samples + 1 / arrival.earlier))
        self._pairs += 1
        self._products += product
        self._squares += product * product

    def bound(self) -> float:
        if self._pairs < MIN_REPEAT_PAIRS:
            return RHO_PRIOR
        estimate = self._products / self._pairs
        spread = max(0.0, self._squares / self._pairs - estimate * estimate)
        return min(1.0, max(0.0, estimate + REPEAT_RHO_Z * math.sqrt(spread / self._pairs)))


class Units:
    """What the verdicts of one (rule, service, cohort) are judged as: a request asked again
    (its fingerprint seen within `REPEAT_S`, among the `MAX_SEEN` last) as one with the
    earlier askings, whatever id it carries; else their conversation's (`Conversations`)
    while its ids are conversations; else one verdict each. While most of the recent traffic is in conversations
    that are none (`_Open.degenerate`), the ids are set aside (`fallback`), logged once per
    change as `label`: their verdicts count as their id's sessions (`by_sessions`) while
    most of those are conversations, else as requests."""

    __slots__ = (
        "_counted",
        "_label",
        "_pairs",
        "_seen",
        "by_sessions",
        "conversations",
        "fallback",
        "requests",
        "sessions",
    )

    def __init__(self, idle_s: float, label: str = "") -> None:
        self._label = label
        self.conversations = Conversations(idle_s)
        # The ids' sessions: a closed one is remembered for the idle time only.
        self.sessions = Conversations(idle_s, idle_s)
        self.requests = Conversations(idle_s, REPEAT_S, carry=False)
        # Requests seen once: fingerprint -> (when, verdicts, their defect sum), oldest first.
        self._seen: OrderedDict[int, tuple[float, int, float]] = OrderedDict()
        # Requests asked again: fingerprint -> (since when, verdicts counted in the windows).
        self._counted: OrderedDict[int, tuple[float, int]] = OrderedDict()
        self._pairs = RepeatCorrelation()
        self.fallback = False
        # With `fallback`: whether the ids' sessions are judged as conversations (else the
        # verdicts count as requests).
        self.by_sessions = False

    def __len__(self) -> int:
        return len(self.conversations) + len(self.sessions) + len(self.requests)

    @property
    def remembered(self) -> int:
        """How many closed conversations, sessions and requests are remembered."""
        return self.conversations.remembered + self.sessions.remembered + self.requests.remembered

    @property
    def seen(self) -> int:
        """How many requests are remembered as asked once, or with the verdicts they
        counted."""
        return len(self._seen) + len(self._counted)

    def held(self, open_bytes: int, closed_bytes: int, seen_bytes: int) -> int:
        """What `len(self)`, `remembered` and `seen` hold at the given bytes each, in one
        call: the alert entries ask it twice for every verdict they count."""
        c_open, c_closed = self.conversations.sizes()
        s_open, s_closed = self.sessions.sizes()
        r_open, r_closed = self.requests.sizes()
        return (
            (c_open + s_open + r_open) * open_bytes
            + (c_closed + s_closed + r_closed) * closed_bytes
            + (len(self._seen) + len(self._counted)) * seen_bytes
        )

    def _first_seen(self) -> float:
        """When the request `evict` would forget of those `seen` was asked (infinity with
        none)."""
        at = math.inf
        if self._seen:
            at = next(iter(self._seen.values()))[0]
        if self._counted:
            at = min(at, next(iter(self._counted.values()))[0])
        return at

    def oldest(self) -> float:
        """When what `evict` takes was closed or last active (`Conversations.oldest`), or
        asked (a request `seen`)."""
        return min(
            self.conversations.oldest(),
            self.sessions.oldest(),
            self.requests.oldest(),
            self._first_seen(),
        )

    def evict(self) -> Unit | None:
        """The memory budget's eviction hook (`Conversations.evict`), on whichever of the
        conversations, the requests and the requests `seen` holds the oldest; a request's
        unit is no conversation's. A request seen that is forgotten counts as asked anew
        when it comes again."""
        seen_at = self._first_seen()
        oldest = min(self.requests.oldest(), self.sessions.oldest(), self.conversations.oldest())
        if seen_at < oldest:
            if self._seen and next(iter(self._seen.values()))[0] == seen_at:
                self._seen.popitem(last=False)
            else:
                self._counted.popitem(last=False)
            return None
        if self.requests.oldest() == oldest:
            unit = self.requests.evict()
            return None if unit is None else dataclasses.replace(unit, conversation=False)
        if self.sessions.oldest() == oldest:
            unit = self.sessions.evict()
            return unit if self.fallback and self.by_sessions else None
        unit = self.conversations.evict()
        return None if self.fallback else unit

    def add(
        self,
        conversation: int | None,
        request: int | None,
        histogram: Sequence[float],
        levels: Sequence[float],
        now: float,
    ) -> tuple[Arrival | None, list[Unit]]:
        """`histogram[k]` verdicts at `levels[k]` of `conversation` and of the request whose
        fingerprint is `request` (either None: not known). Returns their arrival (None:
        they count as verdicts of their own) and the units that close now (and, when the
        ids' verdicts come to count as requests, a unit of none that says since when the
        ids were none, `Unit.none_since`)."""
        closed: list[Unit] = []
        self._pairs.observe(histogram, levels, now)
        if conversation is not None and not self._asked_again(request, now):
            arrival, closed = self.conversations.add(conversation, histogram, levels, now)
            by_session, of_sessions = self.sessions.add(conversation, histogram, levels, now)
            as_requests = self.fallback and not self.by_sessions
            self._judge_ids(now)
            if not self.fallback or self.by_sessions:
                if request is not None:  # asked first here: a later asking is its repeat
                    self._first_asking(request, histogram, levels, now)
                return (arrival, closed) if not self.fallback else (by_session, of_sessions)
            closed = [] if as_requests else self._none_since()
        if request is None:
            return None, closed
        if not self.requests.knows(request):
            seen = self._seen.pop(request, None)
            if seen is None or now - seen[0] >= REPEAT_S:
                self._first_asking(request, histogram, levels, now)
                return None, closed
            self.requests.remember(request, seen[1], seen[2], seen[0])
        arrival, more = self.requests.add(request, histogram, levels, now)
        self._pairs.pair(arrival)
        # Built whole: cheaper than `dataclasses.replace`, and it runs for every verdict.
        a = arrival
        rho, counted = self._pairs.bound(), self._share(request, a.samples, now)
        arrival = Arrival(
            a.samples, a.defects, a.squares, a.earlier, a.earlier_defects, rho, counted
        )
        return arrival, closed + [dataclasses.replace(u, conversation=False) for u in more]

    def _asked_again(self, request: int | None, now: float) -> bool:
        """Whether `request` was asked within `REPEAT_S`: its verdicts are then the
        request's unit, whatever conversation id they carry (a client sending one request
        over and over, each with a fresh session id, is one piece of evidence)."""
        if request is None:
            return False
        if self.requests.knows(request):
            return True
        seen = self._seen.get(request)
        return seen is not None and now - seen[0] < REPEAT_S

    def _first_asking(
        self, request: int, histogram: Sequence[float], levels: Sequence[float], now: float
    ) -> None:
        """Remembers `request` as asked once now, with its verdicts."""
        samples = int(sum(histogram))
        defects = sum(c * v for c, v in zip(histogram, levels, strict=True))
        self._seen.pop(request, None)
        self._seen[request] = (now, samples, defects)
        while len(self._seen) > MAX_SEEN:
            self._seen.popitem(last=False)

    def traffic(self, histogram: Sequence[float], levels: Sequence[float], now: float) -> None:
        """Verdicts of neither a conversation nor a known request: they count in the
        traffic a request's share is taken of."""
        self._pairs.observe(histogram, levels, now)

    def _share(self, request: int, samples: int, now: float) -> bool:
        """Whether `samples` more verdicts of `request` count in the windows."""
        start, count = self._counted.pop(request, (now, 0))
        if now - start >= REPEAT_S:
            start, count = now, 0
        allowed = max(REPEAT_MIN_COUNTED, REPEAT_SHARE * self._pairs.verdicts())
        counted = count + samples <= allowed
        self._counted[request] = (start, count + samples if counted else count)
        while len(self._counted) > MAX_SEEN:
            self._counted.popitem(last=False)
        return counted

    def _judge_ids(self, now: float) -> None:
        """Sets the ids aside, or takes them back, by the share of recent verdicts in ones
        that are no conversations; and, set aside, judges by their sessions while most of
        those are conversations."""
        share = self.conversations.degenerate_share()
        sessions = self.sessions.degenerate_share()
        if share is None or sessions is None:
            return  # not measured yet: what was decided (or restored) holds
        label = self._label or "alerts"
        if not self.fallback and share >= FALLBACK_ON:
            self.fallback = True
            self.by_sessions = sessions < FALLBACK_ON
            _log.warning(
                "%s: %.0f%% of the recent verdicts came in conversation ids that are no "
                "conversations (one id spans over 6 h, holds %d verdicts or %d units, or most of "
                "the traffic): the ids are set aside and verdicts are judged by %s",
                label,
                100 * share,
                DEGENERATE_VERDICTS,
                DEGENERATE_UNITS,
                _BY[self.by_sessions],
            )
        elif self.fallback and share < FALLBACK_OFF:
            self.fallback = self.by_sessions = False
            _log.warning(
                "%s: the conversation ids look like conversations again (%.0f%% of the "
                "recent verdicts in ones that are not): verdicts are judged by conversation",
                label,
                100 * share,
            )
        elif self.fallback and (
            sessions >= FALLBACK_ON if self.by_sessions else sessions < FALLBACK_OFF
        ):
            self.by_sessions = not self.by_sessions
            _log.warning(
                "%s: %.0f%% of the recent verdicts came in sessions of the ids that are no "
                "conversations: verdicts are judged by %s",
                label,
                100 * sessions,
                _BY[self.by_sessions],
            )

    def _none_since(self) -> list[Unit]:
        """The ids are set aside and their verdicts count as requests from now on: what was
        counted as their conversations since the earliest of them was seen is none either
        (a unit of no verdicts that says so, `Unit.none_since`)."""
        since = self.conversations.degenerate_since()
        return [] if since is None else [Unit(0, 0.0, 0.0, conversation=False, none_since=since)]

    def close_idle(self, now: float) -> list[Unit]:
        """The units quiet long enough by `now` (of the ids as sent, or with those set
        aside, of their sessions or neither: the others are dropped)."""
        conversations = self.conversations.close_idle(now)
        sessions = self.sessions.close_idle(now)
        requests = self.requests.close_idle(now)
        while self._seen and now - next(iter(self._seen.values()))[0] >= REPEAT_S:
            self._seen.popitem(last=False)
        # A request's unit teaches nothing of conversations: it is no conversation.
        requests = [dataclasses.replace(u, conversation=False) for u in requests]
        if not self.fallback:
            return conversations + requests
        return sessions + requests if self.by_sessions else requests

    def snapshot(self) -> dict[str, Any]:
        """The conversations, sessions and requests, and what ids set aside are judged by
        (`fallback`: null while they are not, else `"sessions"` or `"requests"`)."""
        fallback = None if not self.fallback else _FALLBACK_SAVED[self.by_sessions]
        return {
            **self.conversations.snapshot(),
            "requests": self.requests.snapshot(),
            "sessions": self.sessions.snapshot(),
            "fallback": fallback,
        }

    def restore(self, raw: Any) -> None:
        """Takes back `snapshot` (or `Conversations.snapshot`, as earlier files hold; files
        without sessions start them anew; files that kept `fallback` as two flags, whether
        ids were set aside and `by_sessions`, are read as such)."""
        self.conversations.restore(raw)
        if isinstance(raw, dict) and "requests" in raw:
            self.requests.restore(raw["requests"])
            if "sessions" in raw:
                self.sessions.restore(raw["sessions"])
            fallback = raw.get("fallback")
            if isinstance(fallback, bool):
                by_sessions = raw.get("by_sessions", False)
                if not isinstance(by_sessions, bool):
                    raise TypeError("conversations: by_sessions is not true or false")
                fallback = _FALLBACK_SAVED[by_sessions] if fallback else None
            if fallback is not None and fallback not in _FALLBACK_SAVED.values():
                raise TypeError("conversations: fallback is not null, sessions or requests")
            self.fallback = fallback is not None
            self.by_sessions = fallback == _FALLBACK_SAVED[True]
