"""A real app's own verdicts, as the monitor read them, replayed into the alert engine on a
simulated clock: the paging half of the real-app tests of an app's own judge and guardrail
(`test_frameworks_external_verdicts.py`, `test_frameworks_guardrail_verdicts.py`). The
verdicts of each phase's run, in turn, every `STEP_S`. `AppRun` is one run of such an app, as
the tests (the Chinese app's too, `test_frameworks_chinese_app.py`) keep it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.alerts import AlertEngine
from monitor.component import Alert, Evaluated
from monitor.config import AlertRule, Config
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock

STEP_S = 5.0
PER_STEP = 48  # eight times each of a run's six verdicts every five seconds

Judged = Sequence[tuple[RagRecord, EvalResult]]


@dataclass
class AppRun:
    """One run of a real app: its answers (each with its trace id) and what the monitor made
    of each question's trace; `variant`, the app's variant that ran ("" where it has one)."""

    evaluator: str
    answers: list[dict[str, Any]]
    results: dict[str, dict[str, EvalResult]]  # by trace id
    records: dict[str, RagRecord]
    variant: str = ""

    @classmethod
    def taken(
        cls,
        evaluator: str,
        answers: list[dict[str, Any]],
        results: Mapping[str, dict[str, EvalResult]],
        records: Mapping[str, RagRecord],
        variant: str = "",
    ) -> AppRun:
        """The run of `answers`, its results and records taken from what the monitor kept."""
        ids = [str(a["trace_id"]) for a in answers]
        return cls(
            evaluator, answers, {i: results[i] for i in ids}, {i: records[i] for i in ids}, variant
        )

    def judged(self) -> list[tuple[RagRecord, EvalResult]]:
        """Each question's record and `evaluator`'s verdict on it, as the monitor read them."""
        return [
            (self.records[a["trace_id"]], self.results[a["trace_id"]][self.evaluator])
            for a in self.answers
        ]


def rules(name: str, evaluator: str) -> list[AlertRule]:
    """One regression rule `name` on `evaluator`, judged every `STEP_S`."""
    config = Config.model_validate(
        {
            "alerts": {
                "evaluation_interval_s": STEP_S,
                "rules": [
                    {
                        "name": name,
                        "evaluator": evaluator,
                        "window": "60s",
                        "min_samples": 50,
                        "baseline": {"window": "10m", "min_samples": 200},
                        "min_increase": 0.05,
                        "false_page_every": "2h",
                    }
                ],
            }
        }
    )
    return list(config.alerts.rules)


def replay(
    rule: str, evaluator: str, phases: Sequence[tuple[float, Judged]]
) -> tuple[list[Alert], AlertEngine]:
    """`(seconds, judged)` phases: each run's records and verdicts, in turn, on the requests
    of many users (each its own question), into an engine of `rules(rule, evaluator)` on
    its own clock; what it sent, and the engine."""
    clock = Clock()
    engine = AlertEngine(
        rules(rule, evaluator), create_telemetry(), evaluation_interval_s=STEP_S, clock=clock
    )
    n = 0
    sent: list[Alert] = []
    for seconds, judged in phases:
        for _ in range(int(seconds / STEP_S)):
            for _ in range(PER_STEP):
                record, verdict = judged[n % len(judged)]
                n += 1
                # Another user's question judged as this one was: the engine takes the
                # repeats of one question (its fingerprint, of the query and documents)
                # as one piece of evidence, so the replayed request has none.
                request = RagRecord(
                    request_id=f"replay-{n}",
                    service=record.service,
                    route=record.route,
                    response=record.response,
                )
                engine.emit([Evaluated(request, {evaluator: verdict})])
            clock.now += STEP_S
            sent.extend(engine.evaluate())
    return sent, engine


def baselines_started(engine: AlertEngine, rule: str, reason: str) -> float:
    value = engine._t.registry.get_sample_value(
        "rag_monitor_alert_baselines_started_total", {"rule": rule, "reason": reason}
    )
    return value or 0.0
