"""JSON parsed a piece at a time, for a large file read in a thread beside the event loop:
`json.loads` parses a whole document in one C call that holds the interpreter lock for its
length (half a second for the audit state file at its bounds), so the loop's thread waits
that long. Here the outer containers, down to `depth`, are walked in Python and each value
below them is parsed by its own call: the lock changes hands between two values, so the
loop waits at most about one value's parse. The same values as `json.loads`, or ValueError."""

from __future__ import annotations

import json
import re
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def loads(data: bytes | str, depth: int = 3) -> Any:
    """`data` parsed, the containers of the outer `depth` levels a value at a time."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    value, end = _value(text, _skip(text, 0), depth)
    if _skip(text, end) != len(text):
        raise ValueError(f"extra data at character {end}")
    return value


def _skip(text: str, i: int) -> int:
    match = _SPACE.match(text, i)
    return i if match is None else match.end()


def _value(text: str, i: int, depth: int) -> tuple[Any, int]:
    if depth > 0 and text.startswith("[", i):
        return _array(text, i + 1, depth - 1)
    if depth > 0 and text.startswith("{", i):
        return _object(text, i + 1, depth - 1)
    try:
        return _DECODER.raw_decode(text, i)
    except json.JSONDecodeError as exc:
        raise ValueError(str(exc)) from None


def _array(text: str, i: int, depth: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    i = _skip(text, i)
    if text.startswith("]", i):
        return out, i + 1
    while True:
        value, i = _value(text, i, depth)
        out.append(value)
        i = _skip(text, i)
        if text.startswith("]", i):
            return out, i + 1
        if not text.startswith(",", i):
            raise ValueError(f"expected ',' or ']' at character {i}")
        i = _skip(text, i + 1)


def _object(text: str, i: int, depth: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    i = _skip(text, i)
    if text.startswith("}", i):
        return out, i + 1
    while True:
        if not text.startswith('"', i):
            raise ValueError(f"expected a key at character {i}")
        key, i = _value(text, i, 0)
        i = _skip(text, i)
        if not text.startswith(":", i):
            raise ValueError(f"expected ':' at character {i}")
        out[key], i = _value(text, _skip(text, i + 1), depth)
        i = _skip(text, i)
        if text.startswith("}", i):
            return out, i + 1
        if not text.startswith(",", i):
            raise ValueError(f"expected ',' or '}}' at character {i}")
        i = _skip(text, i + 1)
