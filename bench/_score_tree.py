"""Scores records with the groundedness detector of another source tree (a folder holding a
`monitor` package, such as `git archive REV monitor | tar -x -C TREE` makes), as its
`local_groundedness` evaluator ships it: `python -m bench._score_tree TREE IN.json OUT.json`.

IN holds `{"set name": [{"query", "contexts", "response"}, ...]}`, OUT gets `{"set name":
[score, ...]}`, null where the tree's detector raised (named on stderr). Nothing of this repository's `monitor` is imported before TREE is first on
the path, so the scores are TREE's own (`bench/detector_compare.py` runs it once per tree).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import importlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        raise SystemExit("usage: python -m bench._score_tree TREE IN.json OUT.json")
    tree, source, target = (Path(a).resolve() for a in argv)
    if not (tree / "monitor" / "detector").is_dir():
        raise SystemExit(f"{tree}: no monitor/detector package there")
    sys.path.insert(0, str(tree))
    detector = importlib.import_module("monitor.detector")
    where = Path(detector.__file__ or "").resolve()
    if tree not in where.parents:
        raise SystemExit(f"{tree}: monitor.detector was imported from {where} instead")
    sets = json.loads(source.read_text(encoding="utf-8"))
    scores: dict[str, list[float | None]] = {}
    failed = 0
    for name, records in sets.items():
        scores[name] = []
        for r in records:
            try:
                verdict = detector.score_groundedness(r["query"], r["contexts"], r["response"])
            except Exception as exc:
                failed += 1
                print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                scores[name].append(None)
                continue
            scores[name].append(float(verdict.score))
    target.write_text(json.dumps(scores), encoding="utf-8")
    print(f"scored with {where.parent} ({failed} records failed)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
