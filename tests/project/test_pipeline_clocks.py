"""The pipeline reads two clocks, each injectable on its own (`build_pipeline`): wall time
(seconds since the epoch) for what is dated, such as a next revision's `until`, and
monotonic time for the budgets' windows. A test that moves one does not move the other."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from harness.wait import wait_until_async
from monitor.component import Delivery
from monitor.config import Config
from monitor.evaluators.revision import revision
from monitor.records import parse_record
from monitor.service import Service

pytestmark = pytest.mark.asyncio
UNTIL = "2027-01-15T08:00:00Z"
UNTIL_S = datetime(2027, 1, 15, 8, tzinfo=UTC).timestamp()
CONTEXT = "The Example Town bridge over the river opened in 1931. It is 240 metres long."
BATCH = 6


def _shadow_verdicts(service: Service) -> float:
    """The next revision's verdicts in shadow (pass or fail) so far."""
    entry = service.config.evaluators[0]
    assert entry.next is not None
    new = revision(entry.next.entry(entry), service.config.judge)
    return sum(
        service.telemetry.registry.get_sample_value(
            "rag_monitor_shadow_revision_evaluations_total",
            {"evaluator": entry.name, "revision": new, "outcome": outcome},
        )
        or 0.0
        for outcome in ("pass", "fail")
    )


async def _score(service: Service, first: int) -> None:
    records = [
        parse_record(
            {
                "request_id": f"r{i}",
                "service": "shop",
                "query": "When did the Example Town bridge open?",
                "retrieved_context": [{"content": CONTEXT}],
                "response": f"The bridge opened in 1931. That is answer {i}.",
            }
        )
        for i in range(first, first + BATCH)
    ]
    assert await service.trace.put([Delivery("test", records=records)])
    done = first + BATCH
    await wait_until_async(lambda: service.stage.completed >= done, 60, "the batch scored")


async def test_a_next_revisions_until_follows_the_wall_clock_not_the_monotonic_one() -> None:
    """The next revision scores every record in shadow while the wall clock is before `until`,
    however far the monotonic clock runs (past `until`, were it read as a date), and stops
    when the wall clock reaches `until`."""
    config = Config.model_validate(
        {
            "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
            "pipeline": {"processes": 0},
            "budget": {"max_local_evaluations_per_minute": None},
            "evaluators": [
                {
                    "name": "local_groundedness",
                    "next": {"until": UNTIL, "share": 1.0, "threshold": 0.4},
                }
            ],
        }
    )
    wall, monotonic = [UNTIL_S - 3600.0], [5.0]
    service = Service(
        config,
        serve_http=False,
        with_receivers=False,
        wall_clock=lambda: wall[0],
        monotonic_clock=lambda: monotonic[0],
    )
    await service.start()
    try:
        await _score(service, 0)
        assert _shadow_verdicts(service) == BATCH
        monotonic[0] = UNTIL_S + 3600.0
        await _score(service, BATCH)
        assert _shadow_verdicts(service) == 2 * BATCH
        wall[0] = UNTIL_S
        await _score(service, 2 * BATCH)
        assert _shadow_verdicts(service) == 2 * BATCH
        assert service.stage.completed == 3 * BATCH
    finally:
        await service.shutdown(30)
