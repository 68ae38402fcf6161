"""What the suite's set-up costs before any test runs: collecting a test file that needs no
judge does not import litellm (about 2 s and 100 MB in each xdist worker), and collection
runs with the garbage collector paused (`tests/conftest.py`: its full collections walked
every object the imports made, again and again)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

_COLLECT = """
import sys
import pytest
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", sys.argv[1]])
print("litellm" in sys.modules, int(code))
"""


def _collected(script: str) -> subprocess.CompletedProcess[str]:
    """`script` run in a fresh interpreter, collecting a file that needs no judge."""
    return subprocess.run(
        [sys.executable, "-c", script, "tests/project/test_readme.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_collecting_a_file_that_needs_no_judge_imports_no_litellm() -> None:
    done = _collected(_COLLECT)
    assert done.stdout.split()[-2:] == ["False", "0"], done.stdout + done.stderr


_COLLECTOR = """
import gc
import sys
import pytest
on = []
class Probe:
    def pytest_itemcollected(self, item):
        on.append(gc.isenabled())
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", sys.argv[1]], [Probe()])
print(sorted(set(on)), gc.isenabled(), int(code))
"""


def test_collection_runs_with_the_garbage_collector_paused_and_turns_it_back_on() -> None:
    done = _collected(_COLLECTOR)
    assert done.stdout.splitlines()[-1] == "[False] True 0", done.stdout + done.stderr
