"""OTLP ingest of this checkout against another commit, in one run.

    python bench/ingest_against.py COMMIT [--rounds 3] [--seconds 15] [--sampling 0]

Checks COMMIT out into a temporary git worktree and drives the `rag-monitor run` of each
tree (pinned to one CPU) with this checkout's `bench/ingest.py`, the same load and
config for both, alternating `--rounds` times so both see the same machine load. Prints
spans per server CPU-second per round and the median ratio this/COMMIT. With
`--sampling 0` nothing is evaluated, so the comparison is of ingest alone (decoding,
assembly, sampling), not of the evaluators, which change on their own.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_LINE = re.compile(r"otlp_(\w+)\s.*\(= (\d+) spans per CPU-second\)")


def measure(tree: Path, seconds: float, protocol: str, sampling: float) -> dict[str, int]:
    """This checkout's bench driving the monitor of `tree` (its cwd: `-m monitor`)."""
    script = REPO / "bench" / "ingest.py"
    if tree != REPO:  # a copy inside the other tree, so that it drives that tree's monitor
        script = tree / "bench" / "ingest_driver.py"
        if not script.exists():
            script.write_text((REPO / "bench" / "ingest.py").read_text())
    out = subprocess.run(
        [
            sys.executable,
            str(script),
            "--seconds",
            str(seconds),
            "--protocol",
            protocol,
            "--sampling",
            str(sampling),
            "--no-reference",
        ],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {m.group(1): int(m.group(2)) for m in _LINE.finditer(out)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--protocol", choices=["http", "grpc", "both"], default="both")
    parser.add_argument("--sampling", type=float, default=0.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rag-monitor-old-") as tmp:
        old = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(old), args.commit],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        try:
            ratios: dict[str, list[float]] = {}
            for round_ in range(args.rounds):
                before = measure(old, args.seconds, args.protocol, args.sampling)
                now = measure(REPO, args.seconds, args.protocol, args.sampling)
                for protocol in sorted(now):
                    ratio = now[protocol] / before[protocol]
                    ratios.setdefault(protocol, []).append(ratio)
                    print(
                        f"round {round_ + 1} otlp_{protocol}: {args.commit[:10]} "
                        f"{before[protocol]} spans/CPU-s, this tree {now[protocol]} "
                        f"spans/CPU-s, ratio {ratio:.2f}"
                    )
            for protocol, values in sorted(ratios.items()):
                print(
                    f"otlp_{protocol}: median ratio this/{args.commit[:10]} {statistics.median(values):.2f}"
                )
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(old)], cwd=REPO, check=False
            )


if __name__ == "__main__":
    main()
