"""The family probe generator (training/probe_families.py): kinds, split, determinism."""

from __future__ import annotations

from collections import Counter

from training import probe_families


def test_every_family_yields_every_error_kind_it_can_carry_at_both_lengths() -> None:
    records = probe_families.build(sheets=2)
    assert records == probe_families.build(sheets=2)
    labels = [probe_families.label(r) for r in records]
    cells = Counter((label["length"], label["kind"]) for label in labels)
    for length in ("one_line", "multi"):
        assert cells[(length, "faithful")] >= 2 * len(probe_families.FAMILIES)
        for kind in probe_families.ERRORS:
            assert cells[(length, kind)] >= 8, (length, kind)
    directions = Counter(label.get("direction") for label in labels)
    assert directions["added"] and directions["removed"]


def test_families_split_into_disjoint_development_and_report_halves() -> None:
    dev, report = set(probe_families.DEV_FAMILIES), set(probe_families.REPORT_FAMILIES)
    assert not dev & report
    assert dev | report == {f.name for f in probe_families.FAMILIES}
    for record in probe_families.build(sheets=1, families=probe_families.REPORT_FAMILIES):
        label = record["label"]
        assert isinstance(label, dict)
        assert label["family"] in report and label["split"] == "report"


def test_a_planted_answer_differs_from_the_sheet_where_a_faithful_one_agrees() -> None:
    for record in probe_families.build(sheets=1):
        label = record["label"]
        assert isinstance(label, dict)
        assert label["hallucinated"] == (label["kind"] != "faithful")
        context = " ".join(c["content"] for c in record["retrieved_context"])  # type: ignore[attr-defined]
        assert "{" not in context and "{" not in str(record["response"])
