"""`alerts.conversation_budget_bytes`: what all rules' conversations, and the requests they
remember as asked (`Units.seen`), may hold together. The key reaches the engine a running
service builds, `check-config` refuses values past its bounds naming the key, and requests
asked once (an app whose every question is new) stay within it like conversations."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from monitor.alerts import AlertEngine
from monitor.alerts.entries import SEEN_BYTES
from monitor.alerts.rule import Origin
from monitor.config import Config, validation_problems
from monitor.service import Service
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock
from tests.alerts.test_alerts_memory import FLOOD_RULE, RESULTS, _evicted

MIB = 1024 * 1024
RULES = [{"name": "r", "evaluator": "local_groundedness", "baseline": {}}]


def _one_shot_requests(engine: AlertEngine, clock: Clock, per_service: int, services: int) -> None:
    """`per_service` requests to each service, each a question never asked before, no
    conversation."""
    for n in range(per_service):
        for s in range(services):
            engine.count_results(Origin(f"svc-{s}", fingerprint=f"q-{s}-{n}"), RESULTS, clock.now)
        clock.now += 1.0


def test_requests_asked_once_stay_within_the_budget() -> None:
    budget = 1 * MIB
    t, clock = create_telemetry(), Clock()
    engine = AlertEngine([FLOOD_RULE], t, clock=clock, conversation_budget=budget)
    # 10 services x 3,000 questions: each entry's own bound (4,096 remembered) is not
    # reached, the budget (4,096 in all) is, seven times over.
    _one_shot_requests(engine, clock, 3_000, 10)
    entries = engine._entries
    seen = sum(units.seen for units in entries._conversations.values())
    assert seen * SEEN_BYTES <= budget
    assert entries.conversation_bytes <= budget
    assert _evicted(t, "closed") > 0
    # Oldest first: each service keeps its latest questions.
    kept = [units.seen for units in entries._conversations.values()]
    assert len(kept) == 10 and min(kept) > 0.8 * max(kept)


def test_the_budget_reaches_the_engine_a_service_builds() -> None:
    config = Config.model_validate(
        {"alerts": {"conversation_budget_bytes": 2 * MIB, "rules": RULES}}
    )
    service = Service(config, with_receivers=False, serve_http=False)
    (engine,) = [s for s in service.stage._sinks if isinstance(s, AlertEngine)]
    assert engine._entries._budget == 2 * MIB


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (64 * MIB, "must be at most 33554432 (32 MiB)"),
        (4096, "must be at least 1048576 (1 MiB)"),
    ],
)
def test_check_config_refuses_a_budget_past_its_bounds(value: int, said: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Config.model_validate({"alerts": {"conversation_budget_bytes": value, "rules": RULES}})
    problems = validation_problems(refused.value, Config)
    assert any(
        "alerts.conversation_budget_bytes" in problem and said in problem for problem in problems
    ), problems
