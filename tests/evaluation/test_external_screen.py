"""The screen an app's own verdicts pass (`external_verdicts`): per service a bounded number
of evaluator names, per evaluator a bounded number of labels (a guardrail's categories),
names and labels of bounded length, only the services and evaluators named when named;
each refusal counted by reason. Places follow the service labels held: a service whose
label loses its slot starts afresh, so what the screen keeps is bounded."""

from __future__ import annotations

from monitor.config import ExternalVerdicts
from monitor.processors.evaluation._external import ExternalScreen
from monitor.results import EvalResult
from monitor.telemetry import Telemetry, create_telemetry


def _verdict(name: str, label: str = "fail") -> EvalResult:
    return EvalResult(name=name, label=label, passed=label == "pass")


def _guardrail(name: str, *categories: str) -> EvalResult:
    return EvalResult(
        name=name, label="blocked", passed=False, safety=dict.fromkeys(categories, "high")
    )


def _take(
    screen: ExternalScreen, sender: str, label: str, verdicts: dict[str, EvalResult], trace: str
) -> dict[str, EvalResult]:
    """`screen.take` of verdicts all sent by service `sender`."""
    return screen.take(dict.fromkeys(verdicts, sender), label, verdicts, trace)


def _refused(t: Telemetry, service: str, reason: str) -> float:
    labels = {"service": service, "reason": reason}
    return t.registry.get_sample_value("rag_monitor_external_verdicts_refused_total", labels) or 0.0


def test_each_service_has_its_own_bounded_evaluators_and_labels() -> None:
    t = create_telemetry()
    screen = ExternalScreen(
        ExternalVerdicts(max_evaluators_per_service=2, max_labels_per_evaluator=2), t
    )
    taken = [
        set(_take(screen, "检索服务", "检索服务", {name: _verdict(name)}, "t"))
        for name in ("external:a", "external:b", "external:c", "external:a")
    ]
    assert taken == [{"external:a"}, {"external:b"}, set(), {"external:a"}]
    # Another service has places of its own.
    assert set(_take(screen, "other-app", "other-app", {"external:c": _verdict("external:c")}, "t"))
    labels = [
        bool(
            _take(screen, "检索服务", "检索服务", {"external:a": _verdict("external:a", lab)}, "t")
        )
        for lab in ("fail", "pass", "部分正确", "fail")
    ]
    assert labels == [True, True, False, True]
    shield = [
        bool(
            _take(
                screen, "guarded", "guarded", {"guardrail:b": _guardrail("guardrail:b", *cats)}, "t"
            )
        )
        for cats in (("pii",), ("pii", "jailbreak"), ("violence",))
    ]
    assert shield == [True, True, False]
    assert _refused(t, "检索服务", "too_many_evaluators") == 1
    assert _refused(t, "检索服务", "too_many_labels") == 1
    assert _refused(t, "guarded", "too_many_labels") == 1


def test_only_the_services_and_evaluators_named_and_no_long_names() -> None:
    """`services` names who sent a verdict, whichever trace it joins: a forger's log record
    in the app's trace is refused."""
    t = create_telemetry()
    screen = ExternalScreen(
        ExternalVerdicts(
            services=["rag-api"], evaluators=["external:faithfulness"], max_label_chars=24
        ),
        t,
    )
    ok = {"external:faithfulness": _verdict("external:faithfulness")}
    assert _take(screen, "rag-api", "rag-api", ok, "t") == ok
    assert _take(screen, "forger", "forger", ok, "t") == {}
    assert _take(screen, "forger", "rag-api", ok, "t") == {}  # into the app's own trace
    other = {"external:relevance": _verdict("external:relevance")}
    assert _take(screen, "rag-api", "rag-api", other, "t") == {}
    long = {"external:faithfulness": _verdict("external:faithfulness", "ا" * 25)}
    assert _take(screen, "rag-api", "rag-api", long, "t") == {}
    assert _refused(t, "forger", "service_not_allowed") == 1
    assert _refused(t, "rag-api", "service_not_allowed") == 1  # counted by the record's label
    assert _refused(t, "rag-api", "evaluator_not_allowed") == 1
    assert _refused(t, "rag-api", "too_long") == 1


def test_a_service_whose_label_loses_its_slot_starts_afresh() -> None:
    now = [0.0]
    t = create_telemetry(max_services=1, label_idle_s=10, clock=lambda: now[0])
    screen = ExternalScreen(ExternalVerdicts(max_evaluators_per_service=1), t)

    def take(service: str, name: str) -> bool:
        label = t.service_cap(service)
        return bool(_take(screen, service, label, {name: _verdict(name)}, "t"))

    assert take("a", "external:x") and not take("a", "external:y")
    now[0] = 100.0  # `a` idle: `b` takes its slot, and `a` its places with it
    assert take("b", "external:z")
    now[0] = 200.0
    assert take("a", "external:y")
