"""Alert engine cost: `emit` time per record and the memory its windows hold.

    python bench/alert_engine.py [--records 200000] [--services 50] [--rules 6]

Feeds the engine records spread over `--services` services, each carrying a
`local_groundedness` verdict and a `local_safety` verdict with five categories, with
`--rules` rules (one evaluator rule, the rest safety categories), one record every
millisecond of simulated time so the 10m windows fill and slide. Reports emit time per
record, evaluate() time per tick, and the traced memory held by the engine afterwards
(tracemalloc), which is bounded by rules x services x window slices, not by traffic.
"""

from __future__ import annotations

import argparse
import logging
import time
import tracemalloc

from monitor.alerts import AlertEngine
from monitor.config import AlertRule
from monitor.evaluators.base import EvalResult
from monitor.records import RagRecord
from monitor.telemetry import create_telemetry

CATEGORIES = ("hate_unfairness", "sexual", "violence", "self_harm", "jailbreak")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--services", type=int, default=50)
    parser.add_argument("--rules", type=int, default=6)
    args = parser.parse_args()

    rules = [
        AlertRule(name="hallucination_rate", evaluator="local_groundedness", max_defect_rate=0.1)
    ]
    rules += [
        AlertRule(name=f"{c}_rate", category=c, max_defect_rate=0.01)
        for c in (CATEGORIES * 10)[: args.rules - 1]
    ]
    records = [
        RagRecord(request_id=str(i), service=f"svc-{i}", response="x") for i in range(args.services)
    ]
    verdicts = [
        {
            "local_groundedness": EvalResult(name="local_groundedness", passed=i % 7 != 0),
            "local_safety": EvalResult(
                name="local_safety",
                passed=True,
                safety={c: ("medium" if i % 97 == 0 else "very_low") for c in CATEGORIES},  # type: ignore[misc]
            ),
        }
        for i in range(101)
    ]
    logging.disable(logging.WARNING)  # every pair fires; the log lines are not what is measured

    def run() -> tuple[AlertEngine, float, float]:
        clock = [1_700_000_000.0]
        engine = AlertEngine(
            rules, create_telemetry(max_services=args.services), clock=lambda: clock[0]
        )
        started = time.perf_counter()
        for i in range(args.records):
            clock[0] += 0.001
            engine.emit(records[i % args.services], verdicts[i % 101])
        emit_s = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(20):
            engine.evaluate()
        return engine, emit_s, (time.perf_counter() - started) / 20

    _, emit_s, eval_s = run()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    engine, _, _ = run()
    held = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
    tracemalloc.stop()
    assert engine.firing()
    print(f"records: {args.records}, services: {args.services}, rules: {len(rules)}")
    print(
        f"emit: {emit_s / args.records * 1e6:.2f} us/record ({args.records / emit_s:,.0f} records/s)"
    )
    print(
        f"evaluate: {eval_s * 1e3:.2f} ms/tick for {len(rules) * args.services} (rule, service) pairs"
    )
    print(f"memory held by windows and state: {held / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
