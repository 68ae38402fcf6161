"""Steps measured each in a fresh interpreter: the child prints one JSON line with `s`
(seconds) and `mb` (peak RSS above the point where the step started, from `ru_maxrss`);
the steps run in turns, so that a slower moment of a shared machine hits them all, and
the table gives each step's medians and their ratios to the first step's."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
Result = dict[str, float]


def run_child(module: str, *args: str) -> Result:
    """Run `python -m module args...` in a fresh interpreter in the repository; its last
    output line, parsed."""
    out = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=REPO, check=True, capture_output=True, text=True
    )
    result: Result = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def in_turns(
    steps: tuple[str, ...], runs: int, run: Callable[[str], Result]
) -> dict[str, list[Result]]:
    results: dict[str, list[Result]] = {step: [] for step in steps}
    for _ in range(runs):
        for step in steps:
            results[step].append(run(step))
    return results


def print_table(results: dict[str, list[Result]]) -> None:
    """Medians of time and peak RSS per step, and their ratios to the first step's."""
    reference, *_ = results
    base = {k: statistics.median(r[k] for r in results[reference]) for k in ("s", "mb")}
    label = f"x {reference}"
    width = max(len(step) for step in results) + 2
    print(f"{'step':<{width}}{'time':>10}{label:>16}{'peak RSS':>11}{label:>16}")
    for step, rows in results.items():
        seconds = statistics.median(r["s"] for r in rows)
        mb = statistics.median(r["mb"] for r in rows)
        print(
            f"{step:<{width}}{seconds:>9.3f}s{seconds / base['s']:>15.2f}x"
            f"{mb:>8.0f} MB{mb / max(base['mb'], 1):>15.2f}x"
        )
