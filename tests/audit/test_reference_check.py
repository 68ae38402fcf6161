"""A reference is checked before it is trusted: an audit whose reference is a judge gives
no estimate until the judge's anchor check is in, and none while the judge gets fewer than
`MIN_REFERENCE_ACCURACY` of the anchors right or judges them all one way — said in `GET
/audit`, a gauge and a log line naming the judge and its anchor figures. An honest judge's
audit gives the estimate it gives without the check. The judges are scripted doubles (a
judge that fails everything is the fault; the real-model drift test pushes SmolLM2 to one
answer, `test_judge_drift_real.py`)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from monitor.audit.anchors import AnchorCheck, JudgeChanges, load_anchors
from monitor.audit.sink import AuditSink
from monitor.component import Evaluated
from monitor.config._audit import Audit
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry, create_telemetry
from tests.audit.test_audit_sink import (
    DETECTOR,
    JUDGE,
    SHARE,
    Clock,
    _audited,
    _gauge,
    _record,
    _results,
    _share,
)

ANCHORS = load_anchors(None)
HALLUCINATED = {str(a.record.response) for a in ANCHORS if a.defect}


class ScriptedJudge:
    """A judge evaluator double: `honest` fails exactly the hallucinated anchors; else it
    fails every record (the fault: a model pushed to one answer)."""

    kind = "judge"

    def __init__(self, honest: bool) -> None:
        self.name = JUDGE
        self._honest = honest

    async def evaluate(self, record: RagRecord) -> EvalResult:
        defect = str(record.response) in HALLUCINATED if self._honest else True
        return EvalResult(self.name, passed=not defect)


class Admit:
    def admit(self, boost: bool = False) -> bool:
        return True

    def spend(self, tokens: int, cost_usd: float, boost: bool = False) -> None:
        return None

    def reached(self, boost: bool = False, local: bool = False) -> str | None:
        return None


def _check(t: Telemetry, honest: bool, changes: JudgeChanges) -> AnchorCheck:
    judge: Any = ScriptedJudge(honest)
    return AnchorCheck(
        [judge],
        ANCHORS,
        Admit(),
        t,
        lambda evaluator, figures: None,
        changes=changes,
        every_s=3600,
        alpha=0.001,
    )


def _audit(t: Telemetry, changes: JudgeChanges | None) -> AuditSink:
    section = Audit(evaluator=DETECTOR, reference=JUDGE, share=SHARE, min_audited=2)
    sink = AuditSink(section, t, lambda r: _share(r, 1.0), clock=Clock(), checks=changes)
    sink.emit(
        [
            Evaluated(_record(i), _results(i % 4 == 0, _audited(i) and i % 3 == 0))
            for i in range(400)
        ]
    )
    return sink


@pytest.mark.asyncio
async def test_a_judge_that_fails_every_anchor_gives_no_estimate_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t, changes = create_telemetry(), JudgeChanges()
    sink = _audit(t, changes)
    page = sink.page()
    assert page["services"]["shop"]["estimate"] is None  # not checked yet
    assert "has not been checked on the anchors yet" in page["withheld"]
    assert _gauge(t, "audit_estimate_withheld", evaluator=DETECTOR) == 1
    with caplog.at_level(logging.WARNING):
        await _check(t, honest=False, changes=changes).check()
        sink.refresh()
    page = sink.page()
    shop = page["services"]["shop"]
    assert shop["estimate"] is None and shop["audited_only"] is None
    assert all(v["estimate"] is None for d in shop["slices"].values() for v in d.values())
    assert page["withheld"] == (
        f"the reference {JUDGE} got 50% of 40 anchors right at its last check (an audit "
        "needs 80%) and failed 100% of them: its verdicts are all one way"
    )
    assert _gauge(t, "audit_estimate_withheld", evaluator=DETECTOR) == 1
    assert (
        _gauge(t, "defect_rate_estimate", service="shop", evaluator=DETECTOR, bound="upper") is None
    )
    assert f"judge {JUDGE} on the anchors: the reference {JUDGE} got 50% of 40" in caplog.text
    assert f"audit of {DETECTOR}: the estimate is withheld" in caplog.text


@pytest.mark.asyncio
async def test_an_honest_judge_gives_the_estimate_it_gives_unchecked() -> None:
    t, changes = create_telemetry(), JudgeChanges()
    checked = _audit(t, changes)
    await _check(t, honest=True, changes=changes).check()
    checked.refresh()
    unchecked = _audit(create_telemetry(), None)
    page = checked.page()
    assert page["withheld"] is None
    assert page["services"] == unchecked.page()["services"]
    assert page["services"]["shop"]["estimate"] is not None
    assert _gauge(t, "audit_estimate_withheld", evaluator=DETECTOR) == 0


@pytest.mark.parametrize("anchors", [False, True])
def test_check_config_warns_of_a_judge_reference_never_checked(anchors: bool) -> None:
    from monitor.cli.check_config import config_warnings
    from monitor.config import Config

    config = Config.model_validate(
        {
            "evaluators": [{"name": "local_groundedness"}, {"name": "fact_check"}],
            "judge": {"model": "openai/gpt-4o-mini"},
            "audit": {
                "evaluator": "local_groundedness",
                "reference": "fact_check",
                "anchors": {"enabled": anchors},
            },
        }
    )
    warned = [w for w in config_warnings(config) if w.startswith("audit.anchors.enabled: ")]
    assert len(warned) == (0 if anchors else 1)
