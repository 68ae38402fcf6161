"""A bounded cache that keeps a value only for a key that comes back.

Under steady traffic every request brings texts no other request will bring (a ticket
number, a question's own sentence): kept on first sight, they fill a worker's caches up to
their bounds over the first hour, pushing out the words and sentences that do recur. A
doorkeeper (the hashes of keys seen, emptied when full) admits a key when it comes again
(for the per-token caches: in a later record, `next_record`), so a key of one request
costs a hash for a while and nothing after.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from functools import _CacheInfo, update_wrapper
from typing import Protocol, TypeVar, cast

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)
V_co = TypeVar("V_co", covariant=True)


class Cached(Protocol[K_contra, V_co]):
    """A one-argument function with `functools.lru_cache`'s `cache_info` and `cache_clear`."""

    def __call__(self, key: K_contra, /) -> V_co: ...

    def cache_info(self) -> _CacheInfo: ...

    def cache_clear(self) -> None: ...


# The record being scored, advanced by `next_record` (one count for the whole process: a
# key seen by another thread's record counts as seen before).
_record = [0]


def next_record() -> None:
    """A new record is being scored: keys seen so far now count as seen before."""
    _record[0] += 1


def admitted(
    maxsize: int, *, later_record: bool = False
) -> Callable[[Callable[[K], V]], Cached[K, V]]:
    """`fn`'s values for at most `maxsize` keys, each kept once it comes back
    (`later_record`: in a later record; for the per-token caches, since a record's own
    number or id recurs within it, whereas a sentence worth parsing twice in one record is
    kept as it comes back); the
    oldest quarter goes when full (a dict keeps insertion order). Safe under threads: a
    race costs a recomputation, never a wrong value."""

    def wrap(fn: Callable[[K], V]) -> Cached[K, V]:
        cache: dict[K, V] = {}
        # A key's hash: the record it was first seen in.
        seen: dict[int, int] = {}
        counts = [0, 0]  # hits, misses

        def cached(key: K, /) -> V:
            try:
                value = cache[key]
            except KeyError:
                pass
            else:
                counts[0] += 1
                return value
            counts[1] += 1
            value = fn(key)
            h = hash(key)
            record = _record[0]
            first = seen.get(h)
            if first is None:
                if len(seen) >= maxsize:
                    seen.clear()
                seen[h] = record
                return value
            if later_record and first == record and record:
                return value
            seen.pop(h, None)
            if len(cache) >= maxsize:
                for old in list(itertools.islice(cache, maxsize // 4)):
                    cache.pop(old, None)
            cache[key] = value
            return value

        def cache_info() -> _CacheInfo:
            return _CacheInfo(counts[0], counts[1], maxsize, len(cache))

        def cache_clear() -> None:
            cache.clear()
            seen.clear()
            counts[:] = [0, 0]

        update_wrapper(cached, fn)
        wrapper = cast(Cached[K, V], cached)
        wrapper.cache_info = cache_info  # type: ignore[method-assign]
        wrapper.cache_clear = cache_clear  # type: ignore[method-assign]
        return wrapper

    return wrap
