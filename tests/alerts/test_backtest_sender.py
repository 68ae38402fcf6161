"""Who sent a record (`monitor.records.sender`), which a regression rule screens
(`monitor/evidence/senders.py`), is in its results line and `backtest` gives it to the rules
as the live engine has it (`Origin.of`)."""

from __future__ import annotations

import orjson
import pytest

from monitor.alerts.backtest_rows import Row
from monitor.alerts.rule import Origin
from monitor.exporters.results_file import results_line
from monitor.records import CLIENT_ADDRESS, INSTANCE_ID, RagRecord
from monitor.results import EvalResult

RESULTS = {"e": EvalResult("e", passed=True)}


@pytest.mark.parametrize(
    ("metadata", "sender"),
    [
        ({CLIENT_ADDRESS: "10.0.0.7", INSTANCE_ID: "pod-7f9c"}, "10.0.0.7/pod-7f9c"),
        ({INSTANCE_ID: "pod-7f9c"}, "pod-7f9c"),
        ({}, None),
    ],
)
def test_a_results_line_carries_who_sent_it_and_backtest_reads_it_as_live(
    metadata: dict[str, str], sender: str | None
) -> None:
    record = RagRecord(request_id="r", service="shop", timestamp=1.0e9, metadata=metadata)
    line = orjson.loads(orjson.dumps(results_line(record, RESULTS)))
    assert line["sender"] == sender
    row = Row.of(line)
    assert row.origin == Origin.of(record) and row.origin.sender == sender


def test_an_older_line_has_no_sender_and_one_that_is_not_text_is_refused() -> None:
    line = orjson.loads(orjson.dumps(results_line(RagRecord(request_id="r", timestamp=1e9), {})))
    del line["sender"]
    assert Row.of(line).origin.sender is None
    with pytest.raises(ValueError, match="sender: 7 is not text"):
        Row.of({**line, "sender": 7})
