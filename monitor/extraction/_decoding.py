"""Values as attributes carry them: JSON text parsed within the nesting bound (`loads`), a
number from a number or numeric string (`as_float`). Every reader of an attribute's JSON
goes through here."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

from monitor.shared.nesting import MAX_DEPTH, note_unread, within_depth


def loads(value: Any) -> Any:
    """A JSON-looking string parsed; anything else comes back unchanged. Every reader of
    an attribute's JSON goes through here: JSON nested deeper than `MAX_DEPTH` stays the
    text it came as (noted `too_deep`), so no reader or serialiser ever walks it."""
    if not isinstance(value, str):
        return value
    stripped = value.lstrip()
    if stripped[:1] == '"' and stripped.rstrip().endswith('"') and len(stripped) > 1:
        try:  # a JSON string (an SDK that JSON-encodes every value)
            text = json.loads(stripped)
        except ValueError:
            return value
        return text if isinstance(text, str) else value
    if stripped[:1] not in ("{", "["):
        return value
    try:
        parsed = orjson.loads(stripped)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit"):
            note_unread("too_deep")
            return value
        try:
            # What orjson refuses and Python's json reads: NaN, Infinity, lone
            # surrogates. (orjson reads integers beyond 64 bits as floats.)
            parsed = json.loads(stripped)
        except RecursionError:
            note_unread("too_deep")
            return value
        except ValueError:
            return value  # not JSON: text
    return parsed if bounded(parsed, stripped) else value


def bounded(parsed: Any, text: str) -> bool:
    """Whether a value parsed from `text` is nested within `MAX_DEPTH` (else noted
    `too_deep`); text with few brackets needs no walk."""
    if text.count("[") + text.count("{") + text.count("(") <= MAX_DEPTH or within_depth(parsed):
        return True
    note_unread("too_deep")
    return False


def as_float(value: Any) -> float | None:
    """A finite number from a number or numeric string; anything else is None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None
