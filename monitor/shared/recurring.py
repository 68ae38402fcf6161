"""Caches that admit what recurs: a key enters on its second sighting, not its first.

A cache keyed by a sender's text (words, sentences) meets new keys with every request (names,
ids, misspellings). An LRU cache admits each one and pushes out a key that recurs; bounded,
its memory still climbs to the bound with keys that will never be asked again. Here a key's
first sighting only marks it in a bounded "seen once" ring (of hashes, so a long text is not
held twice); a second sighting while the mark is there admits it (TinyLFU's doorkeeper). A
key that recurs within the ring's span is cached; a stream of one-off keys passes through
both without evicting it. A hash collision admits a key one sighting early: harmless.

Admitted keys leave oldest first. A hit is a plain dictionary read, with no bookkeeping: the
detector reads these caches about a thousand times a record, and keeping recency order on
each read would double its time on a record of known words; a recurring key that leaves comes
back after two more sightings.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import update_wrapper
from typing import Any, Generic, Protocol, TypeVar, cast

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
A = TypeVar("A", contravariant=True)
R = TypeVar("R", covariant=True)

_MISSING: Any = object()


@dataclass(frozen=True)
class CacheInfo:
    """Like `functools.lru_cache`'s `cache_info()`, less the hits (not counted: see above),
    plus the keys seen once."""

    misses: int
    maxsize: int
    currsize: int
    seen: int


class RecurringCache(Generic[K, V]):
    """At most `maxsize` entries, admitted on a key's second sighting within the last `seen`
    first sightings (default: `maxsize`). Read it with `entries.get`; give it each value
    computed on a miss with `offer`."""

    __slots__ = ("_lock", "_order", "_seen", "entries", "maxsize", "misses", "seen_size")

    def __init__(self, maxsize: int, seen: int | None = None) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, not {maxsize}")
        self.maxsize = maxsize
        self.seen_size = max(1, maxsize if seen is None else seen)
        self.entries: dict[K, V] = {}
        self._order: deque[K] = deque()
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0

    def __len__(self) -> int:
        return len(self.entries)

    def offer(self, key: K, value: V) -> bool:
        """A miss: keep `value` for `key` if `key` was seen recently, else mark it seen.
        Returns whether it was admitted."""
        mark = hash(key)
        with self._lock:
            self.misses += 1
            if self._seen.pop(mark, _MISSING) is _MISSING:
                self._seen[mark] = None
                if len(self._seen) > self.seen_size:
                    self._seen.popitem(last=False)
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
            self._seen.clear()
            self.misses = 0

    def info(self) -> CacheInfo:
        return CacheInfo(self.misses, self.maxsize, len(self.entries), len(self._seen))


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
            value = read(argument, _MISSING)
            if value is _MISSING:
                value = function(argument)
                cache.offer(argument, value)
            return cast("R", value)

        update_wrapper(cached, function)
        memoised = cast("Any", cached)
        memoised.cache = cache
        memoised.cache_info = cache.info
        memoised.cache_clear = cache.clear
        return cast("RecurringFunction[A, R]", memoised)

    return wrap
