"""Audits when things go wrong, in the running service: a reference judge that fails and
one held back by the budget (the judge's HTTP server is the scripted double,
`harness/judge_stub.py`), and labels read from a file as it grows. Every record the
detector evaluated is accounted for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from harness.judge_stub import Reply, StubJudge
from harness.wait import wait_until_async
from monitor.component import Delivery
from monitor.service import Service
from tests.audit.test_audit_e2e import _audited, _config, _records
from tests.judge.test_judge_evaluators import KEY_ENV, MODEL, SECRET

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def stub() -> AsyncIterator[StubJudge]:
    async with StubJudge() as server:
        yield server


def _value(svc: Service, name: str, /, **labels: str) -> float | None:
    return svc.telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels)


def _count(svc: Service, name: str, /, **labels: str) -> float:
    return _value(svc, name, **labels) or 0.0


@pytest.mark.e2e  # the first judge call of a process imports litellm
async def test_a_failing_or_budgeted_reference_is_counted_and_nothing_is_lost(
    stub: StubJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget admits three judge evaluations (the clock stands still): one answers,
    one fails (HTTP 500), one answers; every other audited record is over budget. The
    judge is called three times, no more; each audited record is counted as audited,
    reference_error or reference_missing, and every other record as unaudited."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    records = _records(24)
    audited = _audited(records)
    assert len(audited) > 3
    stub.queue(Reply(content="Yes"), Reply(status=500), Reply(content="No"))
    config = _config(
        {"evaluator": "local_groundedness", "reference": "fact_check"},
        [{"name": "local_groundedness"}, {"name": "fact_check"}],
        judge={**stub.judge_section(MODEL, KEY_ENV), "retries": 0},
        budget={"max_evaluations_per_minute": 3},
        pipeline={"processes": 0, "workers": 1},
    )
    service = Service(
        config, serve_http=False, with_receivers=False, monotonic_clock=lambda: 1000.0
    )
    await service.start()
    try:
        assert await service.trace.put([Delivery("test", records=records)])
    finally:
        await service.shutdown(30)
    assert len(stub.received) == 3
    outcome = {
        o: _count(service, "audit_records_total", service="shop", outcome=o)
        for o in ("unaudited", "audited", "reference_error", "reference_missing")
    }
    assert outcome == {
        "unaudited": len(records) - len(audited),
        "audited": 2,
        "reference_error": 1,
        "reference_missing": len(audited) - 3,
    }


async def test_labels_appended_to_the_file_join_their_records(tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("")
    records = _records(16)
    audited = _audited(records)
    config = _config(
        {
            "evaluator": "local_groundedness",
            "reference": "labels",
            "labels": {"file": str(labels)},
        },
        [{"name": "local_groundedness"}],
        pipeline={"processes": 0, "workers": 1},
    )
    service = Service(config, serve_http=False, with_receivers=False)
    await service.start()
    try:
        assert await service.trace.put([Delivery("test", records=records)])
        await wait_until_async(
            lambda: _count(service, "audit_pending_labels") == len(audited),
            60,
            "the audited records awaiting their labels",
        )
        with labels.open("a") as fh:
            for request_id in audited:
                fh.write(f'{{"request_id": "{request_id}", "label": "fail"}}\n')
            fh.write('{"request_id": "fault-999", "label": "fail"}\n{"oops"\n')
        joined = {"source": "file", "outcome": "joined"}
        await wait_until_async(
            lambda: _count(service, "audit_labels_total", **joined) == len(audited),
            60,
            "the labels joined",
        )
        refused = {"source": "file", "outcome": "unknown_id"}
        await wait_until_async(
            lambda: _count(service, "audit_labels_total", **refused) == 1, 60, "unknown id"
        )
        malformed = {"source": "file", "outcome": "malformed"}
        await wait_until_async(
            lambda: _count(service, "audit_labels_total", **malformed) == 1, 60, "malformed"
        )
        shop = {"service": "shop", "evaluator": "local_groundedness"}
        assert _count(service, "audited_records", **shop) == len(audited)
        # Every label says fail: a miss rate, and no false-alarm rate (no reference pass).
        assert _value(service, "evaluator_miss_rate", **shop) is not None
        assert _value(service, "evaluator_false_alarm_rate", **shop) is None
    finally:
        await service.shutdown(30)
