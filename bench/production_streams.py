"""Writes a production-shaped verdict stream (`harness/production_streams.py`) as
JSON lines, for `rag-monitor backtest`.

    python bench/production_streams.py OUT.jsonl.gz --days 28 --rate 1 --icc 0.17
        [--services 4] [--cycle 0.03] [--traffic-ratio 10] [--no-ids] [--step DAY:FACTOR]
        [--drift DAY:DAYS:TO] [--spell DAY:HOURS:TO] [--revision DAY:RATE] [--seed 1]
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import bench_smoke
from harness.production_streams import Change, StreamSpec, stream

__all__ = ["Change", "StreamSpec", "stream"]


def _change(kind: str, text: str) -> Change:
    parts = [float(x) for x in text.split(":")]
    if kind == "step":
        return Change("step", parts[0], parts[1])
    if kind == "drift":
        return Change("drift", parts[0], parts[2], parts[1])
    if kind == "spell":
        return Change("spell", parts[0], parts[2], parts[1] / 24)
    return Change("revision", parts[0], parts[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--days", type=float, default=28)
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--icc", type=float, default=0.0)
    parser.add_argument("--mean", type=float, default=0.2)
    parser.add_argument("--cycle", type=float, default=0.0)
    parser.add_argument("--week-cycle", type=float, default=0.0)
    parser.add_argument("--traffic-ratio", type=float, default=1.0)
    parser.add_argument("--services", type=int, default=1)
    parser.add_argument("--no-ids", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    for kind in ("step", "drift", "spell", "revision"):
        parser.add_argument(f"--{kind}", action="append", default=[])
    args = bench_smoke.parse_args(parser, argv, days=0.05)
    changes = tuple(
        _change(kind, text)
        for kind in ("step", "drift", "spell", "revision")
        for text in getattr(args, kind)
    )
    spec = StreamSpec(
        rate=args.rate,
        days=args.days,
        icc=args.icc,
        mean=args.mean,
        cycle=args.cycle,
        week_cycle=args.week_cycle,
        traffic_ratio=args.traffic_ratio,
        ids=not args.no_ids,
        services=args.services,
        changes=changes,
        seed=args.seed,
    )
    opener = gzip.open if args.out.suffix == ".gz" else open
    with opener(args.out, "wb") as out:
        for _, row in stream(spec):
            out.write(orjson.dumps(row) + b"\n")
    print(f"{args.out}: {spec.services} services, {spec.days:g} days", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
