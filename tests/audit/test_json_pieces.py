"""`monitor.shared.json_pieces`: the audit state file parsed a value at a time reads as
`json.loads` reads it, and refuses what `json.loads` refuses (a refused file is set aside
by the state file as corrupt)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.shared.json_pieces import loads

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(VALUES, st.sampled_from([None, 1, 2]), st.integers(0, 4))
def test_every_document_reads_as_json_loads_reads_it(
    value: Any, indent: int | None, depth: int
) -> None:
    text = json.dumps(value, indent=indent)
    assert loads(text.encode(), depth) == json.loads(text)
    assert loads(f" \n{text}\t ", depth) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    ["", "[1,", "[1 2]", '{"a" 1}', '{"a":1,}', "[1,]", "{1:2}", '{"a":1} x', "[", "nul", '"\\x"'],
)
def test_what_json_loads_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        loads(text.encode())


def test_bytes_that_are_not_utf8_are_refused() -> None:
    with pytest.raises(ValueError):
        loads(b'["\xff"]')
