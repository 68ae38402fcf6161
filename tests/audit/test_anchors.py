"""A judge that is checked: the anchor set, the change test, and a judge made to drift in
the running service (its HTTP model is the scripted double, `harness/judge_stub.py`, whose
answers the test swaps for a model that passes hallucinated anchors); the page goes to a
real webhook receiver."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
import pytest_asyncio

from harness.judge_stub import Received, Reply, StubJudge
from harness.servers import Webhook, webhook
from harness.wait import wait_until_async
from monitor.audit.anchors import (
    AnchorCheck,
    JudgeChanges,
    JudgeNotes,
    changed_p_value,
    load_anchors,
)
from monitor.component import Alert
from monitor.config import Config
from monitor.exporters.alertmanager import AlertSender
from monitor.service import Service
from monitor.telemetry import create_telemetry
from tests.judge.test_judge_evaluators import KEY_ENV, MODEL, SECRET

SHIPPED = load_anchors(None)
HALLUCINATED = [str(a.record.response) for a in SHIPPED if a.defect]


def test_the_change_test_on_hand_computed_flips() -> None:
    assert changed_p_value(0, 0) == 1.0
    assert changed_p_value(8, 0) == pytest.approx(2 / 256)
    assert changed_p_value(0, 8) == pytest.approx(2 / 256)
    # 3 one way, 1 the other: 2 · P(X ≤ 1), X ~ Bin(4, 1/2) = 2 · 5/16
    assert changed_p_value(3, 1) == pytest.approx(10 / 16)
    assert changed_p_value(2, 2) == 1.0


def test_the_shipped_anchors_are_half_hallucinated() -> None:
    assert len(SHIPPED) == 40 and sum(a.defect for a in SHIPPED) == 20
    assert all(a.record.query and a.record.context_text for a in SHIPPED)


def test_a_bad_anchor_file_names_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "anchors.json"
    for text, problem in [
        ("[1", "not JSON"),
        ("{}", "a JSON list of labelled records"),
        ('[{"response": "a", "label": "maybe"}]', 'entry 0: label must be "pass" or "fail"'),
    ]:
        path.write_text(text)
        with pytest.raises(ValueError, match=problem):
            load_anchors(str(path))


def _faithful(got: Received) -> Reply:
    """A judge that gets every anchor right: unsupported exactly for the hallucinated."""
    return Reply(content="No" if any(h in got.prompt for h in HALLUCINATED) else "Yes")


@pytest_asyncio.fixture
async def stub() -> AsyncIterator[StubJudge]:
    async with StubJudge(_faithful) as server:
        yield server


@pytest.fixture
def hook() -> Iterator[Webhook]:
    with webhook() as receiver:
        yield receiver


def _config(stub: StubJudge, hook: Webhook, **budget: Any) -> Config:
    return Config.model_validate(
        {
            "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
            "judge": {**stub.judge_section(MODEL, KEY_ENV), "retries": 0},
            "evaluators": [{"name": "local_groundedness"}, {"name": "fact_check"}],
            "alerts": {"webhooks": [{"url": hook.url}]},
            "budget": budget,
            "pipeline": {"processes": 0},
            "audit": {"anchors": {"enabled": True, "every": "1h"}},
        }
    )


def _check(service: Service) -> AnchorCheck:
    found = [n.component for n in service.pipeline.nodes if n.name == "anchor check"]
    assert len(found) == 1 and isinstance(found[0], AnchorCheck)
    return found[0]


def _value(service: Service, name: str, **labels: str) -> float | None:
    return service.telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels)


@pytest.mark.slow  # 160 judge calls through litellm
@pytest.mark.asyncio
async def test_a_judge_made_to_drift_is_paged_as_a_judge_change(
    stub: StubJudge, hook: Webhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    service = Service(_config(stub, hook), serve_http=False, with_receivers=False)
    await service.start()
    try:
        check = _check(service)
        fact_check = {"evaluator": "fact_check"}
        # The check at start is the baseline: every anchor right.
        await wait_until_async(
            lambda: _value(service, "judge_anchor_accuracy", **fact_check) == 1.0,
            60,
            "the first anchor check",
        )
        asked = len(stub.received)
        assert asked == len(SHIPPED)  # no cache between checks: every anchor asked again
        await check.check()
        assert len(stub.received) == 2 * asked
        assert _value(service, "judge_changed", **fact_check) == 0
        assert hook.alerts() == []
        # The model behind the name is swapped for one that supports every answer.
        stub.default = Reply(content="Yes")
        await check.check()
        assert _value(service, "judge_changed", **fact_check) == 1
        assert _value(service, "judge_anchor_accuracy", **fact_check) == 0.5
        await wait_until_async(lambda: hook.alerts(), 30, "the judge-change page")
        page = hook.alerts()[0]
        assert page["labels"]["alertname"] == "RagMonitorJudgeChanged"
        assert page["labels"]["evaluator"] == "fact_check"
        assert page["status"] == "firing"
        assert "anchor accuracy 100% → 50%" in page["annotations"]["summary"]
        figures = json.loads(page["annotations"]["anchor_figures"])
        assert (figures["right_then_wrong"], figures["wrong_then_right"]) == (20, 0)
        note = check.changes.note("fact_check")
        assert note is not None and "may be the judge's, not the service's" in note
        # The changed judge is the new baseline: the next check does not page, and resolves.
        await check.check()
        assert _value(service, "judge_changed", **fact_check) == 0
        await wait_until_async(lambda: len(hook.alerts()) == 2, 30, "the resolve")
        assert hook.alerts()[1]["status"] == "resolved"
        assert check.changes.note("fact_check") is None
    finally:
        await service.shutdown(30)


@pytest.mark.slow  # the first judge call of a process imports litellm
@pytest.mark.asyncio
async def test_the_anchor_check_stays_within_the_budget(
    stub: StubJudge, hook: Webhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten judge evaluations a minute: the check stops at the tenth anchor, counts the
    refusal and tests nothing (a partial check is no baseline)."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = _config(stub, hook, max_evaluations_per_minute=10)
    service = Service(config, serve_http=False, with_receivers=False, clock=lambda: 5.0)
    await service.start()
    try:
        refused = {"evaluator": "fact_check", "outcome": "over_budget"}
        await wait_until_async(
            lambda: _value(service, "judge_anchor_evaluations_total", **refused) == 1,
            60,
            "the check stopped by the budget",
        )
        assert len(stub.received) == 10
        assert _value(service, "judge_anchor_accuracy", evaluator="fact_check") is None
    finally:
        await service.shutdown(30)


def _page(evaluator: str, status: Literal["firing", "resolved"] = "firing") -> Alert:
    now = datetime.now(UTC)
    return Alert(
        rule="faithfulness_regression",
        service="shop",
        status=status,
        labels={"alertname": "faithfulness_regression", "evaluator": evaluator},
        annotations={"description": "The defect rate rose."},
        starts_at=now,
        ends_at=now + timedelta(hours=1),
        generator_url="http://monitor:9464/metrics",
    )


@pytest.mark.asyncio
async def test_a_page_on_a_judge_that_changed_says_so(hook: Webhook) -> None:
    """Pages on the verdicts of a judge whose last anchor check paged a change carry the
    note, in the description and apart; other evaluators' pages and resolves do not."""
    changes = JudgeChanges()
    changes.changed("fact_check", "The judge fact_check changed.")
    notes = JudgeNotes(AlertSender(create_telemetry(), webhooks=[(hook.url, {})]), changes)
    await notes.start()
    try:
        notes.notify([_page("fact_check"), _page("local_groundedness")])
        notes.notify([_page("fact_check", "resolved")])
        await wait_until_async(lambda: len(hook.alerts()) == 3, 30, "the three alerts")
    finally:
        await notes.shutdown(10)
    noted, other, resolved = hook.alerts()
    assert noted["annotations"]["description"] == (
        "The defect rate rose. The judge fact_check changed."
    )
    assert noted["annotations"]["judge_changed"] == "The judge fact_check changed."
    assert "judge_changed" not in other["annotations"]
    assert "judge_changed" not in resolved["annotations"]
