"""The CLI's processes run numpy's BLAS on one thread (OpenBLAS starts its threads when
numpy is imported), unless the environment asks for more. The CLI sets it in the
environment before anything imports numpy; the worker processes, which import it, inherit
that environment."""

from __future__ import annotations

import os
import subprocess
import sys

# After importing the CLI, then numpy: the setting and the process's thread count.
_PROBE = (
    "import monitor.__main__, os, sys\n"
    "import numpy\n"
    "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))\n"
)


def _run(**env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def test_blas_runs_one_thread_by_default() -> None:
    assert _run() == ["1", "1"]


def test_a_thread_count_set_in_the_environment_wins() -> None:
    assert _run(OPENBLAS_NUM_THREADS="2") == ["2", "2"]
