"""Alert engine: Wilson bounds, min_samples, hysteresis, windows, safety categories.

The engine is driven with a fake clock and real `EvalResult`s; notifications are
collected by an in-test `Notifier`. No network here (see test_alerts_delivery.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from harness.otlp import spelled
from harness.wait import wait_until_async
from monitor.alerts import AlertEngine, SlidingWindow, wilson_interval
from monitor.component import Alert, Evaluated
from monitor.config import AbsoluteRule, AlertRule
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry, create_telemetry


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


class Collect:
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    async def start(self) -> None:
        return None

    def notify(self, alerts: Sequence[Alert]) -> None:
        self.alerts.extend(alerts)

    async def shutdown(self, deadline_s: float) -> None:
        return None


def question(n: int) -> str:
    """The `n`-th of distinct questions: a request fingerprint reads numbers as one, so
    `n` is spelled in letters (the same question asked again is one piece of evidence)."""
    return "q " + spelled(n)


def record(service: str = "shop", n: int = 0) -> RagRecord:
    return RagRecord(
        request_id=f"r{n}", trace_id=f"{n:032x}", service=service, query=question(n), response="a"
    )


def verdict(name: str, passed: bool) -> EvalResult:
    return EvalResult(
        name=name, score=0.0 if not passed else 1.0, normalized=float(passed), passed=passed
    )


def gauge(t: Telemetry, name: str, **labels: str) -> float | None:
    return t.registry.get_sample_value(f"rag_monitor_{name}", labels)


RULE = AbsoluteRule(
    name="hallucination", evaluator="local_groundedness", max_defect_rate=0.1, min_samples=30
)


def make(*rules: AlertRule, **kw: object) -> tuple[AlertEngine, Telemetry, Clock]:
    t = create_telemetry()
    clock = Clock()
    engine = AlertEngine(list(rules) or [RULE], t, clock=clock, **kw)  # type: ignore[arg-type]
    return engine, t, clock


def feed(
    engine: AlertEngine,
    fails: int,
    passes: int,
    service: str = "shop",
    name: str = "local_groundedness",
) -> None:
    for i in range(fails + passes):
        # Each request its own question: one question asked again is one piece of evidence.
        engine.emit(
            [Evaluated(record(service, next(_SENT)), {name: verdict(name, passed=i >= fails)})]
        )


_SENT = itertools.count()


@pytest.mark.parametrize(
    ("defects", "samples", "lower", "upper"),
    [
        (0, 10, 0.0, 0.2775),
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (1, 100, 0.0018, 0.0545),
    ],
)
def test_wilson_interval_matches_reference_values(
    defects: int, samples: int, lower: float, upper: float
) -> None:
    lo, hi = wilson_interval(defects, samples, 0.95)
    assert lo == pytest.approx(lower, abs=1e-4)
    assert hi == pytest.approx(upper, abs=1e-4)


def test_wilson_interval_narrows_with_confidence_and_samples() -> None:
    wide = wilson_interval(3, 10, 0.99)
    narrow = wilson_interval(3, 10, 0.80)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]
    assert wilson_interval(0, 0, 0.95) == (0.0, 1.0)
    big = wilson_interval(300, 1000, 0.95)
    assert big[1] - big[0] < narrow[1] - narrow[0]


def test_no_alert_below_min_samples_even_at_100_percent_defects() -> None:
    engine, t, _ = make()
    feed(engine, fails=29, passes=0)
    assert engine.evaluate() == []
    assert gauge(t, "defect_rate", service="shop", rule="hallucination") == 1.0
    assert (
        gauge(t, "alert_firing", service="shop", rule="hallucination", severity="page", cohort="")
        == 0
    )
    feed(engine, fails=1, passes=0)
    (alert,) = engine.evaluate()
    assert alert.status == "firing"
    assert (
        gauge(t, "alert_firing", service="shop", rule="hallucination", severity="page", cohort="")
        == 1
    )


def test_no_alert_when_rate_is_above_threshold_but_interval_includes_it() -> None:
    engine, t, _ = make()
    feed(engine, fails=6, passes=34)  # 15 % observed vs 10 % allowed; 95 % interval ≈ [7 %, 29 %]
    assert engine.evaluate() == []
    assert gauge(t, "defect_rate", service="shop", rule="hallucination") == pytest.approx(0.15)
    assert engine.firing() == []
    feed(engine, fails=30, passes=10)  # 36/80 = 45 %: now the lower bound clears 10 %
    (alert,) = engine.evaluate()
    assert alert.status == "firing"


def test_hysteresis_resolves_only_when_upper_bound_is_below_threshold() -> None:
    engine, _, _ = make()
    feed(engine, fails=30, passes=0)
    assert [a.status for a in engine.evaluate()] == ["firing"]
    feed(engine, fails=0, passes=300)  # 30/330 ≈ 9 % < 10 %, but the upper bound is ≈ 13 %
    assert engine.evaluate() == []
    assert engine.firing() == [("hallucination", "shop")]
    feed(engine, fails=0, passes=400)  # 30/730 ≈ 4 %, upper ≈ 6 %
    (alert,) = engine.evaluate()
    assert alert.status == "resolved"
    assert alert.ends_at <= alert.ends_at.now(alert.ends_at.tzinfo)
    assert engine.firing() == []


def test_judge_errors_are_not_samples() -> None:
    engine, t, _ = make()
    for i in range(100):
        engine.emit(
            [
                Evaluated(
                    record(n=i),
                    {"local_groundedness": EvalResult.failed("local_groundedness", "timeout")},
                )
            ]
        )
    assert engine.evaluate() == []
    assert gauge(t, "defect_rate", service="shop", rule="hallucination") is None
    feed(engine, fails=1, passes=1)
    engine.evaluate()
    assert gauge(t, "defect_rate", service="shop", rule="hallucination") == 0.5


def test_services_have_separate_windows_and_labels() -> None:
    engine, t, _ = make()
    feed(engine, fails=40, passes=0, service="bad")
    feed(engine, fails=0, passes=40, service="good")
    (alert,) = engine.evaluate()
    assert alert.service == "bad"
    assert alert.labels == {
        "alertname": "hallucination",
        "service": "bad",
        "severity": "page",
        "generator": "rag-monitor",
        "evaluator": "local_groundedness",
    }
    assert (
        gauge(t, "alert_firing", service="good", rule="hallucination", severity="page", cohort="")
        == 0
    )


def test_window_slides_and_an_empty_window_resolves() -> None:
    engine, t, clock = make()
    feed(engine, fails=40, passes=0)
    assert [a.status for a in engine.evaluate()] == ["firing"]
    clock.now += 11 * 60  # past the 10m window (plus one slice)
    (alert,) = engine.evaluate()
    assert alert.status == "resolved"
    assert gauge(t, "defect_rate", service="shop", rule="hallucination") is None


def test_firing_alert_is_resent_and_carries_a_future_ends_at() -> None:
    engine, _, clock = make(resend_interval_s=60, evaluation_interval_s=15)
    feed(engine, fails=40, passes=0)
    (first,) = engine.evaluate()
    assert (first.ends_at - first.starts_at).total_seconds() == pytest.approx(240)
    clock.now += 30
    feed(engine, fails=1, passes=0)
    assert engine.evaluate() == []
    clock.now += 31
    (again,) = engine.evaluate()
    assert again.status == "firing" and again.starts_at == first.starts_at
    body = again.to_alertmanager()
    starts_at, generator, annotations = (
        body["startsAt"],
        body["generatorURL"],
        body["annotations"],
    )
    assert isinstance(starts_at, str) and starts_at.endswith("Z")
    assert isinstance(generator, str) and generator.startswith("http")
    assert isinstance(annotations, dict) and annotations["samples"] == "41"


def test_safety_category_uses_the_grading_evaluators_severity_threshold() -> None:
    rule = AbsoluteRule(
        name="violence",
        category="violence",
        max_defect_rate=0.05,
        min_samples=20,
        severity="critical",
    )
    engine, t, _ = make(rule, severity_thresholds={"local_safety": "high", "violence": "low"})

    def safety(name: str, level: str) -> EvalResult:
        return EvalResult(name=name, passed=True, safety={"violence": level, "sexual": "very_low"})  # type: ignore[dict-item]

    for i in range(30):  # "medium" is below local_safety's threshold of "high": not a defect
        engine.emit([Evaluated(record(n=i), {"local_safety": safety("local_safety", "medium")})])
    assert engine.evaluate() == []
    assert gauge(t, "defect_rate", service="shop", rule="violence") == 0.0
    for i in range(30):  # the violence judge calls "low" a defect
        engine.emit([Evaluated(record(n=i), {"violence": safety("violence", "low")})])
    (alert,) = engine.evaluate()
    assert alert.labels["category"] == "violence" and alert.labels["severity"] == "critical"
    assert gauge(t, "defect_rate", service="shop", rule="violence") == 0.5
    errored = EvalResult(name="violence", error="parse", safety={"violence": "high"})
    engine.emit([Evaluated(record(), {"violence": errored})])
    engine.evaluate()
    assert gauge(t, "defect_rate", service="shop", rule="violence") == 0.5


def test_sliding_window_memory_is_bounded() -> None:
    window = SlidingWindow(600, buckets=60)
    for i in range(100_000):
        window.add(1000.0 + i * 0.1, defect=i % 10 == 0)
    samples, defects = window.totals(1000.0 + 100_000 * 0.1)
    assert len(window._slices) <= 61
    assert 6000 <= samples <= 6100 and defects == pytest.approx(samples / 10, abs=2)


@pytest.mark.asyncio
async def test_engine_lifecycle_runs_periodic_evaluation() -> None:
    collect = Collect()
    t = create_telemetry()
    engine = AlertEngine([RULE], t, [collect], evaluation_interval_s=0.01)
    await engine.shutdown(10)  # safe before start
    await engine.start()
    feed(engine, fails=40, passes=0)
    await wait_until_async(lambda: bool(collect.alerts), 5, "the alert")
    await engine.shutdown(10)
    await engine.shutdown(10)
    assert [a.status for a in collect.alerts] == ["firing"]


@pytest.mark.asyncio
async def test_the_alert_loop_measures_each_evaluation_and_when_it_last_ended() -> None:
    t = create_telemetry()
    clock = Clock()
    engine = AlertEngine([RULE], t, clock=clock, evaluation_interval_s=0.01)

    def evaluations() -> float:
        return gauge(t, "alert_evaluation_duration_seconds_count") or 0.0

    assert evaluations() == 0 and gauge(t, "alert_last_evaluation_timestamp_seconds") == 0
    await engine.start()
    try:
        await wait_until_async(lambda: evaluations() >= 2, 5, "two evaluations")
        assert gauge(t, "alert_last_evaluation_timestamp_seconds") == clock.now
        last = clock.now

        def broken(now: float) -> list[Alert]:
            raise RuntimeError("scripted: the rules cannot be judged")

        # A loop whose evaluations fail leaves the time of the last one that ended.
        engine._firing.evaluate = broken  # type: ignore[method-assign]
        clock.now += 60
        failed = {"stage": "alerts", "reason": "internal_error"}
        await wait_until_async(lambda: (gauge(t, "dropped_total", **failed) or 0) >= 2, 5, "2")
        assert gauge(t, "alert_last_evaluation_timestamp_seconds") == last
    finally:
        await engine.shutdown(10)


def test_service_wires_alert_engine_and_otlp_events_from_config() -> None:
    from harness.servers import DEPLOY
    from monitor.config import load_config
    from monitor.exporters.otlp_events import OtlpEventsSink
    from monitor.service import Service

    config = load_config(
        DEPLOY / "monitor.yaml", environ={"RAG_MONITOR_EXPORTERS__OTLP__ENDPOINT": "127.0.0.1:4317"}
    )
    service = Service(config, with_receivers=False, serve_http=False)
    kinds = {type(sink) for sink in service.stage._sinks}
    assert {AlertEngine, OtlpEventsSink} <= kinds
    # The embedded defaults carry the regression rule on groundedness, and no events.
    bare = Service(load_config(None, environ={}), with_receivers=False, serve_http=False)
    assert {type(sink) for sink in bare.stage._sinks} & {AlertEngine, OtlpEventsSink} == {
        AlertEngine
    }
