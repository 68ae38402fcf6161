"""A monitor release that shadows itself (docs/alerts.md, "A monitor upgrade shadows
itself"; `monitor/processors/evaluation/_upgrade.py`): where the restored alert state shows
a rule's baseline learned with the previous release's revision that this release carries,
that revision stays the one of record for a day, scoring every record, while this
release's verdicts go to the rules in shadow on a share; then this release's revision is
the one of record and the rule switches with the pairs measured. Every step, and every
reason not to, is logged; nothing is configured."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.component import Held, SampledRecord
from monitor.config import AlertBaseline, Budget, EvaluatorConfig, RegressionRule, load_config
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import evaluator_problems
from monitor.evaluators.revision import revision
from monitor.exporters.prometheus import MetricsSink
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation import EvaluationStage, OtherRevision, carried_upgrades
from monitor.processors.evaluation._other_revision import Upgrade
from monitor.processors.evaluation._upgrade import DAY_S, Upgrades
from monitor.receivers.replay_summary import SummarySink
from monitor.telemetry import Telemetry, create_telemetry
from tests.evaluation.test_evaluation_stage import CpuScorerStub, _rec
from tests.evaluation.test_shadow_revision import NOW, Clock, FailingScorer

NAME = "local_groundedness"


def _upgrades(share: float = 0.5) -> tuple[Upgrades, OtherRevision]:
    """This release's revision "new" passes every record; the previous one, "old", fails
    every record."""
    upgrade = Upgrade(NAME, "old", "new")
    scorer = OtherRevision(FailingScorer(NAME), "old", share, 0.0, upgrade=upgrade)
    return Upgrades({NAME: scorer}, {}), scorer


def _info(telemetry: Telemetry, value: str) -> float | None:
    return telemetry.registry.get_sample_value(
        "rag_monitor_evaluator_revision_info", {"evaluator": NAME, "revision": value}
    )


async def _score(stage: EvaluationStage, first: int, count: int) -> None:
    from harness.wait import wait_until_async

    items = [SampledRecord(_rec(i), "test", frozenset({NAME})) for i in range(first, first + count)]
    assert await stage.put_many(items) == count
    await wait_until_async(lambda: stage.completed >= first + count, 60, "the records scored")


async def test_the_previous_revision_is_of_record_for_a_day_then_the_rule_switches_with_the_pairs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The rule's baseline holds "old": for a day every record's verdict of record is the
    old revision's (the service's metrics and results count its failures), half of them
    with this release's verdict in shadow (the rule's pairs, counted by revision); a day
    after the first pair this release's verdicts are of record, the rule's entry takes
    "new" (with a baseline old enough, the pairs measured in shadow start its changeover: the
    `next` path, tests/alerts/test_alerts_shadow.py and the scorecard's upgrade row), and
    the revision gauge follows; each step logged."""
    caplog.set_level(logging.INFO)
    telemetry, clock = create_telemetry(), Clock()
    rule = RegressionRule(name="upgraded", evaluator=NAME, baseline=AlertBaseline())
    engine = AlertEngine([rule], telemetry, clock=clock)
    upgrades, scorer = _upgrades()
    engine.restored.append(lambda held: upgrades.decide(held, clock.now))
    summary = SummarySink()
    stage = EvaluationStage(
        [(CpuScorerStub(NAME), EvaluatorConfig(name=NAME))],
        BudgetGate(Budget(max_local_evaluations_per_minute=None)),
        [MetricsSink(telemetry), summary, engine],
        telemetry,
        revisions={NAME: "new"},
        others={NAME: scorer},
        clock=clock,
    )
    # What the state file restored: the rule's baseline learned with "old".
    await _score_into(engine, "old")
    await engine.start()
    assert scorer.upgrade is not None and scorer.upgrade.until_s == clock.now + DAY_S
    assert "shadows itself after the upgrade" in caplog.text
    await stage.start()
    await _score(stage, 0, 200)
    entry = next(iter(engine._entries.values()))
    state: RegressionState = entry.state
    assert entry.revision == "old"
    chosen = sum(scorer.in_shadow(_rec(i).sampling_key) for i in range(200))
    assert 60 < chosen < 140
    assert state.baseline.shadow is not None and state.baseline.shadow.revision == "new"
    # Every pair differs: the old revision fails what this release passes.
    assert state.baseline.shadow.paired[:2] == [chosen, -chosen]
    assert summary.totals[NAME].failed == 200 and summary.totals[NAME].passed == 0
    labels = {"evaluator": NAME, "revision": "new", "outcome": "pass"}
    shadowed = telemetry.registry.get_sample_value(
        "rag_monitor_shadow_revision_evaluations_total", labels
    )
    assert shadowed == chosen
    assert _info(telemetry, "old") == 1 and _info(telemetry, "new") == 0
    clock.now += DAY_S
    await _score(stage, 200, 50)
    await stage.shutdown(5)
    assert summary.totals[NAME].passed == 50
    assert next(iter(engine._entries.values())).revision == "new"
    assert _info(telemetry, "old") == 0 and _info(telemetry, "new") == 1
    assert "switched after its day of shadow" in caplog.text
    await engine.shutdown(5)


async def _score_into(engine: AlertEngine, value: str) -> None:
    """A baseline under revision `value`, as a state file restores it."""
    from monitor.alerts.rule import Origin
    from monitor.results import EvalResult

    result = {NAME: EvalResult(NAME, passed=True, revision=value)}
    engine.count_results(Origin("svc"), result, NOW - 120.0)


def test_a_restart_within_the_day_goes_on_from_the_first_shadow_pair(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The state shows the shadow's first pair 20 h ago: the switch comes 4 h from now; one
    25 h ago: it has come, said so; a baseline of another revision: a warning naming it
    and that the rules judge on the interim level; none: said, nothing starts."""
    caplog.set_level(logging.INFO)
    upgrades, scorer = _upgrades()
    assert scorer.upgrade is not None
    held = {NAME: [Held("old", "new", NOW - 20 * 3600.0), Held("old")]}
    upgrades.decide(held, NOW)
    assert scorer.upgrade.until_s == NOW + 4 * 3600.0
    assert scorer.chosen("any", NOW) and not scorer.chosen("any", NOW + 4 * 3600.0)

    upgrades, scorer = _upgrades()
    assert scorer.upgrade is not None
    upgrades.decide({NAME: [Held("old", "new", NOW - 25 * 3600.0)]}, NOW)
    assert not scorer.chosen("any", NOW)
    assert "the day of shadow after the upgrade ended" in caplog.text

    caplog.clear()
    upgrades, scorer = _upgrades()
    assert scorer.upgrade is not None
    upgrades.decide({NAME: [Held("0.0.1+abcdef12")]}, NOW)
    assert scorer.upgrade.until_s == 0.0 and not scorer.chosen("any", NOW)
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "0.0.1+abcdef12" in warning.getMessage()
    assert "interim level" in warning.getMessage()

    caplog.clear()
    upgrades, scorer = _upgrades()
    upgrades.decide({}, NOW)
    assert "no alert rule's saved baseline holds its previous revision old" in caplog.text


def _manifest(tmp_path: Path, previous: str | None) -> Path:
    import json

    from monitor.evaluators import releases

    folder = tmp_path / "releases" / "0.0.9"
    folder.mkdir(parents=True)
    for name in releases.FILES:
        (folder / name).write_bytes((releases.DETECTOR / name).read_bytes())
    path = tmp_path / "releases.json"
    version, digests = releases.shipped()
    path.write_text(json.dumps({"version": version, "parameters": digests, "previous": previous}))
    return path


def test_the_pipeline_carries_the_previous_release_of_the_detector_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`carried_upgrades` as the pipeline builds the stage with a release carrying 0.0.9:
    the detector's previous revision is that release's (its version in the revision, its
    parameter files in the entry the worker processes build); an entry with a `next` of its
    own and another evaluator are left out, and a baseline of theirs under another revision is
    logged as judged on the interim level."""
    from monitor.evaluators import releases

    carried = releases.previous(_manifest(tmp_path, "0.0.9"))
    assert carried is not None and carried.version == "0.0.9"
    assert releases.previous(_manifest(tmp_path / "none", None)) is None
    path = tmp_path / "c.yaml"
    path.write_text(
        "evaluators:\n"
        "  - name: local_groundedness\n"
        "  - name: local_relevance\n"
        "    next: {until: 2027-01-15T08:00:00Z, threshold: 0.6}\n"
    )
    config = load_config(path, environ={}, evaluator_check=evaluator_problems)
    context = BuildContext(judge=None, judge_model=None)
    upgrades, (entry,) = carried_upgrades(config, context, carried.released())
    (scorer,) = upgrades.scorers.values()
    assert scorer.upgrade is not None
    assert scorer.revision == revision(entry, config.judge) == scorer.upgrade.old
    assert scorer.upgrade.old.startswith("0.0.9+")
    assert scorer.upgrade.new == revision(config.evaluators[0], config.judge)
    assert scorer.upgrade.old.split("+")[1] == scorer.upgrade.new.split("+")[1]
    assert entry.release == ("0.0.9", str(carried.model), str(carried.head))
    # As the pool hands it to the worker processes.
    assert pickle.loads(pickle.dumps(entry)).release == entry.release
    assert set(upgrades.without) == {"local_relevance"}
    caplog.set_level(logging.INFO)
    upgrades.decide({"local_relevance": [Held("0.0.9+00000000")]}, NOW)
    assert "carries no previous revision of it (only the detector's)" in caplog.text
    none, cpu = carried_upgrades(config, context, None)
    assert none.scorers == {} and cpu == []
    assert "carries no previous detector" in none.without[NAME][1]
    path.write_text(
        "evaluators:\n"
        "  - name: local_groundedness\n"
        "    next: {until: 2027-01-15T08:00:00Z, threshold: 0.6}\n"
    )
    config = load_config(path, environ={}, evaluator_check=evaluator_problems)
    nothing, cpu = carried_upgrades(config, context, carried.released())
    assert nothing.scorers == {} and cpu == []
    assert "a next revision of its own" in nothing.without[NAME][1]
