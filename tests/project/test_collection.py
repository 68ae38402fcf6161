"""What the suite's set-up costs before any test runs: collecting a test file that needs no
judge does not import litellm (about 2 s and 100 MB in each xdist worker)."""

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


def test_collecting_a_file_that_needs_no_judge_imports_no_litellm() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _COLLECT, "tests/project/test_readme.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split()[-2:] == ["False", "0"], done.stdout + done.stderr
