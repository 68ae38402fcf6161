"""Bounded `service` / `route` labels follow traffic: values invented by a sender cannot keep a
real service out of its own series or its own alert windows for good.

Time is an injected clock; the metrics are the real registry and exporter, the alert engine
the real one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import generate_latest

from harness.label_race import (
    IDLE_S,
    SLOT_WITHIN_S,
    SPRAY_BOUND_PER_S,
    WARM_S,
    Race,
    one_record_a_second_against,
)
from monitor.alerts import AlertEngine
from monitor.component import Evaluated
from monitor.config import AbsoluteRule, Config
from monitor.exporters.prometheus import MetricsSink
from monitor.records import RagRecord
from monitor.shared.labels import SKETCH_BITS
from monitor.telemetry import OVERFLOW, LabelCap, Telemetry, create_telemetry
from tests.alerts.test_alerts import Clock, verdict

RULE = AbsoluteRule(
    name="hallucination",
    evaluator="local_groundedness",
    max_defect_rate=0.1,
    min_samples=5,
    window="5m",
)


def _record(service: str, n: int, route: str = "/ask") -> RagRecord:
    return RagRecord(
        request_id=f"{service}-{n}",
        trace_id=f"{n:032x}",
        service=service,
        route=route,
        query="q",
        response="a",
    )


def _emit(sink: MetricsSink, service: str, n: int = 1, passed: bool = True) -> None:
    sink.emit(
        [
            Evaluated(_record(service, i), {"local_safety": verdict("local_safety", passed)})
            for i in range(n)
        ]
    )


def _services(t: Telemetry) -> set[str]:
    text = generate_latest(t.registry).decode()
    found = set()
    for line in text.splitlines():
        if line.startswith("rag_monitor_evaluations_total{"):
            found.add(line.split('service="', 1)[1].split('"', 1)[0])
    return found


def _count(t: Telemetry, service: str) -> float:
    value = t.registry.get_sample_value(
        "rag_monitor_evaluations_total",
        {
            "service": service,
            "version": "",
            "route": "/ask",
            "evaluator": "local_safety",
            "outcome": "pass",
        },
    )
    return value or 0.0


def test_a_new_value_takes_the_slot_of_one_idle_long_enough_and_no_other() -> None:
    clock = Clock()
    folded: list[int] = []
    evicted: list[str] = []
    cap = LabelCap(3, idle_s=IDLE_S, clock=clock, folded=lambda: folded.append(1))
    cap.on_evict(evicted.append)
    assert [cap(v) for v in ("a", "b", "c")] == ["a", "b", "c"]
    assert cap("d") == OVERFLOW and len(folded) == 1  # every slot is active
    clock.now += IDLE_S - 1
    cap("b")  # b and c stay active; a has been idle longest
    cap("c")
    assert cap("d") == OVERFLOW
    clock.now += 1
    assert cap("d") == "d" and evicted == ["a"]
    # The evicted value is new again: it waits for a stale slot like any other.
    assert cap("a") == OVERFLOW
    clock.now += IDLE_S
    cap("c")
    assert cap("a") == "a" and evicted == ["a", "b"]
    assert cap.holds("a") and cap.holds("c") and cap.holds("d") and not cap.holds("b")


def test_allowed_values_always_keep_their_own_series() -> None:
    cap = LabelCap(2, allowed=["shop"], idle_s=IDLE_S, clock=Clock())
    assert [cap(v) for v in ("x", "y", "z")] == ["x", "y", OVERFLOW]
    assert cap("shop") == "shop"


def test_fifty_invented_services_keep_the_real_one_out_only_while_they_are_active() -> None:
    clock = Clock()
    t = create_telemetry(max_services=50, label_idle_s=IDLE_S, clock=clock)
    sink = MetricsSink(t)
    for i in range(50):
        _emit(sink, f"invented-{i}")
    _emit(sink, "shop", 3)
    assert "shop" not in _services(t) and _count(t, OVERFLOW) == 3
    folded = t.registry.get_sample_value("rag_monitor_label_overflow_total", {"label": "service"})
    assert folded is not None and folded >= 3
    # The sender stops; the real service keeps sending.
    clock.now += IDLE_S
    _emit(sink, "shop", 4)
    assert _count(t, "shop") == 4
    services = _services(t)
    assert "shop" in services and len(services) <= 51
    # The evicted value's series are gone from the exposition, not frozen there.
    evicted = {f"invented-{i}" for i in range(50)} - services
    assert len(evicted) == 1
    # A value that comes back later starts its counters afresh.
    clock.now += IDLE_S
    (gone,) = evicted
    _emit(sink, gone, 2)
    assert _count(t, gone) == 2


def test_an_allow_listed_service_is_never_folded_whatever_else_arrives() -> None:
    t = create_telemetry(max_services=50, allowed_services=["shop"], clock=Clock())
    sink = MetricsSink(t)
    for i in range(500):
        _emit(sink, f"invented-{i}")
    _emit(sink, "shop", 5)
    assert _count(t, "shop") == 5
    assert len(_services(t)) == 52  # 50 slots, "other" and the allowed one


def test_the_config_keys_reach_the_telemetry() -> None:
    cfg = Config.model_validate(
        {"pipeline": {"allowed_services": ["shop"], "label_idle_s": 120, "max_services": 3}}
    )
    assert cfg.pipeline.allowed_services == ["shop"]
    assert cfg.pipeline.label_idle_s == 120


def test_alert_windows_are_keyed_on_the_real_service_once_invented_ones_are_idle() -> None:
    clock = Clock()
    t = create_telemetry(max_services=50, label_idle_s=IDLE_S, clock=clock)
    engine = AlertEngine([RULE], t, clock=clock)
    failing = {"local_groundedness": verdict("local_groundedness", False)}
    for i in range(50):
        engine.emit([Evaluated(_record(f"invented-{i}", i), failing)])
    # While the invented services' windows hold verdicts, a new service folds into
    # `other`, which is never a service under test: no windows, no page.
    for n in range(5):
        engine.emit([Evaluated(_record("shop", n), failing)])
    assert engine.evaluate() == []
    assert (
        t.registry.get_sample_value(
            "rag_monitor_defect_rate", {"service": OVERFLOW, "rule": RULE.name}
        )
        is None
    )
    # Past the longest window their verdicts are gone, and so are their slots: the real
    # service gets windows of its own, and only its own verdicts in them.
    clock.now += IDLE_S + 1
    for n in range(5):
        engine.emit([Evaluated(_record("shop", n), failing)])
    firing = {a.labels["service"] for a in engine.evaluate() if a.status == "firing"}
    assert "shop" in firing
    assert (
        t.registry.get_sample_value(
            "rag_monitor_alert_samples", {"service": "shop", "rule": RULE.name, "window": "current"}
        )
        == 5
    )
    assert (
        t.registry.get_sample_value(
            "rag_monitor_alert_samples",
            {"service": "invented-0", "rule": RULE.name, "window": "current"},
        )
        is None
    )


def test_an_allow_listed_service_has_its_own_alert_windows_during_a_burst() -> None:
    clock = Clock()
    t = create_telemetry(max_services=50, allowed_services=["shop"], clock=clock)
    engine = AlertEngine([RULE], t, clock=clock)
    failing = {"local_groundedness": verdict("local_groundedness", False)}
    for i in range(200):
        engine.emit([Evaluated(_record(f"invented-{i}", i), failing)])
    for n in range(5):
        engine.emit([Evaluated(_record("shop", n), failing)])
    firing = {a.labels["service"] for a in engine.evaluate() if a.status == "firing"}
    assert "shop" in firing


def _spray(sink: MetricsSink, clock: Clock, names: Iterator[str], seconds: float) -> None:
    """One-shot service names at 1,000 a second for `seconds`, 100 at a time."""
    result = {"local_safety": verdict("local_safety", True)}
    # Copies of one unvalidated record: building each anew filled every default field, most
    # of what a spray cost.
    one_shot = RagRecord.model_construct(route="/ask", version=None)
    for _ in range(round(seconds * 10)):
        clock.now += 0.1
        sink.emit(
            [
                Evaluated(one_shot.model_copy(update={"service": next(names)}), result)
                for _ in range(100)
            ]
        )


def test_a_steady_service_wins_a_slot_from_a_continuous_spray_of_one_shot_names() -> None:
    """100,000 one-shot service names sprayed continuously; a real service at 10 records a
    second has its own series within `SLOT_WITHIN_S` while the spray goes on, keeps it,
    and the series stay bounded."""
    clock = Clock()
    t = create_telemetry(max_services=50, label_idle_s=IDLE_S, clock=clock)
    sink = MetricsSink(t)
    names = (f"invented-{i}" for i in range(100_000))
    _spray(sink, clock, names, 40)  # every slot taken, and then some
    assert len(_services(t)) == 51
    started, won, sent = clock.now, None, 0
    for step in range(600):  # the other 60,000 names, with the real service
        _spray(sink, clock, names, 0.1)
        _emit(sink, "shop")
        sent += 1
        if won is None and t.service_cap.holds("shop"):
            won, sent_then = clock.now - started, sent - 1
        if step % 60 == 0:
            assert len(_services(t)) <= 51  # 50 slots and "other"
    assert won is not None and won <= SLOT_WITHIN_S, won
    assert len(_services(t)) <= 51
    # Kept since: never evicted again by the spray, every record counted in its series.
    assert _count(t, "shop") == sent - sent_then
    assert t.registry.get_sample_value("rag_monitor_label_overflow_total", {"label": "service"})


def test_a_spray_takes_no_slot_from_services_that_send_steadily() -> None:
    """Fifty real services at one record a second hold every slot: a spray of one-shot
    names, however long, evicts none of them (every one of their records is counted in
    its own series) and reads as `other`."""
    clock = Clock()
    t = create_telemetry(max_services=50, label_idle_s=IDLE_S, clock=clock)
    sink = MetricsSink(t)
    real = [f"real-{i}" for i in range(50)]
    names = (f"invented-{i}" for i in range(100_000))
    for second in range(60):
        for service in real:
            _emit(sink, service)
        _spray(sink, clock, names, 1.0)
        assert set(real) <= _services(t), second
    assert all(_count(t, service) == 60 for service in real)
    assert _services(t) == {*real, OVERFLOW}


# The sketch's cells see a spray at its rate per cell: a sketch 2**8 times narrower under a
# spray 2**8 times slower behaves as the full one under the full spray, at 1/256 the cost.
NARROW_BITS = SKETCH_BITS - 8


@pytest.mark.parametrize("spray_per_s", [1_000, 10_000, 50_000, SPRAY_BOUND_PER_S])
def test_a_service_at_one_record_a_second_wins_a_slot_whatever_the_spray_rate(
    spray_per_s: int,
) -> None:
    """Up to the stated bound, the spray's rate does not keep the service out: its excess
    in the sketch is compared with the spread of a cell, which grows only with the square
    root of the spray (a threshold of a multiple of the average cell, which grows with the
    spray itself, kept a service at one record a second out under 10,000 a second)."""
    one_record_a_second_against(Race(spray_per_s / 2**8, sketch_bits=NARROW_BITS))


@pytest.mark.parametrize("spray_per_s", [1_000, SPRAY_BOUND_PER_S])
def test_a_spray_at_any_rate_up_to_the_bound_takes_no_slot_from_steady_values(
    spray_per_s: int,
) -> None:
    """Fifty values looked up once a second hold every slot: one-shot values sprayed at up
    to the bound evict none of them, however long."""
    race = Race(spray_per_s / 2**8, sketch_bits=NARROW_BITS)
    steady = [f"real-{i}" for i in range(50)]
    for _ in range(round(WARM_S + SLOT_WITHIN_S)):
        race.second(*steady)
        assert race.holders == set(steady)


def test_a_sketch_16_times_wider_under_a_spray_16_times_faster_gives_the_slot_alike() -> None:
    """The scaling the narrow sketch above stands on, held at a second size: a sketch
    2**4 times narrower than the full one under the bound's spray 2**4 times slower (the
    full size itself at the bound, some 20 million lookups, is bench/label_squatting.py's)."""
    one_record_a_second_against(
        Race(SPRAY_BOUND_PER_S / 2**4, sketch_bits=SKETCH_BITS - 4), kept_for_s=10
    )


@pytest.mark.parametrize("value", ["\ud800" * 300, "shop\udc80\x1b[31m", "\ud83d"])
def test_a_label_value_utf8_cannot_carry_is_repaired_so_every_scrape_still_encodes(
    value: str,
) -> None:
    """A lone surrogate (valid in OTLP/JSON, not in UTF-8) as a service name: the cap gives a
    value with U+FFFD in its place, long or short, so the exposition encodes; one such
    value once made every later scrape of the metrics port fail."""
    telemetry = create_telemetry()
    cap = LabelCap(50, max_chars=128)
    shown = cap(value)
    assert "\ufffd" in shown and len(shown) <= 128
    shown.encode("utf-8")
    assert cap(value) == shown  # the same series each time
    telemetry.counter("records").labels(shown, "otlp").inc()
    assert shown.encode("utf-8") in generate_latest(telemetry.registry)
