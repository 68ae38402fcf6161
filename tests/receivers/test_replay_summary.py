"""Replay's summary table counts skips per evaluator and reason: missing input (from
`evaluations_skipped_total`) and a reference-based evaluator's "needs expected_response"
result, which is a skip there, not an error."""

from __future__ import annotations

from monitor.component import Evaluated
from monitor.judge.definitions import NEEDS_REFERENCE
from monitor.receivers.replay_summary import SummarySink, skipped_counts
from monitor.records import parse_record
from monitor.results import EvalResult
from monitor.telemetry import Telemetry


def test_no_reference_and_missing_input_are_skips_with_their_reason(telemetry: Telemetry) -> None:
    record = parse_record({"request": "q", "retrieved_context": ["c"], "response": "a"})
    summary = SummarySink()
    summary.emit([Evaluated(record, {"f1": EvalResult.failed("f1", NEEDS_REFERENCE)})])
    summary.emit([Evaluated(record, {"f1": EvalResult(name="f1", passed=True, normalized=1.0)})])
    telemetry.counter("evaluations_skipped").labels("svc", "local_groundedness", "no_context").inc(
        2
    )
    table = summary.table(skipped_counts(telemetry.registry))
    rows = {line.split()[0]: line.split() for line in table.splitlines()[2:]}
    assert rows["f1"][1] == "1" and rows["f1"][4] == "0"  # one verdict, no error
    assert " ".join(rows["f1"][5:]) == "1 no reference"
    assert " ".join(rows["local_groundedness"][5:]) == "2 no context"
