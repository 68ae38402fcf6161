"""Caches that admit what recurs: a key enters on its second sighting, not its first.

A cache keyed by a sender's text (words, sentences) meets new keys with every request (names,
ids, misspellings). An LRU cache admits each one and pushes out a key that recurs; bounded,
its memory still climbs to the bound with keys that will never be asked again. Here a key's
first sighting only marks it in a "seen once" filter; a second sighting while the mark is
there admits it (TinyLFU's doorkeeper). The filter is a Bloom filter of fixed size (its
bytes, not the keys, so no key is held twice), emptied after every `seen` marks: a key that
recurs within that span is cached, and a stream of one-off keys passes through without
evicting it. A false positive (a few in a thousand) admits a key one sighting early.

Sightings count once per scope (`scoped_by`: the detector's is the record being scored): a
record reads its question's words for several checks, and a new name in the question and
the answer recurs within it, yet it need not recur in the next record.

Admitted keys leave oldest first. A hit is a plain dictionary read, with no bookkeeping: the
detector reads these caches about a thousand times a record, and keeping recency order on
each read would double its time on a record of known words; a recurring key that leaves comes
back after two more sightings.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import update_wrapper
from typing import Any, Generic, Protocol, TypeVar, cast

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
A = TypeVar("A", contravariant=True)
R = TypeVar("R", covariant=True)

_MISSING: Any = object()
# The filter's bits per mark it holds before it is emptied, and the probes of a mark: with
# two probes, a key never seen passes for a seen one with odds of (2 / 32)² when the filter
# is full, a third of that on average.
_BITS_PER_MARK = 32
# Spreads a hash's bits over both probes (a small integer is its own hash).
_SPREAD = 0x9E3779B97F4A7C15
_WORD = (1 << 64) - 1


def _no_scope() -> object:
    return None


_scope: Callable[[], object] = _no_scope


def scoped_by(source: Callable[[], object]) -> None:
    """Sightings of a key while `source()` returns the same value (not None) count as one,
    in every cache of the process."""
    global _scope
    _scope = source


@dataclass(frozen=True)
class CacheInfo:
    """Like `functools.lru_cache`'s `cache_info()`, less the hits (not counted: see above),
    plus the marks in the "seen once" filter."""

    misses: int
    maxsize: int
    currsize: int
    seen: int


class RecurringCache(Generic[K, V]):
    """At most `maxsize` entries, admitted on a key's second sighting before the "seen once"
    filter is emptied (after every `seen` first sightings; default: `maxsize`). Read it with `entries.get`; give it each value
    computed on a miss with `offer`."""

    __slots__ = (
        "_in_scope",
        "_lock",
        "_marks",
        "_order",
        "_scope",
        "_seen",
        "entries",
        "maxsize",
        "misses",
        "seen_size",
    )

    def __init__(self, maxsize: int, seen: int | None = None) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, not {maxsize}")
        self.maxsize = maxsize
        self.seen_size = max(1, maxsize if seen is None else seen)
        self.entries: dict[K, V] = {}
        self._order: deque[K] = deque()
        self._seen = bytearray(self.seen_size * _BITS_PER_MARK // 8)
        self._marks = 0
        # The scope of the last sighting, and the hashes sighted in it.
        self._scope: object = None
        self._in_scope: set[int] = set()
        self._lock = threading.Lock()
        self.misses = 0

    def __len__(self) -> int:
        return len(self.entries)

    def offer(self, key: K, value: V) -> bool:
        """A miss: keep `value` for `key` if `key` was seen recently, else mark it seen.
        Returns whether it was admitted."""
        mark = hash(key)
        spread = (mark * _SPREAD) & _WORD
        bits = len(self._seen) * 8
        first, second = spread % bits, (spread >> 32) % bits
        scope = _scope()
        with self._lock:
            self.misses += 1
            if scope is not None:
                if scope != self._scope or len(self._in_scope) > self.seen_size:
                    self._scope = scope
                    self._in_scope.clear()
                if mark in self._in_scope:
                    return False
                self._in_scope.add(mark)
            seen = self._seen
            marked = seen[first >> 3] >> (first & 7) & 1 and seen[second >> 3] >> (second & 7) & 1
            if not marked:
                seen[first >> 3] |= 1 << (first & 7)
                seen[second >> 3] |= 1 << (second & 7)
                self._marks += 1
                if self._marks >= self.seen_size:
                    self._seen = bytearray(len(seen))
                    self._marks = 0
                return False
            if key not in self.entries:
                self._order.append(key)
            self.entries[key] = value
            while len(self._order) > self.maxsize:
                del self.entries[self._order.popleft()]
            return True

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()
            self._order.clear()
            self._seen = bytearray(len(self._seen))
            self._marks = self.misses = 0
            self._in_scope.clear()

    def info(self) -> CacheInfo:
        return CacheInfo(self.misses, self.maxsize, len(self.entries), self._marks)


class RecurringFunction(Protocol[A, R]):
    """A one-argument function memoised in a `RecurringCache`, with `functools.lru_cache`'s
    `cache_info`, `cache_clear` and `__wrapped__`."""

    @property
    def cache(self) -> RecurringCache[Any, Any]: ...

    @property
    def __wrapped__(self) -> Callable[[A], R]: ...

    def __call__(self, argument: A, /) -> R: ...

    def cache_info(self) -> CacheInfo: ...

    def cache_clear(self) -> None: ...


def recurring_cache(
    maxsize: int, seen: int | None = None
) -> Callable[[Callable[[A], R]], RecurringFunction[A, R]]:
    """A decorator like `functools.lru_cache(maxsize)` for a function of one hashable
    argument, whose cache admits what recurs (`RecurringCache`)."""

    def wrap(function: Callable[[A], R]) -> RecurringFunction[A, R]:
        cache: RecurringCache[Any, Any] = RecurringCache(maxsize, seen)
        read = cache.entries.get

        def cached(argument: A, /) -> R:
            # Typed by assignment, not `cast`: this runs on every call of every cached
            # detector function, and `cast` is a call of its own.
            value: R = read(argument, _MISSING)
            if value is _MISSING:
                value = function(argument)
                cache.offer(argument, value)
            return value

        update_wrapper(cached, function)
        memoised = cast("Any", cached)
        memoised.cache = cache
        memoised.cache_info = cache.info
        memoised.cache_clear = cache.clear
        return cast("RecurringFunction[A, R]", memoised)

    return wrap
