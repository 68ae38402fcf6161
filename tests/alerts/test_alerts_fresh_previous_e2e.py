"""End to end on compressed windows (`tests/alerts/fresh_e2e.py` says how): the evaluator
changeover of `test_alerts_fresh_changeover_e2e.py` with the old pass mark kept as
`evaluators[].previous` (both revisions score the same records): a 2.5x rise after it pages
within 4 times its limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.fresh_e2e import STRICTER, changeover

# A real sidecar fed in real time for minutes: the slow tier.
pytestmark = pytest.mark.e2e


def test_with_the_previous_revision_scoring_the_same_records_a_rise_after_a_changeover_pages_sooner(
    tmp_path: Path,
) -> None:
    """The same changeover with the old pass mark kept as `previous` (both revisions score
    every record until a far `until`): the offset is measured on the same records' verdicts,
    which differ on few records, so the rise pages within four times its limit (about half
    the verdicts it needs without)."""
    previous = {"until": "2100-01-01", "share": 1.0, "threshold": None}
    entry = {"name": "local_groundedness", "threshold": STRICTER, "previous": previous}
    changeover(tmp_path, entry, 4.0)
