"""Ablation of the groundedness detector's rules: what each one earns, and what it costs.

    python -m bench.detector_ablation DATA.jsonl ... [--folds 5] [--repeat 3] [--only NAME ...]

The detector (first stage, as the `local_groundedness` evaluator ships it: the second stage
is off unless asked for) is scored in full, then once with each rule of `RULES` switched
off, one at a time, on:

- every labeled data file given (`label.hallucinated`; RAGTruth QA dev, HaluEval QA dev):
  AUROC over `--folds` folds of its questions (the grouping and shuffle of
  `training/train_detector.py`'s `family_folds`), mean and standard deviation, the paired
  change against the full detector fold by fold, and the failing shares at the shipped
  threshold over the whole file;
- the family probe (`training/probe_families.py`), the development families and the report
  families apart: AUROC and failing shares;
- the guard of blatant errors (`tests/detector/test_detector_guard.py`): how many errors
  fail and how many faithful twins pass, through the evaluator as the test scores them;
- the thread CPU time per record of the data files (the least of `--repeat` passes, taken
  in turn across the variants, after a warm-up pass of the full detector, so that every
  variant finds the same caches warm).

A rule is switched off from here, never by a switch in the product: the one function that
implements it is replaced by one that finds nothing (or the constant that enables it by
one that never matches), and put back afterwards. The logistic model's weights are **not**
refitted: a rule whose findings feed the model's counts (slot contradictions, conflicts)
is measured as the product would score without it under the shipped weights.

The output is markdown: the command and the date, then three tables.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import importlib.util  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from dataclasses import dataclass, field, replace  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import bench_smoke  # noqa: E402
from monitor.detector import (  # noqa: E402
    clauses,
    contradiction,
    features,
    groundedness,
    substitution,
)
from monitor.detector.embedding import Embedder  # noqa: E402
from monitor.detector.features import Analysis  # noqa: E402
from monitor.detector.groundedness import first_stage  # noqa: E402
from monitor.detector.slots import Parsed, Slot  # noqa: E402
from monitor.evaluators.local import LocalGroundedness  # noqa: E402
from training import probe_families  # noqa: E402
from training.detector_metrics import auroc  # noqa: E402
from training.train_detector import SEED, Example, load_records  # noqa: E402

THRESHOLD = LocalGroundedness.default_threshold
GUARD = Path(__file__).resolve().parents[1] / "tests" / "detector" / "test_detector_guard.py"
# A pattern that matches no text: a rule whose pattern it replaces never fires.
_NEVER = re.compile(r"(?!)")

Patch = tuple[ModuleType, str, object]


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule of the detector and how to switch it off: each (module, attribute, value)
    is set for the duration of the measurement."""

    name: str
    # The function or constant replaced, as the README's table names it.
    where: str
    patches: tuple[Patch, ...]


def _nothing(value: object) -> Callable[..., object]:
    """A function that takes any arguments and finds nothing (`value`)."""

    def found_nothing(*_args: object, **_kwargs: object) -> object:
        return value

    return found_nothing


_analyse = features.analyse


def _invented_not_decisive(
    query: str, contexts: Sequence[str], response: str, embedder: Embedder
) -> Analysis:
    """`analyse`, with a contradiction whose value the context lacks no longer decisive on
    that ground alone (the features, computed inside, are unchanged)."""
    found = _analyse(query, contexts, response, embedder)
    found.contradictions = [
        c if c.decisive else replace(c, invented=False) for c in found.contradictions
    ]
    return found


def _nothing_decisive(
    query: str, contexts: Sequence[str], response: str, embedder: Embedder
) -> Analysis:
    """`analyse`, with no contradiction deciding the score: the model (and the clause
    factor) alone, the contradictions still counted in its features."""
    found = _analyse(query, contexts, response, embedder)
    found.contradictions = [
        replace(c, decisive=False, invented=False) for c in found.contradictions
    ]
    return found


def _no_role_words(parsed: Parsed, slot: Slot, width: int) -> set[str]:
    """`role_words` that reads no role."""
    return set()


def _frame_without_question(
    claim: substitution._Words, question: substitution._Words, own: set[str]
) -> tuple[set[str], set[str]]:
    """`substitution._frame` without the question's words for a pronoun-led claim."""
    frame = set(claim.stems) - own
    return frame, frame


def _no_invented_clauses(*_args: object) -> None:
    return None


# The lexicon's classes of units of one dimension (minutes / hours, metres / kilometres).
_UNIT_CLASSES = frozenset({"time", "length", "weight", "money", "area"})
_CLASSES_WITHOUT_UNITS = {
    word: classes - _UNIT_CLASSES
    for word, classes in substitution._CLASS_OF.items()
    if classes - _UNIT_CLASSES
}


RULES: tuple[Rule, ...] = (
    Rule(
        "paraphrase: a close context word (vectors, 0.55) excuses a missing word",
        "features._SOFT_MATCH",
        ((features, "_SOFT_MATCH", math.inf),),
    ),
    Rule(
        "names: the first word of an answer of at most four words",
        "features._SHORT_ANSWER",
        ((features, "_SHORT_ANSWER", 0),),
    ),
    Rule(
        "numbers: a unit conversion of the number before it is supported",
        "features._converted",
        ((features, "_converted", _nothing(False)),),
    ),
    Rule(
        "abstentions are not claims",
        "features._ABSTAIN",
        ((features, "_ABSTAIN", _NEVER),),
    ),
    Rule(
        "slot contradictions, all (numbers, dates, names; rows below included)",
        "features._slot_contradictions",
        ((features, "_slot_contradictions", _nothing([])),),
    ),
    Rule(
        "roles, all (the words around a name read as its role)",
        "contradiction.role_words",
        ((contradiction, "role_words", _no_role_words),),
    ),
    Rule(
        "one-word names",
        "contradiction._one_word_name",
        ((contradiction, "_one_word_name", _nothing([])),),
    ),
    Rule(
        "negation flips",
        "features.contradicts",
        ((features, "contradicts", _nothing(frozenset())),),
    ),
    Rule(
        "substitutions, all (opposites, co-hyponyms, units)",
        "substitution.find",
        ((substitution, "find", _nothing([])),),
    ),
    Rule(
        "substitutions: a short claim against the context's only member or opposite",
        "substitution._sole_member, _sole_opposite",
        (
            (substitution, "_sole_member", _nothing(None)),
            (substitution, "_sole_opposite", _nothing(None)),
        ),
    ),
    Rule(
        "substitutions: units of one dimension (minutes / hours ...)",
        "substitution._CLASS_OF",
        ((substitution, "_CLASS_OF", _CLASSES_WITHOUT_UNITS),),
    ),
    Rule(
        "substitutions: a frame of at most six words compared by roots",
        "substitution._ROOTED",
        ((substitution, "_ROOTED", -1),),
    ),
    Rule(
        "substitutions: the question's words frame a claim",
        "substitution._frame",
        ((substitution, "_frame", _frame_without_question),),
    ),
    Rule(
        "polarity in other words",
        "substitution.polarity",
        ((substitution, "polarity", _nothing(None)),),
    ),
    Rule(
        "polarity in other words: an answer's leading 'No,' negates nothing",
        "substitution._LEADING_NO",
        ((substitution, "_LEADING_NO", _NEVER),),
    ),
    Rule(
        "polarity in other words: close words (vectors) restate",
        "substitution._synonym_share",
        ((substitution, "_synonym_share", _nothing(0.0)),),
    ),
    Rule(
        "invented clauses, all (x0.7, thin x0.8)",
        "features.find_invented",
        ((features, "find_invented", _no_invented_clauses),),
    ),
    Rule(
        "invented clauses: thin ones (half the words missing)",
        "clauses._THIN_WORDS",
        ((clauses, "_THIN_WORDS", sys.maxsize),),
    ),
    Rule(
        "invented clauses: one a sentence restates in other words is not invented",
        "clauses._RESTATED_CLAUSE",
        ((clauses, "_RESTATED_CLAUSE", math.inf),),
    ),
    Rule(
        "invented clauses: an offer of help is none",
        "clauses._COURTESY",
        ((clauses, "_COURTESY", _NEVER),),
    ),
    Rule(
        "decisive: a contradiction whose value the context lacks (0.02)",
        "groundedness.analyse",
        ((groundedness, "analyse", _invented_not_decisive),),
    ),
    Rule(
        "decisive: a one-sentence answer naming what the context lacks (<= 0.2)",
        "groundedness.UNSUPPORTED_NAME",
        ((groundedness, "UNSUPPORTED_NAME", 1.0),),
    ),
    Rule(
        "decisive contradictions, all (the model's counts alone)",
        "groundedness.analyse",
        ((groundedness, "analyse", _nothing_decisive),),
    ),
)


@contextlib.contextmanager
def switched_off(rule: Rule | None) -> Iterator[None]:
    """The detector with `rule` switched off (as shipped for None)."""
    patches = rule.patches if rule is not None else ()
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    try:
        for module, name, value in patches:
            setattr(module, name, value)
        _clear_caches(patches)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        _clear_caches(patches)


def _clear_caches(patches: Sequence[Patch]) -> None:
    """Empties the caches of the functions the patched modules define: a word's lemma read
    while the lexicon was patched must not outlive the patch."""
    for module in {id(m): m for m, _, _ in patches}.values():
        for value in vars(module).values():
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", None) == module.__name__:
                clear()


@dataclass(slots=True)
class LabeledSet:
    name: str
    examples: list[Example]
    # Each example's fold (data files; empty for the probe).
    folds: list[int] = field(default_factory=list)

    @property
    def labels(self) -> np.ndarray:
        return np.array([e.hallucinated for e in self.examples], dtype=bool)


def folded(path: Path, folds: int) -> LabeledSet:
    """A data file split into folds of its questions as `train_detector.family_folds`
    splits it."""
    examples = load_records(path, path.stem)
    groups = sorted({e.group for e in examples})
    random.Random(SEED).shuffle(groups)
    fold_of = {g: i % folds for i, g in enumerate(groups)}
    return LabeledSet(path.stem, examples, [fold_of[e.group] for e in examples])


def probe_sets(limit: int = 0) -> list[LabeledSet]:
    """The family probe's development and report families (with `limit`, that many of each
    split's examples at most, half of them hallucinated ones)."""
    records: list[dict[str, Any]] = probe_families.build()
    out = []
    for split in ("dev", "report"):
        examples = [
            Example(
                "probe",
                str(r["label"]["sheet"]),
                str(r["request"]),
                tuple(str(c["content"]) for c in r["retrieved_context"]),
                str(r["response"]),
                bool(r["label"]["hallucinated"]),
            )
            for r in records
            if r["label"]["split"] == split
        ]
        if limit:
            examples = [e for e in examples if e.hallucinated][: limit // 2] + [
                e for e in examples if not e.hallucinated
            ][: limit - limit // 2]
        out.append(LabeledSet(f"{split} families", examples))
    return out


GuardScore = Callable[[str, str, str], tuple[bool | None, str]]


@functools.lru_cache(maxsize=1)
def _guard_cases() -> list[tuple[GuardScore, Any]]:
    """The guard's cases, each with the guard's own scoring function (the evaluator as
    the test calls it)."""
    spec = importlib.util.spec_from_file_location("detector_guard", GUARD)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{GUARD.name}: cannot be read")
    module = importlib.util.module_from_spec(spec)
    # A dataclass looks its module up while the module runs.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return [(module._score, case) for case in module.CASES]


def score(examples: list[Example]) -> tuple[np.ndarray, float]:
    """Each example's first-stage score, and the thread CPU seconds the pass took."""
    out = np.zeros(len(examples))
    started = time.thread_time()
    for i, e in enumerate(examples):
        out[i] = first_stage(e.query, list(e.contexts), e.response).verdict.score
    return out, time.thread_time() - started


@dataclass(slots=True)
class Result:
    scores: dict[str, np.ndarray]
    # Thread CPU ms per record of the data files (the least of the passes).
    cpu_ms: float
    guard_errors_failing: int
    guard_twins_passing: int


def measure(rule: Rule | None, data: list[LabeledSet], probe: list[LabeledSet]) -> Result:
    """Every set's scores with `rule` switched off, the guard's verdicts, and the CPU of
    one pass over the data files (`time_again` adds passes)."""
    scores: dict[str, np.ndarray] = {}
    with switched_off(rule):
        seconds = 0.0
        for labeled in data:
            scores[labeled.name], spent = score(labeled.examples)
            seconds += spent
        for labeled in probe:
            scores[labeled.name] = score(labeled.examples)[0]
        errors = twins = 0
        for guard, case in _guard_cases():
            errors += guard(case.context, case.question, case.wrong)[0] is False
            twins += guard(case.context, case.question, case.faithful)[0] is True
    records = sum(len(d.examples) for d in data)
    return Result(scores, 1000 * seconds / max(records, 1), errors, twins)


def time_again(results: list[tuple[Rule | None, Result]], data: list[LabeledSet]) -> None:
    """One more timed pass over the data files for every variant in turn, each keeping its
    least CPU per record: passes interleaved across the variants, so that a busy spell of
    the machine does not land on one variant's passes only."""
    records = sum(len(d.examples) for d in data)
    for rule, result in results:
        with switched_off(rule):
            seconds = sum(score(d.examples)[1] for d in data)
        result.cpu_ms = min(result.cpu_ms, 1000 * seconds / max(records, 1))


def failing(labels: np.ndarray, scores: np.ndarray) -> tuple[float, float]:
    """Shares failing at the threshold: of the faithful answers, of the hallucinated ones."""
    fail = scores < THRESHOLD
    return float(fail[~labels].mean()), float(fail[labels].mean())


def fold_aurocs(labeled: LabeledSet, scores: np.ndarray, folds: int) -> list[float]:
    which = np.asarray(labeled.folds)
    return [auroc(labeled.labels[which == k], 1 - scores[which == k]) for k in range(folds)]


def _sd(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def _signed(value: float, digits: int = 3) -> str:
    text = f"{value:+.{digits}f}"
    return text.replace("-", "−")


def tables(
    results: list[tuple[Rule | None, Result]],
    data: list[LabeledSet],
    probe: list[LabeledSet],
    folds: int,
) -> str:
    """The three markdown tables."""
    full = results[0][1]
    lines: list[str] = []
    head = ["rule switched off"]
    for d in data:
        head += [
            f"{d.name} AUROC ({folds} folds)",
            "Δ AUROC (paired)",
            "failing faithful / hallucinated",
        ]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rule, result in results:
        cells = [rule.name if rule else "**none (full detector)**"]
        for d in data:
            mine = fold_aurocs(d, result.scores[d.name], folds)
            base = fold_aurocs(d, full.scores[d.name], folds)
            delta = [a - b for a, b in zip(mine, base, strict=True)]
            f, h = failing(d.labels, result.scores[d.name])
            cells += [
                f"{statistics.mean(mine):.3f} ± {_sd(mine):.3f}",
                "—" if rule is None else f"{_signed(statistics.mean(delta))} ± {_sd(delta):.3f}",
                f"{f:.3f} / {h:.3f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    head = ["rule switched off"]
    for p in probe:
        head += [f"{p.name} AUROC", "failing faithful / hallucinated"]
    head += ["guard: errors failing", "guard: twins passing", "CPU ms / record"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rule, result in results:
        cells = [rule.name if rule else "**none (full detector)**"]
        for p in probe:
            f, h = failing(p.labels, result.scores[p.name])
            cells += [f"{auroc(p.labels, 1 - result.scores[p.name]):.3f}", f"{f:.3f} / {h:.3f}"]
        cells += [
            f"{result.guard_errors_failing}/{len(_guard_cases())}",
            f"{result.guard_twins_passing}/{len(_guard_cases())}",
            f"{result.cpu_ms:.2f}"
            + ("" if rule is None else f" ({_signed(result.cpu_ms - full.cpu_ms, 2)})"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    # How many verdicts at the threshold change with the rule off: faithful answers now
    # failing (+) or passing (−), hallucinated ones now failing (+) or passing (−).
    head = ["rule switched off", "where"]
    head += [f"{s.name}: faithful / hallucinated failing" for s in (*data, *probe)]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rule, result in results[1:]:
        assert rule is not None
        cells = [rule.name, f"`{rule.where}`"]
        for s in (*data, *probe):
            now = result.scores[s.name] < THRESHOLD
            before = full.scores[s.name] < THRESHOLD
            change = now.astype(int) - before.astype(int)
            cells.append(
                f"{int(change[~s.labels].sum()):+d} of {int((~s.labels).sum())} / "
                f"{int(change[s.labels].sum()):+d} of {int(s.labels.sum())}".replace("-", "−")
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data", nargs="+", type=Path, help="labeled JSONL files")
    parser.add_argument("--folds", type=int, default=5, help="folds of questions per file")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed passes over the data files per variant, interleaved across the variants",
    )
    parser.add_argument(
        "--only", nargs="*", default=None, help="only the rules whose name contains one of these"
    )
    parser.add_argument(
        "--probe-records", type=int, default=0, help="of each probe split (0: all of them)"
    )
    args = bench_smoke.parse_args(
        parser, argv, folds=2, repeat=1, only=["abstentions"], probe_records=40
    )
    for path in args.data:
        if not path.is_file():
            raise SystemExit(f"{path}: no such file")
    if args.folds < 2:
        raise SystemExit("--folds needs at least 2")
    rules = [
        r for r in RULES if args.only is None or any(w.lower() in r.name.lower() for w in args.only)
    ]
    data = [folded(path, args.folds) for path in args.data]
    probe = probe_sets(args.probe_records)
    # Warm-up: every variant then finds the word and sentence caches equally warm.
    for labeled in (*data, *probe):
        score(labeled.examples)
    results: list[tuple[Rule | None, Result]] = []
    for rule in (None, *rules):
        started = time.perf_counter()
        results.append((rule, measure(rule, data, probe)))
        print(
            f"{rule.name if rule else 'full detector'}: {time.perf_counter() - started:.0f}s",
            file=sys.stderr,
        )
    for round_ in range(2, args.repeat + 1):
        started = time.perf_counter()
        time_again(results, data)
        print(f"timed pass {round_}: {time.perf_counter() - started:.0f}s", file=sys.stderr)
    command = ["python -m bench.detector_ablation", *(p.name for p in args.data)]
    command += [f"--folds {args.folds}", f"--repeat {args.repeat}"]
    if args.only is not None:
        command.append("--only " + " ".join(repr(w) for w in args.only))
    print(f"`{' '.join(command)}` — {datetime.date.today().isoformat()}\n")
    print(
        f"First stage, threshold {THRESHOLD} (fail below), the shipped model's weights (not "
        "refitted); CPU: thread time per record of the data files, the least of the passes.\n"
    )
    print(tables(results, data, probe, args.folds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
