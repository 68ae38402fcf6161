"""`rag-monitor backtest` with the kit's default `context_missing_regression` beside a
hallucination rule (as every shipped config has them): a verdict row is a verdict, not a
record, so it says nothing of the record's context. A rise in failed verdicts pages the
hallucination rule only, never "the context went missing"; a results file's records
without documents are what the context rule counts, in its pages and its per-day rates."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from monitor.alerts.backtest import Backtest
from monitor.config import Config

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DAY_S = 86_400.0
RULES = [
    {
        "name": "hallucination_regression",
        "evaluator": "local_groundedness",
        "baseline": {"window": "24h", "season": "none"},
        "severity": "page",
    },
    {
        "name": "context_missing_regression",
        "evaluator": "local_groundedness",
        "measure": "no_context",
        "baseline": {"window": "24h", "season": "none"},
        "severity": "page",
    },
]
CONFIG = Config.model_validate({"alerts": {"evaluation_interval_s": 60, "rules": RULES}})


def verdict_rows() -> Iterator[tuple[str, Any]]:
    """A minute's verdicts a row for two days and a half, 10 % failed, then 40 %: a rise
    of the hallucination rate, with every record's context in place."""
    for minute in range(int(2.75 * DAY_S / 60)):
        t = START + 60 * minute
        fails = 40 if t >= START + 2.5 * DAY_S else 10
        row = {
            "time": t,
            "service": "客服问答",
            "evaluator": "local_groundedness",
            "passes": 100 - fails,
            "fails": fails,
        }
        yield f"rows.jsonl:{minute + 1}", row


def test_a_rise_of_failed_verdicts_pages_hallucination_only() -> None:
    backtest = Backtest(CONFIG)
    fired = {e.alert.rule for e in backtest.run(verdict_rows()) if e.status == "firing"}
    assert "hallucination_regression" in fired
    assert "context_missing_regression" not in fired, fired
    summary = backtest.summary
    assert summary.pages["context_missing_regression"] == 0
    assert ("context_missing_regression", "客服问答") not in summary.days
    (note,) = [line for line in summary.lines() if "context_missing_regression" in line]
    assert note.startswith("note: context_missing_regression counts records without context")


def _results_line(t: float, documents: int) -> dict[str, Any]:
    line: dict[str, Any] = {"time": t, "service": "知识库", "dimensions": {}, "results": {}}
    line["dimensions"]["documents"] = str(documents)
    if documents:  # scored; a record without context is skipped by groundedness
        line["results"]["local_groundedness"] = {"score": 0.9, "normalized": 0.9, "passed": True}
    line["results"]["local_relevance"] = {"score": 0.8, "normalized": 0.8, "passed": True}
    return line


def test_a_results_files_records_without_context_are_its_day_rate() -> None:
    """A quarter of the records came without documents: the context rule's day reads 0.25
    (the share `backtest` prints, and sets an SLO objective from)."""
    rows = [(f"r:{i}", _results_line(START + 10 * i, 0 if i % 4 == 0 else 2)) for i in range(400)]
    backtest = Backtest(CONFIG)
    list(backtest.run(rows))
    ((records, missing),) = backtest.summary.days[("context_missing_regression", "知识库")].values()
    assert (records, missing) == (400, 100)
    ((verdicts, defects),) = backtest.summary.days[("hallucination_regression", "知识库")].values()
    assert (verdicts, defects) == (300, 0)
    assert not backtest.summary.not_records


def test_a_page_on_verdicts_of_no_dimension_says_nothing_was_compared() -> None:
    """Count rows carry no version, route or model: the page cannot tell where the rise
    is, and says so rather than calling it spread evenly (a finding nothing supports)."""
    backtest = Backtest(CONFIG)
    (page,) = [
        e.alert
        for e in backtest.run(verdict_rows())
        if e.status == "firing" and e.alert.rule == "hallucination_regression"
    ]
    where = page.annotations["where"]
    assert where.startswith("no slice to compare: no value of version, model, route"), where
    assert "spread evenly" not in where
