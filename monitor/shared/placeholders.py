"""Attribute names with `{attribute}` placeholders (Mastra's `mastra.{mastra.span.type}.input`):
each placeholder is filled once from another attribute's value, and the result is never
scanned again, so a value that itself holds a placeholder cannot make the substitution
run on (it is a bad value of that attribute: the key reads nothing). A key whose result
could name one of its own placeholders' attributes (`app.{app.kind}` reads `app.kind`
when `app.kind` is `"kind"`) is refused where a user writes one (`recursion`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

Template = tuple[tuple[str, str], ...]  # (literal text, placeholder attribute) pairs; "" ends


class Malformed(ValueError):
    """A key whose braces do not pair: a `{` never closed, or one inside a placeholder."""


@lru_cache(maxsize=4096)
def template(key: str) -> Template:
    """`key` split once into literal text and placeholders; raises `Malformed`."""
    parts: list[tuple[str, str]] = []
    rest = key
    while "{" in rest or "}" in rest:
        start = rest.find("{")
        end = rest.find("}")
        if end < 0:
            raise Malformed(f"{key!r}: a '{{' never closed")
        if start < 0 or end < start:
            raise Malformed(f"{key!r}: a '}}' closes no placeholder")
        name = rest[start + 1 : end]
        if "{" in name:
            raise Malformed(f"{key!r}: a placeholder inside a placeholder")
        if not name:
            raise Malformed(f"{key!r}: an empty placeholder")
        parts.append((rest[:start], name))
        rest = rest[end + 1 :]
    parts.append((rest, ""))
    return tuple(parts)


class BadValue(ValueError):
    """A placeholder's attribute holds a value that is no attribute name (it has braces)."""


def fill(key: str, attributes: Mapping[str, Any]) -> str | None:
    """`key` with each placeholder replaced by its attribute's string value, in one pass:
    None when one is missing, not a string, or `key` is malformed; raises `BadValue` when a
    value holds a brace (it would be read as a placeholder again)."""
    if "{" not in key and "}" not in key:
        return key
    try:
        parts = template(key)
    except Malformed:
        return None
    out = []
    for text, name in parts:
        out.append(text)
        if not name:
            continue
        value = attributes.get(name)
        if not isinstance(value, str):
            return None
        if "{" in value or "}" in value:
            raise BadValue(f"{name} = {value[:80]!r}")
        out.append(value)
    return "".join(out)


def recursion(key: str) -> str | None:
    """Why a placeholder key is refused (malformed, or its result can be the name of one
    of its own placeholders' attributes), or None."""
    try:
        parts = template(key)
    except Malformed as exc:
        return str(exc)
    names = [name for _, name in parts if name]
    if not names:
        return None
    anything = "".join(re.escape(text) + (".*" if name else "") for text, name in parts)
    for name in names:
        if re.fullmatch(anything, name, flags=re.DOTALL):
            return (
                f"{key!r} can name {name!r}, the attribute that fills its own placeholder: "
                "a placeholder must be filled from an attribute the key cannot become"
            )
    return None
