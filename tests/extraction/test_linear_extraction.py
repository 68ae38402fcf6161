"""A prompt's split costs in proportion to its size, on the shapes built to make it cost
more (`harness/hostile_prompts.py`): the lines of Python it runs (`sys.settrace`'s line
events), counted at a size and at four times that size, grow four times, not sixteen.

Counting lines, not timing, so that the test never depends on the machine's speed; what
the regular expression engine does in C is not counted here, and is held linear by
`tests/project/test_linear_patterns.py` instead.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from harness.hostile_prompts import SHAPES
from monitor.extraction._prompt_documents import (
    _blank_line_documents,
    _instruction,
    documents_from_prompt,
)
from monitor.extraction._prompt_layouts import heading_documents
from monitor.extraction._prompt_templates import PromptTemplates

SIZE = 6_000  # characters; the larger size is four times this
# Four times the size may cost up to this many times the lines (a constant part, the
# last unit cut differently); a quadratic split costs about sixteen.
LINEAR = 4 * 1.3
# Shapes whose cost is in Python's lines: many short lines (those that are one long run of
# a character cost the pattern engine's steps, which the pattern test bounds).
COUNTED = (
    "many_headings",
    "deep_nesting",
    "list_items",
    "continued_items",
    "mixed_cjk",
    "huge_line",
)

LAYOUTS: dict[str, Callable[[str], object]] = {
    "prompt": lambda text: documents_from_prompt(
        [("user", text)], None, templates=PromptTemplates()
    ),
    "headings": lambda text: heading_documents(
        text.splitlines(), _instruction, _blank_line_documents
    ),
}


def line_events(split: Callable[[str], object], text: str) -> int:
    """The line events of Python code that `split(text)` runs."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        split(text)
    finally:
        sys.settrace(previous)
    return count


@pytest.mark.parametrize("shape", COUNTED)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_split_costs_in_proportion_to_its_size(layout: str, shape: str) -> None:
    split, build = LAYOUTS[layout], SHAPES[shape]
    small = line_events(split, build(SIZE))
    large = line_events(split, build(4 * SIZE))
    assert small > 0
    assert large <= LINEAR * small, f"{layout} on {shape}: {small} lines, then {large} at 4x"


def test_the_count_tells_a_quadratic_split() -> None:
    """The measure itself: a split that looks back over what it read costs sixteen."""

    def quadratic(text: str) -> int:
        seen: list[str] = []
        hits = 0
        for line in text.splitlines():
            for earlier in seen:
                hits += earlier == line
            seen.append(line)
        return hits

    small = line_events(quadratic, SHAPES["many_headings"](SIZE // 4))
    large = line_events(quadratic, SHAPES["many_headings"](SIZE))
    assert large > LINEAR * small


def test_many_same_level_headings_are_each_a_document() -> None:
    """The stack that finds each heading's parent keeps what the scan back found."""
    text = "# 知识库\n" + "".join(f"## kb/{i}.md\n第{i}条：内容。\n" for i in range(300))
    docs = heading_documents(text.splitlines(), _instruction, _blank_line_documents)
    assert [d.doc_uri for d in docs] == [f"kb/{i}.md" for i in range(300)]
    assert docs[7].content == "第7条：内容。"


def test_a_heading_with_a_long_run_of_spaces_is_read() -> None:
    text = "# a" + " " * 20_000 + "b\nbody\n# Context ##\nтекст\n# Справка\nсм. выше\n"
    docs = heading_documents(text.splitlines(), _instruction, _blank_line_documents)
    assert [(d.doc_uri, d.content) for d in docs] == [
        ("a" + " " * 20_000 + "b", "body"),
        (None, "текст"),
        ("Справка", "см. выше"),
    ]
