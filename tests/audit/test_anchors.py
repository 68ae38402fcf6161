"""A judge that is checked: the anchor set, the change test, and a judge made to drift in
the running service (its HTTP model is the scripted double, `harness/judge_stub.py`, whose
answers the test swaps for a model that passes hallucinated anchors); the page goes to a
real webhook receiver."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from harness.judge_stub import Received, Reply, StubJudge
from harness.servers import Webhook, webhook
from harness.wait import wait_until_async
from monitor.alerts import AlertEngine
from monitor.audit.anchors import AnchorCheck, JudgeChanges, load_anchors
from monitor.config import Config
from monitor.evidence.flips import Flips, changed_p_value
from monitor.service import Service
from tests.alerts.test_attribution import healthy, make
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


def test_a_judge_that_now_passes_what_it_failed_changed_at_equal_accuracy() -> None:
    """A judge that failed every anchor and now passes every one keeps its accuracy (half
    right) while the defect rate it reports falls from 1 to 0: the verdict flips page it.
    Either test's p-value is doubled for testing two."""
    # (right then, right now, hallucinated): 6 hallucinated anchors failed then, passed now;
    # 6 faithful ones failed then, passed now.
    pairs = [(True, False, True)] * 6 + [(False, True, False)] * 6
    flips = Flips.of(pairs)
    assert (flips.right_then_wrong, flips.wrong_then_right) == (6, 6)
    assert (flips.failed_then_passed, flips.passed_then_failed) == (12, 0)
    assert flips.p_value == pytest.approx(2 * 2 / 2**12)
    # Worse on faithful anchors only: accuracy and verdict both moved the same way.
    one_way = Flips.of([(True, False, False)] * 8)
    assert (one_way.right_then_wrong, one_way.passed_then_failed) == (8, 8)
    assert one_way.p_value == pytest.approx(2 * 2 / 256)
    assert Flips.of([(True, True, True), (False, False, False)]).p_value == 1.0


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


def _config(
    stub: StubJudge, hook: Webhook, rules: list[dict[str, Any]] | None = None, **budget: Any
) -> Config:
    return Config.model_validate(
        {
            "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
            "judge": {**stub.judge_section(MODEL, KEY_ENV), "retries": 0},
            "evaluators": [{"name": "local_groundedness"}, {"name": "fact_check"}],
            "alerts": {"webhooks": [{"url": hook.url}], "rules": rules or []},
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


@pytest.mark.e2e  # 160 judge calls through litellm
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


@pytest.mark.e2e  # the first judge call of a process imports litellm
@pytest.mark.asyncio
async def test_the_anchor_check_stays_within_the_budget(
    stub: StubJudge, hook: Webhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten judge evaluations a minute: the check stops at the tenth anchor, counts the
    refusal and tests nothing (a partial check is no baseline)."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = _config(stub, hook, max_evaluations_per_minute=10)
    service = Service(config, serve_http=False, with_receivers=False, monotonic_clock=lambda: 5.0)
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


@pytest.mark.asyncio
async def test_the_engine_asks_the_anchor_check_for_its_notes(
    stub: StubJudge, hook: Webhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wiring: the alert engine's note on an evaluator is the anchor check's."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    rules = [{"name": "judge_regression", "evaluator": "fact_check", "baseline": {}}]
    service = Service(_config(stub, hook, rules), serve_http=False, with_receivers=False)
    engine = next(s for s in service.pipeline.sinks if isinstance(s, AlertEngine))
    _check(service).changes.changed("fact_check", "moved")
    assert engine.evaluator_note("fact_check") == "moved"
    assert engine.evaluator_note("local_groundedness") is None


@pytest.mark.e2e  # two streams of 17 simulated minutes
def test_a_regression_page_on_a_judge_that_changed_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While the anchor check's note on the page's evaluator stands, the engine's firing
    page says so: its description ends with the note, a `judge_changed` annotation carries
    it, and so do its Where alert, `/alerts` and the firing log line; without a note the
    page is as before."""
    changes = JudgeChanges()
    note = "The judge local_groundedness changed at its last anchor check."
    changes.changed("local_groundedness", note)
    stream, _ = make()
    stream.engine.evaluator_note = changes.note
    stream.run(12 * 60, healthy)
    with caplog.at_level(logging.WARNING, logger="monitor.alerts.engine"):
        stream.run(5 * 60, lambda m, r, s, b: 0.7 if m == "m2" else 0.2)
    page, where = stream.page(), stream.wheres()[0]
    assert page.annotations["description"].endswith(f"). {note}")
    assert page.annotations["judge_changed"] == note
    assert where.annotations["judge_changed"] == note
    (listed,) = stream.engine.attribution.firing_alerts()
    assert listed["annotations"]["judge_changed"] == note
    (line,) = [r.getMessage() for r in caplog.records if "firing" in r.getMessage()]
    assert note in line
    # The same stream with the judge unchanged: the page does not say so.
    settled, _ = make()
    changes.settled("local_groundedness")
    settled.engine.evaluator_note = changes.note
    settled.run(12 * 60, healthy)
    settled.run(5 * 60, lambda m, r, s, b: 0.7 if m == "m2" else 0.2)
    assert "judge_changed" not in settled.page().annotations
    assert note not in settled.page().annotations["description"]
