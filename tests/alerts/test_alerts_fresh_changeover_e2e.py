"""End to end on compressed windows (`tests/alerts/fresh_e2e.py` says how): an evaluator
changeover (the process restarted from its `state_file` with another `threshold`: another
revision, which reads the same traffic higher) pages nothing by itself, and a 2.5x rise after
it pages, within 10 times its limit (why later: `fresh_e2e.changeover`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.fresh_e2e import STRICTER, changeover

# A real sidecar fed in real time for minutes: the slow tier.
pytestmark = pytest.mark.e2e


def test_an_evaluator_changeover_pages_nothing_and_a_rise_after_it_pages(
    tmp_path: Path,
) -> None:
    changeover(tmp_path, {"name": "local_groundedness", "threshold": STRICTER}, 10.0)
