"""Production-shaped results lines with slices: the streams of `harness/production_streams.py`
(conversations, a day's cycle of traffic and defect rate) as results lines of two
evaluators, `local_groundedness` and `local_retrieval`, whose records carry the dimensions a
page's attribution looks at, with a change injected into one slice, or into all of them.

    python bench/sliced_streams.py OUT.jsonl.gz --hours 14 --rise-at 8 --inject model=claude-3-5-haiku

Each conversation (5 to 20 turns, a turn a minute) has one version, model, route and
language, and a topic; each turn (a record) has its documents' source, their number and
length, and a tool. Values and their shares are in `VALUES`; models differ in their own rate
(`MODEL_RATE`), so a rise spread evenly over them is the same factor on unequal rates.

A record's verdicts: retrieval fails with probability `RETRIEVAL_FAIL`; groundedness fails
with `GROUNDED_FAIL_GOOD` at good retrieval and `GROUNDED_FAIL_BAD` at failed retrieval,
times the conversation's own factor (a Gamma of mean 1 and shape `CONVERSATION_SHAPE`: its
verdicts fail together), the model's rate and the day's cycle (`production_streams.
defect_rate` over its mean). The injections, from `rise_at`:

- `slice` (`dimension=value`): groundedness fails `factor` times as often in that slice;
- `uniform`: `factor` times as often everywhere;
- `retriever` (a slice): the slice's documents are swapped for unrelated ones: retrieval
  fails with `BAD_RETRIEVAL`, and groundedness follows at failed retrieval's rate;
- `generator` (a slice): answers contradict good documents: groundedness fails `factor`
  times as often at good retrieval, retrieval unchanged.
"""

from __future__ import annotations

import argparse
import gzip
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import bench_smoke
from harness.production_streams import (
    DAY_S,
    MAX_TURNS,
    MIN_TURNS,
    START,
    TURN_S,
    StreamSpec,
    defect_rate,
    traffic,
)

SERVICE = "shop"
GROUNDED = "local_groundedness"
RETRIEVAL = "local_retrieval"
RETRIEVAL_FAIL = 0.10
BAD_RETRIEVAL = 0.80
GROUNDED_FAIL_GOOD = 0.16
GROUNDED_FAIL_BAD = 0.60
CONVERSATION_SHAPE = 2.0
MAX_RATE = 0.95

# Per conversation: version, model, route, language; per record: source, documents,
# context, tool; topic per conversation.
VALUES: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = {
    "version": (("1.4.2", "1.5.0"), (0.7, 0.3)),
    "model": (("gpt-4o", "claude-3-5-haiku", "llama-3.1-70b"), (0.5, 0.3, 0.2)),
    "route": (("/ask", "/search", "/chat", "/support"), (0.4, 0.25, 0.2, 0.15)),
    "language": (("en", "de", "fr"), (0.8, 0.1, 0.1)),
    "topic": (
        ("payments", "orders", "shipping", "account", "warranty", "product"),
        (0.2, 0.2, 0.15, 0.15, 0.15, 0.15),
    ),
    "source": (
        ("docs.example.com", "kb", "wiki.internal", "tickets", "manuals"),
        (0.3, 0.25, 0.2, 0.15, 0.1),
    ),
    "documents": (("2-3", "4-7", "8-15"), (0.3, 0.5, 0.2)),
    "context": (("500-2k", "2k-8k", "8k-32k"), (0.3, 0.5, 0.2)),
    "tool": (("", "search_kb", "lookup_order"), (0.6, 0.3, 0.1)),
}
PER_CONVERSATION = ("version", "model", "route", "language", "topic")
MODEL_RATE = {"gpt-4o": 1.0, "claude-3-5-haiku": 0.8, "llama-3.1-70b": 1.3}


@dataclass(frozen=True)
class Injection:
    """What changes from `at_s` (seconds after the stream's start): see the module
    docstring. `dimension` and `value` name the slice (not for `uniform`)."""

    kind: str
    at_s: float
    factor: float = 1.0
    dimension: str = ""
    value: str = ""


def records(
    spec: StreamSpec, injection: Injection | None, offset_s: float = 0.0
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The stream's results lines in time order, as `(where, line)` pairs (what
    `Backtest.run` takes). `offset_s`: where in the day the stream starts."""
    rng = np.random.default_rng(spec.seed)
    duration = spec.days * DAY_S
    mean_turns = (MIN_TURNS + MAX_TURNS) / 2
    peak = spec.rate / mean_turns * (1 + (spec.traffic_ratio - 1) / (spec.traffic_ratio + 1))
    count = rng.poisson(peak * duration)
    starts = np.sort(rng.uniform(0.0, duration, count))
    peak_traffic = traffic(spec, np.array([14 * 3600.0]))
    keep = rng.uniform(0.0, 1.0, count) < traffic(spec, starts + offset_s) / peak_traffic
    starts = starts[keep]
    conversations = starts.size
    sizes = rng.integers(MIN_TURNS, MAX_TURNS + 1, conversations)
    own = rng.gamma(CONVERSATION_SHAPE, 1 / CONVERSATION_SHAPE, conversations)
    chosen = {
        name: rng.choice(len(VALUES[name][0]), conversations, p=VALUES[name][1])
        for name in PER_CONVERSATION
    }
    conv = np.repeat(np.arange(conversations), sizes)
    turn = np.concatenate([np.arange(n) for n in sizes]) if conversations else np.zeros(0)
    t = starts[conv] + turn * TURN_S
    order = np.argsort(t, kind="stable")
    conv, t = conv[order], t[order]
    n = t.size
    per_record = {
        name: rng.choice(len(VALUES[name][0]), n, p=VALUES[name][1])
        for name in VALUES
        if name not in PER_CONVERSATION
    }
    index = {name: chosen[name][conv] for name in PER_CONVERSATION} | per_record
    cycle, _ = defect_rate(spec, t + offset_s)
    time_factor = cycle / spec.mean
    model_names = VALUES["model"][0]
    model_factor = np.array([MODEL_RATE[m] for m in model_names])[index["model"]]
    factor = own[conv] * time_factor * model_factor
    retrieval_p = np.full(n, RETRIEVAL_FAIL)
    good_p = GROUNDED_FAIL_GOOD * factor
    bad_p = GROUNDED_FAIL_BAD * factor
    if injection is not None:
        after = t >= injection.at_s
        if injection.kind == "uniform":
            inside = after
        else:
            values = VALUES[injection.dimension][0]
            inside = after & (index[injection.dimension] == values.index(injection.value))
        if injection.kind in ("slice", "uniform"):
            good_p = np.where(inside, good_p * injection.factor, good_p)
            bad_p = np.where(inside, bad_p * injection.factor, bad_p)
        elif injection.kind == "retriever":
            retrieval_p = np.where(inside, BAD_RETRIEVAL, retrieval_p)
        elif injection.kind == "generator":
            good_p = np.where(inside, good_p * injection.factor, good_p)
        else:
            raise ValueError(f"unknown injection {injection.kind}")
    retrieval_failed = rng.uniform(size=n) < retrieval_p
    grounded_p = np.minimum(np.where(retrieval_failed, bad_p, good_p), MAX_RATE)
    grounded_failed = rng.uniform(size=n) < grounded_p
    trace_bits = rng.integers(0, 2**63, size=(n, 2), dtype=np.int64)
    names = {name: VALUES[name][0] for name in VALUES}
    for k in range(n):
        c = int(conv[k])
        v = {name: names[name][int(index[name][k])] for name in VALUES}
        yield (
            f"record {k}",
            {
                "time": START + offset_s + float(t[k]),
                "service": SERVICE,
                "version": v["version"],
                "route": v["route"],
                "model": v["model"],
                "conversation": f"c{c}",
                "trace_id": f"{int(trace_bits[k, 0]):016x}{int(trace_bits[k, 1]):016x}",
                "dimensions": {
                    "source": v["source"],
                    "documents": v["documents"],
                    "context": v["context"],
                    "tool": v["tool"],
                    "language": v["language"],
                    "topic": v["topic"],
                },
                "results": {
                    GROUNDED: _verdict(not bool(grounded_failed[k])),
                    RETRIEVAL: _verdict(not bool(retrieval_failed[k])),
                },
            },
        )


def share(dimension: str, value: str) -> float:
    values, weights = VALUES[dimension]
    return weights[values.index(value)]


def slice_factor(dimension: str, value: str, rise: float) -> float:
    """The factor that raises the service's groundedness defect rate by about `rise` when
    applied in the slice `dimension=value` alone (at the models' mean rate)."""
    base = RETRIEVAL_FAIL * GROUNDED_FAIL_BAD + (1 - RETRIEVAL_FAIL) * GROUNDED_FAIL_GOOD
    if dimension == "model":
        base *= MODEL_RATE[value]
    else:
        base *= sum(MODEL_RATE[m] * w for m, w in zip(*VALUES["model"], strict=True))
    return 1 + rise / (share(dimension, value) * base)


def _verdict(passed: bool) -> dict[str, Any]:
    return {"passed": passed, "label": "pass" if passed else "fail", "revision": "r1"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--hours", type=float, default=14)
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--rise-at", type=float, default=8.0, help="hours after the start")
    parser.add_argument("--rise", type=float, default=0.07, help="of the service's rate")
    parser.add_argument("--inject", default="", help="DIMENSION=VALUE, or empty: uniform")
    parser.add_argument("--kind", default="slice", choices=("slice", "retriever", "generator"))
    parser.add_argument("--seed", type=int, default=1)
    args = bench_smoke.parse_args(parser, argv, hours=0.5, rise_at=0.25)
    spec = StreamSpec(
        rate=args.rate, days=args.hours / 24, cycle=0.02, traffic_ratio=3.0, seed=args.seed
    )
    at = args.rise_at * 3600
    if args.inject:
        dimension, _, value = args.inject.partition("=")
        factor = slice_factor(dimension, value, args.rise)
        injection = Injection(args.kind, at, factor, dimension, value)
    else:
        base = spec.mean
        injection = Injection("uniform", at, 1 + args.rise / base)
    opener = gzip.open if args.out.suffix == ".gz" else open
    lines = 0
    with opener(args.out, "wb") as out:
        for _, line in records(spec, injection):
            out.write(orjson.dumps(line) + b"\n")
            lines += 1
    print(f"{args.out}: {lines} results lines over {args.hours:g} hours", file=sys.stderr)
    return 0 if math.isfinite(lines) else 1


if __name__ == "__main__":
    raise SystemExit(main())
