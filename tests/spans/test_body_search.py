"""The search of a request body for the probed attribute keys (`_occurs`, the C
library's `memmem` where there is one) answers as `needle in body`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from monitor.spans._protobuf import _occurs

_bytes = st.binary(max_size=64).map(lambda b: bytes(x % 4 for x in b))  # small alphabet: hits


@given(needle=_bytes.filter(bool), body=_bytes)
def test_the_search_answers_as_in(needle: bytes, body: bytes) -> None:
    assert _occurs(needle, body) == (needle in body)
    assert _occurs(needle, body + needle + body)
