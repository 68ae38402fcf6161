"""A queue bounded in items and in bytes: the evaluation stage's intake and each exporter's
sending queue. It holds items in arrival order with the bytes each was given, and answers
whether one more fits; what to do when it does not (wait, refuse and count) is its
owner's."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from itertools import islice
from typing import Generic, TypeVar

T = TypeVar("T")


class BoundedQueue(Generic[T]):
    """Items with their sizes, oldest first, within `max_items` and `max_bytes` (None:
    items only)."""

    __slots__ = ("_bytes", "_items", "max_bytes", "max_items")

    def __init__(self, max_items: int, max_bytes: int | None = None) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._items: deque[tuple[T, int]] = deque()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return (item for item, _ in self._items)

    @property
    def nbytes(self) -> int:
        """Bytes of the items held."""
        return self._bytes

    def fits(self, nbytes: int, *, beside: int = 0) -> bool:
        """Whether one more item of `nbytes` keeps the queue within both bounds, `beside`
        bytes held elsewhere counting against the byte bound too."""
        return len(self._items) < self.max_items and (
            self.max_bytes is None or self._bytes + beside + nbytes <= self.max_bytes
        )

    def append(self, item: T, nbytes: int) -> None:
        """Add `item` whether it fits or not: the owner decided."""
        self._items.append((item, nbytes))
        self._bytes += nbytes

    def popleft(self) -> T:
        item, nbytes = self._items.popleft()
        self._bytes -= nbytes
        return item

    def head(self, n: int) -> list[T]:
        """The first `n` items, left in the queue."""
        return [item for item, _ in islice(self._items, n)]

    def clear(self) -> list[T]:
        """Every item, oldest first; the queue is left empty."""
        items = [item for item, _ in self._items]
        self._items.clear()
        self._bytes = 0
        return items
