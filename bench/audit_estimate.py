"""The audited estimate of the true defect rate (`monitor.evidence.ppi`) on labelled data:
the embedded detector's verdicts on every record, the labels as the reference on an audited
share chosen by the sampling hash.

    python bench/audit_estimate.py DATA.jsonl ... [--runs 200] [--shares 0.02 0.05]
        [--window 5000] [--trace-windows 40000 100000] [--limit N] [--cache FILE]
        [--jobs N] [--write-docs]

The detector (`local_groundedness` as shipped) scores each record once; its verdicts are
cached in a file outside the repository (`--cache`, default in the temp directory) keyed by
the data file's digest, so a rerun scores nothing. Each run then audits the records whose
sampling position (the monitor's hash) of a per-run key is below the share, and estimates
the defect rate with its 95 % interval (PPI++). Two kinds of population per data file:

- `set`: the data file itself, one window; the audited share varies between runs only by
  which records the hash picks;
- production-shaped windows of `--window` records drawn from the file: `iid` (uniform
  draws), `clustered` (conversations: runs of 1-30 answers to the same question, so verdicts
  come in clusters), `drifting` (the hallucinated share creeps from 5 % to 40 % across the
  window); and `one trace per conversation`, the clustered windows with each conversation's
  records in one trace, so audited together, a trace of 15 records on average: at
  `--trace-windows` records each (a row per size), large enough that 2 % of the traces
  are enough audited traces for an interval.

Per row: the audited traces (median), runs with an interval (at least `MIN_AUDITED`
effective audited traces), the interval's
coverage of the window's true (labelled) rate, its median width, the median width of the
interval from the audited records alone and the ratio (the gain), the estimate's bias (mean
over the runs with an interval) and the raw detector rate's bias (mean over all runs)
against the truth, and the detector's measured miss and false-alarm rates (medians).

    python bench/audit_estimate.py --anchor-power [--runs 2000] [--write-docs]

The judge check's power instead (`monitor.audit.anchors`, no data needed): 40 anchors, half
hallucinated; a judge that gets each anchor right with probability `q` at every check
(q = 1: a judge at temperature 0, the same verdicts every time; below 1, verdicts that
vary between checks) drifts after its baseline check so that `k` hallucinated anchors are
now right with probability 1 − q (it passes them). Per row: how often the first check after
the drift pages, and how often one of the first 4 (a day at `every` 6h) and 28 (a week)
do; `k` = 0 is the unchanged judge (its false pages).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import bench_docs, bench_smoke  # noqa: E402
from monitor.evidence.flips import Flips  # noqa: E402
from monitor.evidence.ppi import MIN_AUDITED, Tally, Trace, estimate  # noqa: E402
from monitor.processors.sampler import sampling_position  # noqa: E402

DEFAULT_CACHE = Path(tempfile.gettempdir()) / "rag-monitor-audit-verdicts.json"


@dataclass(frozen=True, slots=True)
class Labelled:
    question: str
    hallucinated: bool
    flagged: bool  # the detector failed it


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _score(rows: list[dict[str, object]]) -> list[bool]:
    """The detector's verdict (True = fail) on each row, as the evaluator ships."""
    from monitor.config import EvaluatorConfig
    from monitor.evaluators.local import LocalGroundedness
    from monitor.records import parse_record

    evaluator = LocalGroundedness(EvaluatorConfig(name="local_groundedness"))
    out = []
    for row in rows:
        record = {k: v for k, v in row.items() if k != "label"}
        result = evaluator.score(parse_record(record))
        if result.passed is None:
            raise SystemExit(f"the detector gave no verdict: {result.error}")
        out.append(not result.passed)
    return out


def load(path: Path, cache: Path, limit: int | None, seed: int) -> list[Labelled]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    if limit is not None and limit < len(rows):
        rows = random.Random(seed).sample(rows, limit)
    key = f"{_digest(path)}:{limit}:{seed}"
    cached: dict[str, list[bool]] = json.loads(cache.read_text()) if cache.exists() else {}
    if key not in cached:
        started = time.monotonic()
        cached[key] = _score(rows)
        cache.write_text(json.dumps(cached))
        print(f"{path.name}: scored {len(rows)} records in {time.monotonic() - started:.0f} s")
    return [
        Labelled(str(row["request"]), bool(row["label"]["hallucinated"]), flagged)
        for row, flagged in zip(rows, cached[key], strict=True)
    ]


Window = Callable[[random.Random, list[Labelled], int], list[Labelled]]


def _whole(rng: random.Random, rows: list[Labelled], size: int) -> list[Labelled]:
    return rows


def _iid(rng: random.Random, rows: list[Labelled], size: int) -> list[Labelled]:
    return rng.choices(rows, k=size)


def _clustered(rng: random.Random, rows: list[Labelled], size: int) -> list[Labelled]:
    """Conversations: runs of 1-30 answers drawn from the answers to one question."""
    by_question: dict[str, list[Labelled]] = defaultdict(list)
    for row in rows:
        by_question[row.question].append(row)
    questions = list(by_question.values())
    out: list[Labelled] = []
    while len(out) < size:
        answers = rng.choice(questions)
        out.extend(rng.choices(answers, k=rng.randint(1, 30)))
    return out[:size]


def _drifting(rng: random.Random, rows: list[Labelled], size: int) -> list[Labelled]:
    """The hallucinated share creeps from 5 % to 40 % across the window."""
    bad = [r for r in rows if r.hallucinated]
    good = [r for r in rows if not r.hallucinated]
    return [rng.choice(bad if rng.random() < 0.05 + 0.35 * i / size else good) for i in range(size)]


WINDOWS: dict[str, Window] = {
    "set": _whole,
    "iid": _iid,
    "clustered": _clustered,
    "drifting": _drifting,
    # The same conversations, each one trace: its records share the sampling hash and are
    # audited together, a cluster sample (the variance is per trace).
    "one trace per conversation": _clustered,
}
SHARED_TRACE = "one trace per conversation"


@dataclass(slots=True)
class Outcome:
    truth: float
    raw: float
    estimate: float | None = None
    covered: bool = False
    width: float = 0.0
    audited_width: float = 0.0
    traces: int = 0  # audited traces
    miss: float | None = None
    false_alarm: float | None = None


def one_run(
    window: Sequence[Labelled], share: float, run: str, shared_trace: bool = False
) -> Outcome:
    """`shared_trace`: a run of answers to one question is one trace (one hash), else each
    record is its own."""
    tally = Tally()
    trace, audited = 0, False
    so_far = Trace()  # the current trace's sums (its records are consecutive)
    for i, row in enumerate(window):
        if not i or not shared_trace or row.question != window[i - 1].question:
            trace = trace + 1 if i else 0
            audited, so_far = sampling_position(f"{run}:{trace}") < share, Trace()
        if audited:
            so_far = tally.add_audited(row.flagged, row.hallucinated, so_far)
        else:
            so_far = tally.add_unaudited(row.flagged, so_far)
    truth = sum(r.hallucinated for r in window) / len(window)
    got = estimate(tally)
    outcome = Outcome(truth, got.raw, miss=got.miss_rate, false_alarm=got.false_alarm_rate)
    outcome.traces = tally.audited_trace_count
    if got.corrected is not None and got.audited_only is not None:
        outcome.estimate = got.corrected.estimate
        outcome.covered = got.corrected.lower <= truth <= got.corrected.upper
        outcome.width = got.corrected.width
        outcome.audited_width = got.audited_only.width
    return outcome


def _median(values: Sequence[float | None]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    middle = statistics.median(present)
    return f"{middle:.3f}" if isinstance(present[0], float) else f"{middle:,.0f}"


def row(name: str, kind: str, size: int, share: float, outcomes: list[Outcome]) -> list[str]:
    with_interval = [o for o in outcomes if o.estimate is not None]
    if not with_interval:
        return (
            [name, kind, f"{size:,}", f"{share:.0%}", _median([o.traces for o in outcomes])]
            + [f"0/{len(outcomes)}"]
            + ["-"] * 6
            + [
                f"{statistics.mean(o.raw - o.truth for o in outcomes):+.3f}",
                _median([o.miss for o in outcomes]),
                _median([o.false_alarm for o in outcomes]),
            ]
        )
    width = statistics.median(o.width for o in with_interval)
    audited = statistics.median(o.audited_width for o in with_interval)
    covered = sum(o.covered for o in with_interval) / len(with_interval)
    bias = statistics.mean(o.estimate - o.truth for o in with_interval if o.estimate is not None)
    return [
        name,
        kind,
        f"{size:,}",
        f"{share:.0%}",
        _median([o.traces for o in outcomes]),
        f"{len(with_interval)}/{len(outcomes)}",
        f"{covered:.1%}",
        f"{width:.3f}",
        f"{audited:.3f}",
        f"{width / audited:.2f}" if audited else "-",
        f"{statistics.mean(o.truth for o in outcomes):.3f}",
        f"{bias:+.3f}",
        f"{statistics.mean(o.raw - o.truth for o in outcomes):+.3f}",
        _median([o.miss for o in outcomes]),
        _median([o.false_alarm for o in outcomes]),
    ]


HEADER = [
    "data",
    "window",
    "records",
    "audited",
    "audited traces, median",
    "runs with an interval",
    "coverage of the true rate",
    "width, median",
    "audited-only width",
    "width ratio",
    "true rate, mean",
    "estimate's bias",
    "raw rate's bias",
    "miss rate",
    "false-alarm rate",
]


ANCHORS = 40  # the shipped set: the first half faithful, the second hallucinated
ALPHA = 0.001  # audit.anchors.alpha's default
CHECKS = (1, 4, 28)


def _check(rng: random.Random, right: Sequence[float]) -> list[bool]:
    return [rng.random() < q for q in right]


def first_page(rng: random.Random, q: float, drifted: int, checks: int) -> int | None:
    """The check after the drift (1-based) that pages first, or None within `checks`."""
    hallucinated = [i >= ANCHORS // 2 for i in range(ANCHORS)]
    base = _check(rng, [q] * ANCHORS)
    after = [1 - q if i >= ANCHORS - drifted else q for i in range(ANCHORS)]
    for n in range(1, checks + 1):
        now = _check(rng, after)
        pairs = list(zip(base, now, hallucinated, strict=True))
        if Flips.of(pairs).p_value < ALPHA:
            return n
    return None


def anchor_power(runs: int, seed: int) -> tuple[str, str]:
    rows = []
    for q in (1.0, 0.97, 0.9):
        for drifted in (0, 4, 8, 11, 12, 16, 20):
            rng = random.Random(f"{seed}:{q}:{drifted}")
            pages = [first_page(rng, q, drifted, CHECKS[-1]) for _ in range(runs)]
            shares = [sum(p is not None and p <= c for p in pages) / runs for c in CHECKS]
            rows.append([f"{q:.2f}", drifted, *(f"{share:.1%}" for share in shares)])
    header = ["q (right, per anchor)", "hallucinated anchors drifted (k)"]
    header += [f"paged within {c} check{'s' if c > 1 else ''}" for c in CHECKS]
    note = f"{runs} runs per row; {ANCHORS} anchors, alpha {ALPHA}"
    return bench_docs.table(header, rows), note


@dataclass(frozen=True, slots=True)
class Task:
    """One row: `runs` windows of `size` records of `kind` drawn from `labelled`."""

    name: str
    labelled: list[Labelled]
    kind: str
    size: int
    share: float
    seed: int
    runs: int


def _row(task: Task) -> list[str]:
    """A row of the table (in a worker process of its own)."""
    shared = task.kind == SHARED_TRACE
    at = f":{task.size}" if shared else ""
    rng = random.Random(f"{task.seed}:{task.name}:{task.kind}:{task.share}{at}")
    outcomes = []
    for run in range(task.runs):
        window = WINDOWS[task.kind](rng, task.labelled, task.size)
        key = f"{task.seed}:{task.kind}:{run}"
        outcomes.append(one_run(window, task.share, key, shared))
    size = len(task.labelled) if task.kind == "set" else task.size
    return row(task.name, task.kind, size, task.share, outcomes)


def _shapes(window: int, trace_windows: Sequence[int]) -> list[tuple[str, int]]:
    """Each row's population: its window's name and records."""
    out: list[tuple[str, int]] = []
    for kind in WINDOWS:
        out.extend((kind, size) for size in (trace_windows if kind == SHARED_TRACE else [window]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="*", type=Path, help="labelled JSONL files")
    parser.add_argument("--anchor-power", action="store_true", help="the judge check's power")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.02, 0.05])
    parser.add_argument("--window", type=int, default=5000, help="records per drawn window")
    parser.add_argument(
        "--trace-windows",
        type=int,
        nargs="+",
        default=[40_000, 100_000],
        help="records per window of the one-trace-per-conversation rows (a row each)",
    )
    parser.add_argument("--limit", type=int, help="score a random subsample of each file")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, help="rows computed at once")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, argv, runs=3, window=1000, trace_windows=[1000])
    started = time.monotonic()
    if args.anchor_power:
        table, note = anchor_power(args.runs, args.seed)
        print(f"{table}\n{note}; {time.monotonic() - started:.0f} s")
        if args.write_docs:
            bench_docs.write_block("docs/audit.md", "anchor-power", f"{table}\n\n{note}")
        return 0
    if not args.data:
        parser.error("labelled JSONL files are needed (or --anchor-power)")
    tasks = []
    for path in args.data:
        labelled = load(path, args.cache, args.limit, args.seed)
        name = path.name.removesuffix(".jsonl")
        for kind, size in _shapes(args.window, args.trace_windows):
            for share in args.shares:
                tasks.append(Task(name, labelled, kind, size, share, args.seed, args.runs))
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(_row, tasks))
    table = bench_docs.table(HEADER, rows)
    note = (
        f"{args.runs} runs per row; an interval needs {MIN_AUDITED} effective audited traces; "
        f"{time.monotonic() - started:.0f} s"
    )
    print(table)
    print(note)
    if args.write_docs:
        bench_docs.write_block("docs/quality.md", "audit-estimate", f"{table}\n\n{note}", mode="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
