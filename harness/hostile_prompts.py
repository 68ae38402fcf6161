"""Prompts shaped to make a prompt splitter super-linear: long runs of what its layouts
read (spaces, `#`, `-`, `*`, digits, colons, full-width characters), many same-level
headings, deep nesting, one huge line, many list items, mixed Chinese and Latin text.
`bench/extraction_linear.py` times the layouts on them; `tests/extraction/
test_linear_extraction.py` counts the lines of Python they run.

Each shape is a function of a size in characters (about: a shape is built of whole units)
and returns one user message's text.
"""

from __future__ import annotations

from collections.abc import Callable


def _repeat(unit: str, size: int) -> str:
    return unit * max(1, size // len(unit))


def heading_spaces(size: int) -> str:
    """One heading whose text is a run of spaces and one letter (the pattern it broke)."""
    return "# a" + " " * max(1, size - 4) + "b"


def heading_hashes(size: int) -> str:
    return "# " + "#" * max(1, size - 4) + " b"


def many_headings(size: int) -> str:
    """Same-level headings, each with a line of text."""
    return _repeat("## kb/doc.md\nsome text\n", size)


def deep_nesting(size: int) -> str:
    """Headings one level deeper, then back: six levels over and over."""
    levels = "".join(f"{'#' * level} part {level}\ntext\n" for level in range(1, 7))
    return _repeat(levels, size)


def dashes(size: int) -> str:
    return "- " + "-" * max(1, size - 3) + "x"


def stars(size: int) -> str:
    return _repeat("* ", size) + "x"


def digits(size: int) -> str:
    return _repeat("1", size) + ". x"


def colons(size: int) -> str:
    return "Question" + ":" * max(1, size - 9) + "x"


def full_width(size: int) -> str:
    """Full-width spaces and colons, Chinese text."""
    return "# 问题" + _repeat("\u3000：", size) + "？"


def huge_line(size: int) -> str:
    return _repeat("word ", size)


def list_items(size: int) -> str:
    return _repeat("- item text\n", size)


def continued_items(size: int) -> str:
    """Two list items, the second continued over many lines."""
    return "- first\n- second\n" + _repeat("  more of it\n", size)


def mixed_cjk(size: int) -> str:
    """Chinese and Latin sections, Chinese full-width punctuation, list items."""
    unit = "## 文档 kb/退货.md\n退货政策：三十天内可退。\n- 条目一，说明。\n1. 第二项：见上。\n"
    return _repeat(unit, size)


def tags_unclosed(size: int) -> str:
    return "<document" + " " * max(1, size - 10) + "x"


def close_tag_spaces(size: int) -> str:
    return "text" + " " * max(1, size - 5) + "x\n</document>"


def named_spaces(size: int) -> str:
    return "Document" + " " * max(1, size - 10) + "x"


SHAPES: dict[str, Callable[[int], str]] = {
    "heading_spaces": heading_spaces,
    "heading_hashes": heading_hashes,
    "many_headings": many_headings,
    "deep_nesting": deep_nesting,
    "dashes": dashes,
    "stars": stars,
    "digits": digits,
    "colons": colons,
    "full_width": full_width,
    "huge_line": huge_line,
    "list_items": list_items,
    "continued_items": continued_items,
    "mixed_cjk": mixed_cjk,
    "tags_unclosed": tags_unclosed,
    "close_tag_spaces": close_tag_spaces,
    "named_spaces": named_spaces,
}
