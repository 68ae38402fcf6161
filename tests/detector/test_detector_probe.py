"""The planted-error probe set generator (bench/probe_set.py): size, coverage, determinism."""

from __future__ import annotations

from collections import Counter

from bench import probe_set


def test_probe_covers_every_error_kind_at_both_lengths() -> None:
    records = probe_set.build()
    assert len(records) >= 200
    cells = Counter((r["label"]["length"], r["label"]["kind"]) for r in records)  # type: ignore[index]
    for length in ("one_line", "multi"):
        assert cells[(length, "faithful")] >= 40
        for kind in probe_set.ERRORS:
            assert cells[(length, kind)] >= 20, (length, kind)
    assert probe_set.build() == records


def test_planted_answers_differ_from_a_faithful_one_by_one_error() -> None:
    for r in probe_set.build(sheets=10):
        label = r["label"]
        assert isinstance(label, dict)
        assert label["hallucinated"] == (label["kind"] != "faithful")
        if label["length"] == "one_line" and label["kind"] != "extra":
            assert str(r["response"]).count(". ") == 0
