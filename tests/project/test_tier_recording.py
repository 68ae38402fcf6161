"""`tests/cpu.json`, what each test file costs in CPU seconds (tests/conftest.py), is the
suite's tiers: it names every file a run holds and no file that is gone, and each folder's
unit tier stays within its budget."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import CPU_RECORDING, UNIT_FILE_CPU_S, UNIT_FOLDER_CPU_S

REPO = Path(__file__).resolve().parents[2]


def test_the_recording_names_each_file_of_the_run_and_no_file_gone(
    request: pytest.FixtureRequest,
) -> None:
    """Every file this run holds (the whole suite in a whole run) is in tests/cpu.json: an
    unrecorded file is tiered as if it cost nothing."""
    if request.config.getoption("--record-cpu"):
        pytest.skip("this run writes the recording")
    recorded: dict[str, float] = json.loads(CPU_RECORDING.read_text(encoding="utf-8"))
    files = {item.nodeid.split("::")[0] for item in request.session.items}
    unrecorded = sorted(files - set(recorded))
    stale = sorted(file for file in recorded if not (REPO / file).exists())
    assert (unrecorded, stale) == ([], []), (
        "tests/cpu.json is out of date: refresh it with `bash tests/run.sh --record-cpu "
        f"FILE...` over the files named (unrecorded: {unrecorded}; gone: {stale})"
    )


def test_each_folders_unit_tier_is_within_its_cpu_budget() -> None:
    """The files recorded under a unit file's bound, by folder: a bound, not an estimate (a
    file whose tests are marked e2e or scorecard one by one counts whole). A file whose
    module marks every test of it so (`pytestmark`) is not in the unit tier at all."""
    recorded: dict[str, float] = json.loads(CPU_RECORDING.read_text(encoding="utf-8"))
    unit: dict[str, float] = defaultdict(float)
    for file, seconds in recorded.items():
        if seconds < UNIT_FILE_CPU_S and not _wholly_another_tier(REPO / file):
            unit[str(Path(file).parent)] += seconds
    over = {folder: round(seconds, 1) for folder, seconds in unit.items()}
    over = {folder: seconds for folder, seconds in over.items() if seconds >= UNIT_FOLDER_CPU_S}
    assert over == {}, (
        f"the unit tier of these folders costs {UNIT_FOLDER_CPU_S:g} CPU seconds or more "
        "in tests/cpu.json: make tests cheaper or mark those with real servers or apps "
        "e2e (CONTRIBUTING.md)"
    )


def _wholly_another_tier(path: Path) -> bool:
    """Whether the module marks all its tests e2e or scorecard (`pytestmark`)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return re.search(r"^pytestmark = .*pytest\.mark\.(e2e|scorecard)\b", text, re.M) is not None
