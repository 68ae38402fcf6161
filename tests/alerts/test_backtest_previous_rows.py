"""An old revision's verdicts in results lines, under `previous`, apart from the record's
own results (docs/contract.md, "Results file"): `backtest` reads them and pairs them with
the record's own (`AlertEngine.count_results` with `paired`); lines without them read as
before, and a `previous` that cannot be an old revision's verdict on the record is refused
naming why."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from monitor.alerts.backtest import Backtest
from monitor.alerts.backtest_rows import Row
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.config import Config
from monitor.exporters.results_file import results_line
from monitor.records import RagRecord
from monitor.results import EvalResult

EVALUATOR = "local_groundedness"
START = 1_767_225_600.0


def _result(passed: bool, revision: str, explanation: str | None = None) -> EvalResult:
    return EvalResult(
        EVALUATOR,
        score=float(passed),
        normalized=float(passed),
        passed=passed,
        explanation=explanation,
        revision=revision,
    )


def _record(n: int, t: float) -> RagRecord:
    return RagRecord(request_id=f"r{n}", trace_id=f"{n + 1:032x}", service="shop", timestamp=t)


def _line(**fields: Any) -> dict[str, Any]:
    own = {EVALUATOR: _result(True, "new").as_json()}
    return {"time": START, "service": "shop", "results": own, **fields}


def test_backtest_reads_them_and_refuses_one_it_cannot_pair() -> None:
    assert Row.of(_line()).paired is None  # a line written before they were
    row = Row.of(_line(previous={EVALUATOR: _result(False, "old").as_json()}))
    assert row.paired == {EVALUATOR: _result(False, "old")}
    with pytest.raises(ValueError, match="previous: expected an object of evaluators"):
        Row.of(_line(previous=[1]))
    with pytest.raises(ValueError, match=r"previous\.judge: a previous revision's verdict comes"):
        Row.of(_line(previous={"judge": _result(False, "old").as_json()}))
    with pytest.raises(ValueError, match=r"previous\.local_groundedness: a previous revision's"):
        Row.of(_line(previous={EVALUATOR: {"passed": None, "error": "timeout"}}))
    with pytest.raises(
        ValueError, match=r"previous\.local_groundedness\.passed: 'no' is not a bool"
    ):
        Row.of(_line(previous={EVALUATOR: {"passed": "no"}}))


def _changeover(previous: bool) -> tuple[Backtest, int]:
    """Revision "old" fails a fifth of the records for an hour, then "new" a tenth more
    of them for 15 minutes, and with `previous` "old" scores half of those again:
    replayed."""
    config = Config.model_validate(
        {
            "alerts": {
                "rules": [
                    {
                        "name": "paired",
                        "window": "5m",
                        "evaluator": EVALUATOR,
                        "baseline": {"season": "none", "window": "30m", "min_samples": 500},
                    }
                ]
            }
        }
    )
    rng = random.Random(7)
    rows: list[tuple[str, Any]] = []
    for n in range(3600 + 900):
        t = START + n
        u = rng.random()
        if n < 3600:
            line = results_line(_record(n, t), {EVALUATOR: _result(u >= 0.2, "old")})
        else:
            line = results_line(_record(n, t), {EVALUATOR: _result(u >= 0.3, "new")})
            if previous and n % 2:
                line["previous"] = {EVALUATOR: _result(u >= 0.2, "old").as_json()}
        rows.append((f"line {n}", orjson.loads(orjson.dumps(line))))
    backtest = Backtest(config)
    list(backtest.run(rows))
    return backtest, len(rows)


def test_backtest_pairs_them_with_the_records_own_verdicts() -> None:
    """The overlap holds the pairs (as the live engine's does), and only the records' own
    verdicts count as verdicts; without them the replay has none."""
    for previous in (True, False):
        backtest, lines = _changeover(previous)
        state: RegressionState = next(iter(backtest.engine._entries.values())).state
        assert state.baseline.changeover is not None and state.baseline.changeover.replaced == "old"
        pairs = state.baseline.changeover.overlap.paired[0]
        # Every other record of the new revision's 15 minutes, each pair once.
        assert pairs == (450 if previous else 0)
        assert backtest.summary.verdicts == lines
