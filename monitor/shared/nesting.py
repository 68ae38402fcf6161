"""How deep a value read from input may be nested and how many values a structured one
may hold, and the tally of values that were not read because of it.

A value nested deeper than `MAX_DEPTH` (a JSON string in an attribute, a structured OTLP
attribute, a record's document metadata) is a bad value of its own: it is read as the
text it came as or left out, never handed to code that walks it recursively (serialisers,
pickling, pydantic), where it would fail the whole trace or record. Real instrumentations
nest a few levels (a serialized LangChain message is about eight). A structured OTLP value
holding more than `MAX_ITEMS` values is left out the same way, found before it is parsed.

While a trace is read (`noting_unread`), each value left unread is noted with its reason
(`too_deep`, `too_large`, `corrupt`; `placeholder`: a value that fills an attribute name's
placeholder holds one itself; `bad_index`: an indexed attribute whose index is no small
decimal number), so the records built from it can say so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

MAX_DEPTH = 64
# Values (nested ones included) in one structured attribute value: a GenAI message or a
# list of documents holds hundreds; millions of numbers cost seconds and hundreds of
# megabytes to turn into Python objects.
MAX_ITEMS = 10_000
REASONS = ("corrupt", "too_deep", "too_large", "placeholder", "bad_index")

_noted: ContextVar[Counter[str] | None] = ContextVar("unread_values", default=None)


def within_depth(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `value`'s dicts, lists and tuples are nested at most `limit` deep
    (iteratively, so a value of any depth can be checked)."""
    if not isinstance(value, dict | list | tuple):
        return True
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        if depth > limit:
            return False
        items = container.values() if isinstance(container, dict) else container
        stack.extend((item, depth + 1) for item in items if isinstance(item, dict | list | tuple))
    return True


def note_unread(reason: str, n: int = 1) -> None:
    """A value left unread (`reason` in `REASONS`); noted only while a trace is read."""
    tally = _noted.get()
    if tally is not None:
        tally[reason] += n


@contextmanager
def noting_unread() -> Iterator[Counter[str]]:
    """The values left unread while the block runs, by reason."""
    tally: Counter[str] = Counter()
    token = _noted.set(tally)
    try:
        yield tally
    finally:
        _noted.reset(token)
