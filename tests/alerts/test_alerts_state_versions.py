"""The state file across versions: a file an older version wrote loads, and the engine goes
on from it as the version that wrote it would have.

`testdata/state_v2.json` was written by the version-2 code (its `write_fixture` below, run on
that code), with what that code then sent over the next `CONTINUED` evaluations in
`testdata/state_v2_continued.json`. `testdata/state_v4.json` and its continuation were
written the same way by the version-4 code that saved values a restart does not read (a
regression rule's last advance, its first level's `frozen` beside its cut's design effect,
the whole expectation a held page reads two figures of, two flags for what ids set aside
are judged by, and nulls: a sequential rule's lean, a trailing rule's pinned level, the
severity of kinds whose pages have none), before those were left out.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from monitor.alerts import AlertEngine
from monitor.alerts.state import UPGRADES, VERSION, StateFile
from monitor.component import Alert, Evaluated
from monitor.config import AlertRule, alert_rule
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry, create_telemetry
from tests.alerts.test_alerts import Clock, question

TESTDATA = Path(__file__).parent / "testdata"
INTERVAL = 15.0
STEPS, CONTINUED = 120, 40


def _regression(name: str, evaluator: str, test: str) -> AlertRule:
    return alert_rule(
        {
            "name": name,
            "evaluator": evaluator,
            "window": "60s",
            "min_samples": 50,
            "baseline": {"window": "10m", "min_samples": 200, "season": "none"},
            "min_increase": 0.05,
            "false_page_every": "2h",
            "test": test,
        }
    )


RULES = [
    alert_rule(
        {
            "name": "absolute",
            "evaluator": "g",
            "max_defect_rate": 0.1,
            "min_samples": 30,
            "window": "5m",
        }
    ),
    _regression("regression", "g", "sequential"),
    _regression("regression_window", "g", "window"),
    _regression("regression_h", "h", "window"),
    alert_rule(
        {
            "name": "canary",
            "evaluator": "g",
            "cohorts": {"by": "version"},
            "window": "5m",
            "min_samples": 100,
        }
    ),
    alert_rule({"name": "slo", "evaluator": "g", "slo": {"objective": 0.8}}),
]


def _engine(path: Path) -> tuple[AlertEngine, Telemetry, Clock]:
    t = create_telemetry()
    clock = Clock()
    engine = AlertEngine(
        RULES, t, evaluation_interval_s=INTERVAL, clock=clock, state_file=StateFile(str(path), t)
    )
    return engine, t, clock


def _traffic(engine: AlertEngine, clock: Clock, steps: range) -> list[Alert]:
    """20 verdicts a step: 10 % defects for 20 minutes, then a canary version `v2` at 60 %,
    then the whole service at 50 % with evaluator `g`'s revision changed (`h` keeps its)."""
    sent: list[Alert] = []
    for step in steps:
        for k in range(20):
            n = step * 20 + k + 1
            version = "v2" if k % 4 == 0 and step >= 80 else "v1"
            defect = (
                k % 10 == 0 or (version == "v2" and k % 20 < 12) or (step >= 100 and k % 2 == 0)
            )
            record = RagRecord(
                request_id=f"r{n}",
                trace_id=f"{n:032x}",
                service="shop",
                query=question(n),
                response="a",
                version=version,
                conversation=f"c{(n // 3) % 40}" if k % 2 else None,
            )
            g, h = (
                EvalResult(
                    name=name,
                    score=float(not defect),
                    normalized=float(not defect),
                    passed=not defect,
                    revision="r2" if name == "g" and step >= 110 else "r1",
                )
                for name in ("g", "h")
            )
            engine.emit([Evaluated(record, {"g": g, "h": h})])
        clock.now += INTERVAL
        sent.extend(engine.evaluate())
    return sent


def _shown(alerts: list[Alert]) -> list[list[Any]]:
    return [[a.status, dict(a.labels), dict(a.annotations)] for a in alerts]


def _copied(
    tmp: Path, edit: Callable[[dict[str, Any]], None] | None = None, fixture: str = "state_v2"
) -> Path:
    """A fixture (the version-2 one by default) copied to `tmp` (changed by `edit`)."""
    data = json.loads((TESTDATA / f"{fixture}.json").read_text())
    if edit is not None:
        edit(data)
    path = tmp / "state.json"
    path.write_text(json.dumps(data))
    return path


async def _continued(path: Path, saved_at: float) -> Any:
    engine, t, clock = _engine(path)
    clock.now = saved_at
    await engine.start()
    loads = t.registry.get_sample_value(
        "rag_monitor_alert_state_loads_total", {"outcome": "loaded"}
    )
    dropped = t.registry.get_sample_value(
        "rag_monitor_alert_state_entries_dropped_total", {"when": "load"}
    )
    firing = engine.firing()
    sent = _shown(_traffic(engine, clock, range(STEPS, STEPS + CONTINUED)))
    await engine.shutdown(1.0)
    # As JSON has it: lists for tuples.
    return json.loads(
        json.dumps({"loaded": loads, "dropped": dropped or 0.0, "firing": firing, "sent": sent})
    )


def _saved_at(fixture: str = "state_v2") -> float:
    return float(json.loads((TESTDATA / f"{fixture}.json").read_text())["saved_at"])


async def test_a_version_2_file_loads_and_the_engine_goes_on_as_before(tmp_path: Path) -> None:
    path, saved_at = _copied(tmp_path), _saved_at()
    expected = json.loads((TESTDATA / "state_v2_continued.json").read_text())
    got = await _continued(path, saved_at)
    assert got["firing"] == [["absolute", "shop"], ["regression_h", "shop"]]
    assert got == expected


async def test_a_version_4_file_with_every_key_it_once_saved_loads_and_goes_on_as_then(
    tmp_path: Path,
) -> None:
    """A file of this version written before the values a restart does not need were left
    out (they are ignored, or read where they say something the rest does not) restores
    every entry, and the engine sends what the code that wrote it sent."""
    fixture = "state_v4"
    path, saved_at = _copied(tmp_path, fixture=fixture), _saved_at(fixture)
    expected = json.loads((TESTDATA / f"{fixture}_continued.json").read_text())
    got = await _continued(path, saved_at)
    assert got["loaded"] == 1.0 and got["dropped"] == 0.0
    assert got == expected


def _older(data: dict[str, Any]) -> None:
    for rule in data["rules"].values():
        for cohorts in rule["services"].values():
            for entry in cohorts.values():
                entry.pop("where")
                for field in ("seen", "changeover", "translated"):
                    entry["state"].pop(field, None)


async def test_a_version_2_file_saved_before_its_later_fields_loads(tmp_path: Path) -> None:
    """Version-2 files written before entries kept their `where`, cohorts their `seen` and
    regression rules their changeover lack those fields: none of them, as then."""
    path, saved_at = _copied(tmp_path, _older), _saved_at()
    got = await _continued(path, saved_at)
    assert got["loaded"] == 1.0 and got["dropped"] == 0.0
    assert got["firing"] == [["absolute", "shop"], ["regression_h", "shop"]]


async def _write(path: Path) -> Clock:
    engine, _, clock = _engine(path)
    _traffic(engine, clock, range(STEPS))
    await engine.shutdown(1.0)
    return clock


def write_fixture(fixture: str) -> None:
    """Writes a fixture and its continuation with the code checked out (run on the version
    that wrote them)."""
    asyncio.run(_write(TESTDATA / f"{fixture}.json"))
    with tempfile.TemporaryDirectory() as scratch:
        continued = asyncio.run(
            _continued(_copied(Path(scratch), fixture=fixture), _saved_at(fixture))
        )
    (TESTDATA / f"{fixture}_continued.json").write_text(json.dumps(continued, indent=1) + "\n")


if __name__ == "__main__" and sys.argv[1:2] == ["write"]:
    write_fixture(sys.argv[2])


async def test_a_current_version_file_without_a_field_is_refused_alone(tmp_path: Path) -> None:
    """Defaults belong to the upgrade from an older version: a file of this version
    lacking a field its entries hold is malformed there, and that entry alone is left out."""

    def current_without_where(data: dict[str, Any]) -> None:
        data["version"] = VERSION
        for version in sorted(UPGRADES):
            UPGRADES[version](data["rules"])
        del data["rules"]["absolute"]["services"]["shop"][""]["where"]

    path, saved_at = _copied(tmp_path, current_without_where), _saved_at()
    got = await _continued(path, saved_at)
    assert got["loaded"] == 1.0 and got["dropped"] == 1.0
    assert got["firing"] == [["regression_h", "shop"]]
