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

`Units` adds what is not a conversation: a request asked again (its fingerprint,
`monitor.records.fingerprint`) is gathered as one, its repeats predicted with their own
measured correlation (`RepeatCorrelation`) and counted in the windows up to a share of the
traffic; and ids that are no conversations (`_Open.degenerate`: a constant, pods, recycled
slots, users over days) are set aside while they carry most of the traffic.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.alerts.evidence.dispersion import RHO_PRIOR
from monitor.config import CONVERSATION_MAX_AGE, parse_duration

_log = logging.getLogger(__name__)

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
        return (
            self.shown + self.samples >= DEGENERATE_VERDICTS
            or now - since >= DEGENERATE_SPAN_S
            or self.units >= DEGENERATE_UNITS
            or (
                self.samples >= DEGENERATE_SHARE_MIN
                and self.samples > DEGENERATE_SHARE * (counted - self.seen)
            )
        )


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
    # The correlation its verdicts are predicted with (None: the conversations' `rho`).
    rho: float | None = None
    # Whether its verdicts count in the windows: not for a request asked again past its
    # share of the traffic (`REPEAT_SHARE`).
    counted: bool = True


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

    def degenerate_share(self) -> float:
        """The share of recent verdicts (decayed over `SHARE_DECAY_S`) that came in
        conversations that are none (`_Open.degenerate`); 0 before `SHARE_MIN_VERDICTS`."""
        if self._total < SHARE_MIN_VERDICTS:
            return 0.0
        return self._degenerate / self._total

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
    """What the verdicts of one (rule, service, cohort) are judged as: their conversation's
    (`Conversations`) while its ids are conversations; a request asked again (its
    fingerprint seen within `REPEAT_S`, among the `MAX_SEEN` last) as one with the earlier
    askings; else one verdict each. While most of the recent traffic is in conversations
    that are none (`_Open.degenerate`), the ids are set aside (`fallback`), logged once per
    change as `label`: their verdicts count as requests."""

    __slots__ = ("_counted", "_label", "_pairs", "_seen", "conversations", "fallback", "requests")

    def __init__(self, idle_s: float, label: str = "") -> None:
        self._label = label
        self.conversations = Conversations(idle_s)
        self.requests = Conversations(idle_s, REPEAT_S, carry=False)
        # Requests seen once: fingerprint -> (when, verdicts, their defect sum), oldest first.
        self._seen: OrderedDict[int, tuple[float, int, float]] = OrderedDict()
        # Requests asked again: fingerprint -> (since when, verdicts counted in the windows).
        self._counted: OrderedDict[int, tuple[float, int]] = OrderedDict()
        self._pairs = RepeatCorrelation()
        self.fallback = False

    def __len__(self) -> int:
        return len(self.conversations) + len(self.requests)

    @property
    def remembered(self) -> int:
        """How many closed conversations and requests are remembered."""
        return self.conversations.remembered + self.requests.remembered

    @property
    def seen(self) -> int:
        """How many requests are remembered as asked once, or with the verdicts they
        counted."""
        return len(self._seen) + len(self._counted)

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
        return min(self.conversations.oldest(), self.requests.oldest(), self._first_seen())

    def evict(self) -> Unit | None:
        """The memory budget's eviction hook (`Conversations.evict`), on whichever of the
        conversations, the requests and the requests `seen` holds the oldest; a request's
        unit is no conversation's. A request seen that is forgotten counts as asked anew
        when it comes again."""
        seen_at = self._first_seen()
        if seen_at < min(self.requests.oldest(), self.conversations.oldest()):
            if self._seen and next(iter(self._seen.values()))[0] == seen_at:
                self._seen.popitem(last=False)
            else:
                self._counted.popitem(last=False)
            return None
        if self.requests.oldest() < self.conversations.oldest():
            unit = self.requests.evict()
            return None if unit is None else dataclasses.replace(unit, conversation=False)
        return self.conversations.evict()

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
        they count as verdicts of their own) and the units that close now."""
        closed: list[Unit] = []
        self._pairs.observe(histogram, levels, now)
        if conversation is not None:
            arrival, closed = self.conversations.add(conversation, histogram, levels, now)
            self._judge_ids(now)
            if not self.fallback:
                return arrival, closed
            closed = []
        if request is None:
            return None, closed
        if not self.requests.knows(request):
            seen = self._seen.pop(request, None)
            if seen is None or now - seen[0] >= REPEAT_S:
                samples = int(sum(histogram))
                defects = sum(c * v for c, v in zip(histogram, levels, strict=True))
                self._seen[request] = (now, samples, defects)
                while len(self._seen) > MAX_SEEN:
                    self._seen.popitem(last=False)
                return None, closed
            self.requests.remember(request, seen[1], seen[2], seen[0])
        arrival, more = self.requests.add(request, histogram, levels, now)
        self._pairs.pair(arrival)
        arrival = dataclasses.replace(
            arrival,
            rho=self._pairs.bound(),
            counted=self._share(request, arrival.samples, now),
        )
        return arrival, closed + [dataclasses.replace(u, conversation=False) for u in more]

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
        share = self.conversations.degenerate_share()
        if not self.fallback and share >= FALLBACK_ON:
            self.fallback = True
            _log.warning(
                "%s: %.0f%% of the recent verdicts came in conversation ids that are no "
                "conversations (one id spans over 6 h, holds %d verdicts or %d units, or most of "
                "the traffic): the ids are set aside and verdicts are judged by request",
                self._label or "alerts",
                100 * share,
                DEGENERATE_VERDICTS,
                DEGENERATE_UNITS,
            )
        elif self.fallback and share < FALLBACK_OFF:
            self.fallback = False
            _log.warning(
                "%s: the conversation ids look like conversations again (%.0f%% of the "
                "recent verdicts in ones that are not): verdicts are judged by conversation",
                self._label or "alerts",
                100 * share,
            )

    def close_idle(self, now: float) -> list[Unit]:
        """The units quiet long enough by `now` (those of conversation ids set aside are
        dropped: their verdicts counted as requests)."""
        conversations = self.conversations.close_idle(now)
        requests = self.requests.close_idle(now)
        while self._seen and now - next(iter(self._seen.values()))[0] >= REPEAT_S:
            self._seen.popitem(last=False)
        # A request's unit teaches nothing of conversations: it is no conversation.
        requests = [dataclasses.replace(u, conversation=False) for u in requests]
        return requests if self.fallback else conversations + requests

    def snapshot(self) -> dict[str, Any]:
        return {
            **self.conversations.snapshot(),
            "requests": self.requests.snapshot(),
            "fallback": self.fallback,
        }

    def restore(self, raw: Any) -> None:
        """Takes back `snapshot` (or `Conversations.snapshot`, as earlier files hold)."""
        self.conversations.restore(raw)
        if isinstance(raw, dict) and "requests" in raw:
            self.requests.restore(raw["requests"])
            fallback = raw.get("fallback", False)
            if not isinstance(fallback, bool):
                raise TypeError("conversations: fallback is not true or false")
            self.fallback = fallback


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
