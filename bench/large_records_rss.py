"""Peak RSS of `rag-monitor replay` (main process plus its worker processes) fed records
whose answers are 20 MB, against the same run without them.

    python bench/large_records_rss.py [--records 200] [--huge 3] [--huge-mb 20]

Records are generated (no data files). The process tree's resident memory is summed from
/proc every 20 ms; the script prints both peaks and their ratio (target: at most 2).
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import _docs  # noqa: E402
from bench._pss import tree_pids  # noqa: E402

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


def peak_rss_mb(path: Path, config: Path) -> tuple[float, float]:
    """(peak summed RSS in MB, wall seconds) of one replay of `path`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "monitor", "replay", str(path), "--config", str(config)]
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, sum(_rss_kb(pid) for pid in tree_pids(process.pid)))
            time.sleep(SAMPLE_S)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, err = process.communicate()
    done.set()
    sampler.join()
    if process.returncode != 0:
        sys.exit(f"replay failed ({process.returncode}): {err.decode()[-2000:]}")
    return peak / 1024, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--huge", type=int, default=3)
    parser.add_argument("--huge-mb", type=float, default=20.0)
    _docs.add_flag(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = work / "config.yaml"
        config.write_text("pipeline:\n  processes: 2\n")
        normal, huge = work / "normal.jsonl", work / "huge.jsonl"
        write(normal, args.records, 0, 0)
        write(huge, args.records, args.huge, int(args.huge_mb * 1024 * 1024))
        base, base_s = peak_rss_mb(normal, config)
        large, large_s = peak_rss_mb(huge, config)
    ratio = large / base
    table = _docs.table(
        ["`rag-monitor replay`, 2 worker processes", "peak RSS, main and workers", "took"],
        [
            [f"{args.records} records (the reference)", f"{base:.0f} MB", f"{base_s:.1f} s"],
            [
                f"the same with {args.huge} answers of {args.huge_mb:g} MB",
                f"{large:.0f} MB",
                f"{large_s:.1f} s",
            ],
        ],
    )
    verdict = "met" if ratio <= TARGET_RATIO else "not met"
    body = f"{table}\n\nRatio **{ratio:.2f}×**; target ≤ {TARGET_RATIO:g}×: {verdict}."
    print(body)
    if args.write_docs:
        _docs.write_block("docs/reliability.md", "large-records-rss", body)


if __name__ == "__main__":
    main()
