"""Peak RSS of `rag-monitor replay` (main process plus its worker processes) fed records
whose answers are 20 MB, against the same run without them.

    python bench/large_records_rss.py [--records 200] [--huge 3] [--huge-mb 20]

Records are generated (no data files). The process tree's resident memory is read from
/proc every 20 ms; the script prints both runs' peaks (the tree's, the main process's and
its workers') and the ratio of the trees' peaks, and exits with status 1 when the ratio
is past its target (at most 2), after printing (and with `--write-docs` writing) them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._pss import tree_pids  # noqa: E402
from harness import bench_docs, bench_smoke  # noqa: E402

SAMPLE_S = 0.02
# The project's target for the peak with the huge answers against the peak without them
# (docs/reliability.md).
TARGET_RATIO = 2.0


def record(i: int, answer: str | None = None) -> dict[str, object]:
    return {
        "request_id": f"r{i}",
        "question": f"What does section {i} of the refund policy say?",
        "context": [f"Section {i}: refunds are accepted within {i % 60 + 1} days." * 20],
        "answer": answer or f"Refunds are accepted within {i % 60 + 1} days. " * 10,
    }


def write(path: Path, count: int, huge: int, huge_bytes: int) -> None:
    every = count // (huge + 1) if huge else count + 1
    big = "Refunds are accepted within thirty days of purchase. " * (huge_bytes // 53)
    with path.open("w") as out:
        for i in range(count):
            out.write(json.dumps(record(i)) + "\n")
            if huge and i % every == every - 1 and huge > 0:
                out.write(json.dumps(record(10_000 + i, big)) + "\n")
                huge -= 1


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class Peaks:
    """Peak RSS in MB over one replay: the tree's (summed at each sample), the main
    process's, and its descendants' (fork server and workers, summed); and the replay's
    wall seconds."""

    tree_mb: float
    main_mb: float
    workers_mb: float
    seconds: float


def peak_rss_mb(path: Path, config: Path) -> Peaks:
    """The peaks of one replay of `path`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "monitor", "replay", str(path), "--config", str(config)]
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0, 0, 0]  # kB: tree, main, workers
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            main, *workers = (_rss_kb(pid) for pid in tree_pids(process.pid))
            for i, kb in enumerate((main + sum(workers), main, sum(workers))):
                peak[i] = max(peak[i], kb)
            time.sleep(SAMPLE_S)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, err = process.communicate()
    done.set()
    sampler.join()
    if process.returncode != 0:
        sys.exit(f"replay failed ({process.returncode}): {err.decode()[-2000:]}")
    tree, main, workers = (kb / 1024 for kb in peak)
    return Peaks(tree, main, workers, time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--huge", type=int, default=3)
    parser.add_argument("--huge-mb", type=float, default=20.0)
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, records=10, huge=1, huge_mb=2.0)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = work / "config.yaml"
        config.write_text("pipeline:\n  processes: 2\n")
        normal, huge = work / "normal.jsonl", work / "huge.jsonl"
        write(normal, args.records, 0, 0)
        write(huge, args.records, args.huge, int(args.huge_mb * 1024 * 1024))
        base = peak_rss_mb(normal, config)
        large = peak_rss_mb(huge, config)
    ratio = large.tree_mb / base.tree_mb
    table = bench_docs.table(
        [
            "`rag-monitor replay`, 2 worker processes",
            "peak RSS, main and workers",
            "main",
            "the others (fork server, workers)",
            "took",
        ],
        [
            _row(f"{args.records} records (the reference)", base),
            _row(f"the same with {args.huge} answers of {args.huge_mb:g} MB", large),
        ],
    )
    met = ratio <= TARGET_RATIO
    verdict = "met" if met else "**not met**"
    body = f"{table}\n\nRatio **{ratio:.2f}×**; target ≤ {TARGET_RATIO:g}×: {verdict}."
    print(body)
    if args.write_docs:
        bench_docs.write_block("docs/reliability.md", "large-records-rss", body)
    if not met:
        sys.exit(f"target exceeded: a peak {ratio:.2f}× the reference's, target {TARGET_RATIO:g}×")


def _row(name: str, peaks: Peaks) -> list[str]:
    return [
        name,
        f"{peaks.tree_mb:.0f} MB",
        f"{peaks.main_mb:.0f} MB",
        f"{peaks.workers_mb:.0f} MB",
        f"{peaks.seconds:.1f} s",
    ]


if __name__ == "__main__":
    main()
