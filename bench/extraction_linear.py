"""How a prompt's split grows with its size, on prompts shaped to make it super-linear
(`harness/hostile_prompts.py`): each layout of `monitor/extraction` timed on each shape at
sizes from 1 kB to 256 kB (by default), one user message each.

    python bench/extraction_linear.py [--sizes 1024 4096 16384 65536 262144] [--budget 5]

Printed: a Markdown table, a row per layout and shape, with the microseconds per byte at
the smallest and the largest size and their ratio (largest / smallest: about 1 when the
split is linear; a quadratic one grows with the sizes' ratio). A size whose split passes
`--budget` seconds stops that row (shown `>budget`): the larger ones would only take
longer. Wall time, best of `--trials`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import bench_smoke
from harness.hostile_prompts import SHAPES
from monitor.extraction._prompt_documents import (
    _blank_line_documents,
    _instruction,
    documents_from_prompt,
)
from monitor.extraction._prompt_layouts import heading_documents
from monitor.extraction._prompt_templates import PromptTemplates

LAYOUTS: dict[str, Callable[[str], object]] = {
    "prompt": lambda text: documents_from_prompt(
        [("user", text)], None, templates=PromptTemplates()
    ),
    "headings": lambda text: heading_documents(
        text.splitlines(), _instruction, _blank_line_documents
    ),
}


class _Over(Exception):
    pass


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    raise _Over


def _seconds(split: Callable[[str], object], text: str, trials: int, budget: float) -> float:
    """The best of `trials` splits of `text`; inf past `budget` (the regex engine and
    Python code both stop at the alarm)."""
    best = float("inf")
    for _ in range(trials):
        signal.setitimer(signal.ITIMER_REAL, budget)
        started = time.perf_counter()
        try:
            split(text)
        except _Over:
            return float("inf")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384, 65536, 262144])
    parser.add_argument("--budget", type=float, default=5.0, help="seconds per split, at most")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    args = bench_smoke.parse_args(parser, argv, sizes=[256, 1024], trials=1, budget=1.0)
    signal.signal(signal.SIGALRM, _alarm)
    sizes = sorted(args.sizes)
    print(f"sizes: {', '.join(str(s) for s in sizes)} bytes; best of {args.trials}\n")
    print(
        f"| layout | shape | µs/byte at {sizes[0]} B | µs/byte at {sizes[-1]} B "
        "| largest / smallest |"
    )
    print("|---|---|---|---|---|")
    for layout, split in LAYOUTS.items():
        for shape in args.shapes:
            per_byte: list[float] = []
            for size in sizes:
                text = SHAPES[shape](size)
                took = _seconds(split, text, args.trials, args.budget)
                per_byte.append(took * 1e6 / len(text.encode()))
                if took == float("inf"):
                    break
            first, last = per_byte[0], per_byte[-1]
            shown = f">{args.budget:g} s" if last == float("inf") else f"{last:.3f}"
            if len(per_byte) < len(sizes):
                shown += f" (at {sizes[len(per_byte) - 1]} B)"
            if first == float("inf"):
                print(f"| {layout} | {shape} | >{args.budget:g} s | {shown} | - |")
                continue
            ratio = f"{last / first:.1f}" if first > 0 and last != float("inf") else "-"
            print(f"| {layout} | {shape} | {first:.3f} | {shown} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
