"""Caches that admit what recurs: a key enters on its second sighting, not its first.

A cache keyed by a sender's text (words, sentences) meets new keys with every request (names,
ids, misspellings). An LRU cache admits each one and pushes out a key that recurs; bounded,
its memory still climbs to the bound with keys that will never be asked again. Here a key's
first sighting only marks it in a bounded "seen once" ring (of hashes, so a long text is not
held twice); a second sighting while the mark is there admits it (TinyLFU's doorkeeper). A
key that recurs within the ring's span is cached; a stream of one-off keys passes through
both without evicting it. A hash collision admits a key one sighting early: harmless.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
R = TypeVar("R")

_MISSING: Any = object()


@dataclass(frozen=True)
class CacheInfo:
    """What `functools.lru_cache`'s `cache_info()` tells, plus the keys seen once."""

    hits: int
    misses: int
    maxsize: int
    currsize: int
    seen: int


class RecurringCache(Generic[K, V]):
    """At most `maxsize` entries, least recently used out first, admitted on a key's second
    sighting within the last `seen` first sightings (default: `maxsize`)."""

    __slots__ = ("_entries", "_lock", "_seen", "hits", "maxsize", "misses", "seen_size")

    def __init__(self, maxsize: int, seen: int | None = None) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, not {maxsize}")
        self.maxsize = maxsize
        self.seen_size = max(1, maxsize if seen is None else seen)
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def lookup(self, key: K, default: Any = None) -> Any:
        """The cached value of `key` (now the most recently used), else `default`."""
        try:
            value = self._entries[key]
            self._entries.move_to_end(key)
        except KeyError:  # absent, or evicted by another thread between the two steps
            self.misses += 1
            return default
        self.hits += 1
        return value

    def offer(self, key: K, value: V) -> bool:
        """Keep `value` for `key` if `key` was seen recently; else mark it seen. Returns
        whether it was admitted."""
        mark = hash(key)
        with self._lock:
            if self._seen.pop(mark, _MISSING) is _MISSING:
                self._seen[mark] = None
                if len(self._seen) > self.seen_size:
                    self._seen.popitem(last=False)
                return False
            self._entries[key] = value
            self._entries.move_to_end(key)
            if len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
            return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._seen.clear()
            self.hits = self.misses = 0

    def info(self) -> CacheInfo:
        return CacheInfo(self.hits, self.misses, self.maxsize, len(self._entries), len(self._seen))


class RecurringFunction(Generic[R]):
    """`function` memoised in a `RecurringCache` on its positional arguments; its
    `cache_info`, `cache_clear` and `__wrapped__` are those of `functools.lru_cache`."""

    def __init__(self, function: Callable[..., R], maxsize: int, seen: int | None = None) -> None:
        self.__wrapped__ = function
        self.__doc__ = function.__doc__
        self.__name__ = getattr(function, "__name__", type(function).__name__)
        self.__qualname__ = getattr(function, "__qualname__", self.__name__)
        self.__module__ = function.__module__
        self.cache: RecurringCache[tuple[Any, ...], R] = RecurringCache(maxsize, seen)

    def __call__(self, *args: Any) -> R:
        cache = self.cache
        value = cache.lookup(args, _MISSING)
        if value is _MISSING:
            value = self.__wrapped__(*args)
            cache.offer(args, value)
        return value  # type: ignore[no-any-return]

    def cache_info(self) -> CacheInfo:
        return self.cache.info()

    def cache_clear(self) -> None:
        self.cache.clear()


def recurring_cache(
    maxsize: int, seen: int | None = None
) -> Callable[[Callable[..., R]], RecurringFunction[R]]:
    """A decorator like `functools.lru_cache(maxsize)` that admits what recurs (`RecurringCache`)."""

    def wrap(function: Callable[..., R]) -> RecurringFunction[R]:
        return RecurringFunction(function, maxsize, seen)

    return wrap
