"""Redaction's scanners cost in proportion to the text, on the runs built to make a pattern
search re-read them: an address's local part of `'`-separated letters (a search started
again after each `'`), a run of colons and hex digits (three quantifiers over them). The
lines of Python the scans run (an address is now read from its `@` in Python) are counted
at a size and at four times it; what the pattern engine does in C is not counted, and the
patterns are held linear by `tests/project/test_linear_patterns.py`."""

from __future__ import annotations

import pytest

from monitor.records.redaction import _emails, _ipv6s
from tests.extraction.test_linear_extraction import LINEAR, line_events

SIZE = 4_000


@pytest.mark.parametrize(
    ("scan", "unit", "tail"),
    [(_emails, "a'", "@"), (_emails, "a'", "@example.com"), (_ipv6s, ":a", "#b")],
)
def test_a_scan_costs_in_proportion_to_its_text(scan: object, unit: str, tail: str) -> None:
    def run(text: str) -> object:
        return list(scan(text))  # type: ignore[operator]

    small = line_events(run, unit * SIZE + tail)
    large = line_events(run, unit * 4 * SIZE + tail)
    assert 0 < small and large <= LINEAR * small


def test_addresses_are_found_as_the_pattern_found_them() -> None:
    text = "mail 'john.doe@example.com' or jane@x.org, 李@a.cn, a'b@c.io, x.@y"
    found = [text[start:end] for start, end in _emails(text)]
    assert found == ["john.doe@example.com", "jane@x.org", "a'b@c.io"]
    hostile = "a'" * 20_000 + "@example.com"
    assert [hostile[s:e] for s, e in _emails(hostile)] == [hostile]
