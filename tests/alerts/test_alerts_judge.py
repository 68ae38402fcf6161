"""A kind's `judge` is a pure function: the same entries give the same decision, and judging
changes nothing (`monitor.alerts.kinds`). Every kind is judged so at every evaluation of a
stream that fires, resolves, changes evaluator revision and holds, through the engine."""

from __future__ import annotations

import copy
import pickle
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from monitor.alerts.kinds import Decision, Entry, Judgment
from monitor.component import Evaluated
from monitor.results import EvalResult
from tests.alerts import test_alerts_slo as slo
from tests.alerts.test_alerts import record
from tests.alerts.test_alerts_state_versions import (
    CONTINUED,
    INTERVAL,
    STEPS,
    _engine,
    _traffic,
)


def verdict(name: str, passed: bool, revision: str) -> EvalResult:
    return EvalResult(
        name=name,
        score=float(passed),
        normalized=float(passed),
        passed=passed,
        revision=revision,
    )


def test_every_kind_judges_as_a_pure_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, _, clock = _engine(tmp_path / "state.json")
    decisions: Counter[tuple[str, Decision]] = Counter()
    for kind in engine._kinds:
        monkeypatch.setattr(kind, "judge", _checked(kind.judge, type(kind).__name__, decisions))
    _traffic(engine, clock, range(STEPS + CONTINUED))
    # The rise ends: the pages resolve.
    for step in range(40):
        for k in range(20):
            n = 10_000 + step * 20 + k
            engine.emit(
                [
                    Evaluated(
                        record("shop", n),
                        {name: verdict(name, True, "r2" if name == "g" else "r1") for name in "gh"},
                    )
                ]
            )
        clock.now += INTERVAL
        engine.evaluate()
    kinds = {type(kind).__name__ for kind in engine._kinds}
    assert kinds == {"Absolute", "Regression", "Cohorts", "Slo"}
    for name in kinds:
        assert decisions[name, Decision.HOLD] > 0, name
    for name in ("Absolute", "Regression", "Cohorts"):
        assert decisions[name, Decision.FIRE] > 0, (name, decisions)
    for name in ("Absolute", "Regression", "Cohorts"):
        assert decisions[name, Decision.RESOLVE] > 0, (name, decisions)


def test_the_slo_kind_judges_as_a_pure_function_as_it_fires_and_resolves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stream above never burns an SLO rule's budget: here a collapse pages and its end
    resolves the page, every judgment checked."""
    engine, _, clock = slo.make()
    decisions: Counter[tuple[str, Decision]] = Counter()
    kind = engine._kinds[0]
    monkeypatch.setattr(kind, "judge", _checked(kind.judge, "Slo", decisions))
    stream = slo.Stream(engine, clock)
    stream.run(70, 0.9)  # the page row's hour seen whole, burning at 4.5
    stream.run(40, 0.1)
    assert stream.story() == [("firing", "page"), ("resolved", "page")]
    assert decisions["Slo", Decision.FIRE] == decisions["Slo", Decision.RESOLVE] == 1


Judge = Callable[[Mapping[str, Entry], float], dict[str, Judgment]]


def _checked(judge: Judge, name: str, decisions: Counter[tuple[str, Decision]]) -> Judge:
    """`judge`, checked to be pure at every call, its decisions counted."""

    def pure(entries: Mapping[str, Entry], now: float) -> dict[str, Judgment]:
        before = pickle.dumps(dict(entries))
        copied = copy.deepcopy(dict(entries))
        first = judge(entries, now)
        assert judge(entries, now) == first, name
        assert judge(copied, now) == first, name
        assert pickle.dumps(dict(entries)) == before, f"{name} changed its entries"
        for judgment in first.values():
            decisions[name, judgment.decision] += 1
        return first

    return pure
