"""Scoring of the redaction detectors on the labelled sample `tests/data/redaction_sample.jsonl`
(shared by `tests/exporters/test_redaction.py` and `bench/redaction_quality.py`).

The sample was written for this project: sentences holding personal data of each built-in
kind, and look-alikes holding none. A finding counts only when its kind and its exact span
match a label, so a partial or mislabelled redaction is both a false positive and a miss.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from monitor.config import Redaction
from monitor.records.redaction import Redactor

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "redaction_sample.jsonl"


@dataclass
class Quality:
    tp: Counter[str] = field(default_factory=Counter)
    fp: Counter[str] = field(default_factory=Counter)
    fn: Counter[str] = field(default_factory=Counter)
    rows: int = 0
    clean_rows: int = 0
    mistakes: list[str] = field(default_factory=list)

    def precision(self, kind: str) -> float:
        found = self.tp[kind] + self.fp[kind]
        return self.tp[kind] / found if found else 1.0

    def recall(self, kind: str) -> float:
        labelled = self.tp[kind] + self.fn[kind]
        return self.tp[kind] / labelled if labelled else 1.0


def load(sample: Path = SAMPLE) -> list[tuple[str, set[tuple[str, int, int]]]]:
    """(text, {(kind, start, end)}) per line; labels are located by their value."""
    rows = []
    for line in sample.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        labels = set()
        for item in row["pii"]:
            start = row["text"].index(item["value"])
            labels.add((item["kind"], start, start + len(item["value"])))
        rows.append((row["text"], labels))
    return rows


def measure(sample: Path = SAMPLE, redactor: Redactor | None = None) -> Quality:
    redactor = redactor or Redactor(Redaction(enabled=True))
    q = Quality()
    for text, labels in load(sample):
        q.rows += 1
        q.clean_rows += not labels
        found = {(f.kind, f.start, f.end) for f in redactor.findings(text)}
        for kind, _, _ in found & labels:
            q.tp[kind] += 1
        for kind, start, end in sorted(found - labels):
            q.fp[kind] += 1
            q.mistakes.append(f"false {kind}: {text[start:end]!r} in {text!r}")
        for kind, start, end in sorted(labels - found):
            q.fn[kind] += 1
            q.mistakes.append(f"missed {kind}: {text[start:end]!r} in {text!r}")
    return q
