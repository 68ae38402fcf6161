"""The metrics sink counts a batch of records (one `emit`, as the evaluation stage hands
it each batch) exactly as it counts the same records in batches of one: same series, same
values, same scores, and each defect series' exemplar is its last defect's trace."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from monitor.component import Evaluated
from monitor.exporters.prometheus import MetricsSink
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry


def _record(i: int, service: str, trace: bool = True) -> RagRecord:
    return RagRecord(
        request_id=f"r{i}",
        trace_id=f"{i:032x}" if trace else None,
        service=service,
        route="/ask" if i % 2 else "/chat",
        response="a",
    )


def _results(i: int) -> dict[str, EvalResult]:
    verdict = [True, False, None][i % 3]
    return {
        "local_groundedness": EvalResult(
            "local_groundedness",
            score=i / 10,
            normalized=i / 10,
            passed=verdict,
            error="timeout" if verdict is None else None,
        ),
        "local_safety": EvalResult(
            "local_safety",
            score=1.0,
            normalized=1.0,
            passed=i % 4 != 0,
            safety={
                "violence": "medium" if i % 4 == 0 else "very_low",
                "jailbreak": "very_low",
            },
        ),
    }


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], Any]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
    for family in registry.collect():
        if not family.name.startswith(("rag_monitor_evaluation", "rag_monitor_safety")):
            continue
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            exemplar = sample.exemplar.labels if sample.exemplar is not None else None
            out[(sample.name, tuple(sorted(sample.labels.items())))] = (sample.value, exemplar)
    return out


def test_a_batch_counts_as_its_records_one_by_one() -> None:
    items = [
        (_record(i, service, trace=i != 7), _results(i))
        for i, service in enumerate(
            ["a", "b", "a", "a", "b", "a", "b", "a", "a", "b", "a", "a"] * 3
        )
    ]
    one_by_one, batched = create_telemetry(), create_telemetry()
    sink = MetricsSink(one_by_one)
    for item in items:
        sink.emit([Evaluated(*item) for item in [item]])
    MetricsSink(batched).emit([Evaluated(*item) for item in items])
    expected = _samples(one_by_one.registry)
    assert _samples(batched.registry) == expected
    # The batch had defects, with and without a trace id, and exemplars to compare.
    assert any(exemplar for _, exemplar in expected.values())
    assert any(
        name == "rag_monitor_evaluations_total" and ("outcome", "error") in labels
        for name, labels in expected
    )
