"""A Kafka replica joining and another leaving later: does the consumer group settle?

    python bench/kafka_join_leave.py [--runs 10] [--stay-s 16] [--per-partition 300]
                                     [--settle-s 60] [--broker tansu|noida]

Each run is `harness/kafka_join_leave.py`'s (the test's scenario): a first replica whose
pipeline is full and fetching paused when a second replica joins, the pipeline drained as
the join's assignment arrives, the second replica working its partition to the end and
leaving `--stay-s` after it joined. A run settles once every record is evaluated and both
partitions are committed to their end, within `--settle-s` of the leave (stretched by the
machine's load, as the tests' deadlines are). It starts its own broker on a free port, one
for all the runs, and prints a table of the runs and how many settled.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import bench_smoke
from harness.kafka_broker import running_broker
from harness.kafka_join_leave import Outcome, join_then_leave


def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| run | settled | seconds from the leave | evaluated | committed | left paused |",
        "|---|---|---|---|---|---|",
    ]
    for i, o in enumerate(outcomes, 1):
        committed = ", ".join(f"{p}: {c}" for p, c in sorted(o.committed.items()))
        lines.append(
            f"| {i} | {'yes' if o.settled else 'NO'} | {o.seconds:.1f} | "
            f"{o.evaluated} of {o.records} | {committed} | {o.paused or 'none'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--stay-s", type=float, default=16.0)
    parser.add_argument("--per-partition", type=int, default=300)
    parser.add_argument("--settle-s", type=float, default=60.0)
    parser.add_argument("--broker", choices=("tansu", "noida"), default="tansu")
    args = bench_smoke.parse_args(parser, runs=1, stay_s=0.0, per_partition=60)
    logging.basicConfig(level=logging.WARNING)
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory() as work:
        with running_broker(args.broker, Path(work)) as broker:
            for _ in range(args.runs):
                outcome = asyncio.run(
                    join_then_leave(
                        broker,
                        per_partition=args.per_partition,
                        stay_s=args.stay_s,
                        settle_s=args.settle_s,
                    )
                )
                outcomes.append(outcome)
                print(table(outcomes).splitlines()[-1], flush=True)
    print()
    print(table(outcomes))
    settled = sum(o.settled for o in outcomes)
    print(f"\nsettled in {settled} runs of {len(outcomes)} ({args.broker}, stay {args.stay_s:g} s)")


if __name__ == "__main__":
    main()
