"""The embedded detector on Chinese: the planted-error probe and the CPU a record costs.

    python -m bench.detector_chinese [--split dev|heldout|seen|heldout2|all] [--show-misses] [--cpu]

Scores the Chinese probe (`training/probe_zh.py`) with the shipped first stage at the
shipped threshold: per split, the share of planted errors failing per kind and the share of
faithful answers failing. `--show-misses` prints the misses (read them on `dev` only: the
held-out split is for the report). `--cpu` scores every probe record and its English
counterpart of the family probe (`training/probe_families.py`, the same number of records)
several times on one thread and prints each language's thread CPU per record and their
ratio (least of five interleaved passes, so other load on the machine moves it little;
each pass parses every text anew; each record scored as the evaluator scores it, its texts
cut once for all the checks).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import bench_smoke  # noqa: E402
from monitor.detector import cjk, score_groundedness, slots  # noqa: E402
from monitor.detector.groundedness import GroundednessVerdict  # noqa: E402
from monitor.detector.text import shared_work  # noqa: E402
from monitor.evaluators.local import LocalGroundedness  # noqa: E402
from training import probe_families, probe_zh  # noqa: E402

THRESHOLD = LocalGroundedness.default_threshold
_PASSES = 5


def _verdict(record: dict[str, object]) -> GroundednessVerdict:
    context = [str(c["content"]) for c in record["retrieved_context"]]  # type: ignore[attr-defined]
    # As the evaluator scores a record: its texts cut and split once for every check
    # (`shared_work`, keyed by the record).
    with shared_work(record):
        return score_groundedness(str(record["request"]), context, str(record["response"]))


def probe_table(split: str, show_misses: bool = False) -> dict[str, dict[str, float]]:
    """Per split: the share failing of each error kind, of all errors, and of faithful
    answers (key "faithful"), at the shipped threshold."""
    return probe_zh.failing_shares(split, show_misses, THRESHOLD)


def _cpu(records: list[dict[str, object]]) -> float:
    # Every text parsed anew each pass, as a new record's are: the caches keyed by a whole
    # text (segmentation, a sentence's slots) are emptied; those of single words are kept.
    for cached in (
        cjk._tagged,
        cjk._run_spans,
        cjk.word_kinds,
        cjk.simplified,
        slots.parse_sentence,
    ):
        cached.cache_clear()
    start = time.thread_time()
    for record in records:
        _verdict(record)
    return (time.thread_time() - start) / len(records) * 1000


def cpu_table() -> float:
    """Thread CPU ms per record, Chinese and English, and their ratio (least of passes)."""
    chinese = probe_zh.build("all")
    english = probe_families.build(sheets=1)[: len(chinese)]
    for record in (*chinese, *english):
        _verdict(record)  # warm every cache a first record fills (vectors, segmenter)
    best = {"zh": float("inf"), "en": float("inf")}
    for _ in range(_PASSES):
        best["zh"] = min(best["zh"], _cpu(chinese))
        best["en"] = min(best["en"], _cpu(english))
    ratio = best["zh"] / best["en"]
    print(
        f"CPU per record (thread time, least of {_PASSES} passes, {len(chinese)} records each): "
        f"Chinese {best['zh']:.2f} ms, English {best['en']:.2f} ms, ratio {ratio:.2f}x"
    )
    return ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=(*probe_zh.ITEMS, "all"), default="all")
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument("--cpu", action="store_true")
    args = bench_smoke.parse_args(parser, argv, split="seen")
    probe_table(args.split, args.show_misses)
    if args.cpu:
        cpu_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
