"""How many times in a row something held for a key (a service whose graces heard no log
event, a sender whose whole traces had no late span), bounded: the least recently counted
keys are forgotten first, and count from nothing again."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# Times in a row after which a key is taken to go on so (its traces stop waiting).
QUIET_AFTER = 5


class InARow(Generic[K]):
    __slots__ = ("_counts", "_max")

    def __init__(self, max_keys: int) -> None:
        self._counts: OrderedDict[K, int] = OrderedDict()
        self._max = max(1, max_keys)

    def reached(self, key: K) -> bool:
        """Whether it held `QUIET_AFTER` times in a row for `key`."""
        return self._counts.get(key, 0) >= QUIET_AFTER

    def count(self, key: K) -> None:
        """It held once more for `key`."""
        self._counts[key] = self._counts.pop(key, 0) + 1
        while len(self._counts) > self._max:
            self._counts.popitem(last=False)

    def reset(self, key: K) -> None:
        """It did not hold for `key`: from nothing again."""
        self._counts.pop(key, None)
