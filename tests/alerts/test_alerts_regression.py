"""Regression rules (a rule with a `baseline`) and the alert state file.

The engine is driven by a fake clock; verdict streams are deterministic (a defect whenever
the running count of `rate * n` steps up), so every assertion is about the rule's logic.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.kinds.regression import BATCH
from monitor.alerts.rule import Origin
from monitor.alerts.state import FORMAT, VERSION, StateFile
from monitor.component import Alert, Evaluated
from monitor.config import (
    AbsoluteRule,
    AlertBaseline,
    AlertRule,
    ConfigError,
    RegressionRule,
    load_config,
)
from monitor.telemetry import Telemetry, create_telemetry
from tests.alerts.test_alerts import Clock, gauge, record, verdict

INTERVAL = 5.0
RULE = RegressionRule(
    name="hallucination_regression",
    evaluator="local_groundedness",
    window="60s",
    min_samples=50,
    baseline=AlertBaseline(window="10m", min_samples=200),
    min_increase=0.05,
    false_page_every="2h",  # a false page at most at 1 in 1,440 looks every 5 s
    test="window",  # the sequential test: tests/alerts/test_alerts_sequential.py
)
TESTS = ("window", "sequential")
PASSED = {"local_groundedness": verdict("local_groundedness", passed=True)}
FAILED = {"local_groundedness": verdict("local_groundedness", passed=False)}


class Stream:
    """`per_s` verdicts a second of simulated time at defect rate `rate`, judged every
    `INTERVAL` seconds; every alert the engine sends is kept."""

    def __init__(self, engine: AlertEngine, clock: Clock, per_s: int = 10) -> None:
        self.engine, self.clock, self.per_s = engine, clock, per_s
        self.n = 0
        self.sent: list[Alert] = []

    def run(self, seconds: float, rate: float, service: str = "shop") -> None:
        for _ in range(int(seconds / INTERVAL)):
            for _ in range(int(self.per_s * INTERVAL)):
                defect = math.floor((self.n + 1) * rate) > math.floor(self.n * rate)
                self.n += 1
                self._verdict(service, defect)
            self.clock.now += INTERVAL
            self.sent.extend(self.engine.evaluate())

    def _verdict(self, service: str, defect: bool) -> None:
        results = {"local_groundedness": verdict("local_groundedness", passed=not defect)}
        self.engine.emit([Evaluated(record(service, self.n), results)])

    def pages(self) -> list[Alert]:
        return [a for a in self.sent if a.status == "firing"]


class Requests(Stream):
    """The stream of `Stream`, each verdict counted as `emit` counts a distinct request's
    (its service, a fingerprint of its own) without the record: for tests of the rule, not
    of what a page says of where (`monitor.alerts.attribution` reads records)."""

    def _verdict(self, service: str, defect: bool) -> None:
        origin = Origin(service, fingerprint=f"{self.n:016x}", context=False)  # as `record`'s
        self.engine.count_results(origin, FAILED if defect else PASSED, self.clock.now)


class Counts(Stream):
    """The stream of `Stream`, its verdicts counted `BATCH` at a time (no records): for
    tests of a rule's statistic on many verdicts."""

    def run(self, seconds: float, rate: float, service: str = "shop") -> None:
        origin = Origin(service)
        for _ in range(int(seconds / INTERVAL)):
            left = int(self.per_s * INTERVAL)
            while left:
                n = min(BATCH, left)
                # Defects where the running count of `rate * n` steps up, as `Stream`'s.
                fails = math.floor((self.n + n) * rate) - math.floor(self.n * rate)
                self.n += n
                left -= n
                for i in range(len(self.engine.rules)):
                    self.engine.count(
                        i, origin, [float(n - fails), float(fails)], None, self.clock.now
                    )
            self.clock.now += INTERVAL
            self.sent.extend(self.engine.evaluate())


def make(
    rule: AlertRule = RULE, state_path: Path | None = None, clock: Clock | None = None
) -> tuple[AlertEngine, Telemetry, Clock]:
    t = create_telemetry()
    clock = clock or Clock()
    state_file = StateFile(str(state_path), t) if state_path is not None else None
    engine = AlertEngine(
        [rule], t, evaluation_interval_s=INTERVAL, clock=clock, state_file=state_file
    )
    return engine, t, clock


def test_steady_rate_stays_quiet_and_a_rise_pages_with_the_story() -> None:
    engine, t, clock = make()
    stream = Requests(engine, clock)
    stream.run(1800, 0.40)  # a high but steady rate: the evaluator's bias, not a regression
    assert stream.pages() == []
    assert gauge(t, "defect_rate_baseline", service="shop", rule=RULE.name) == pytest.approx(
        0.40, abs=0.01
    )
    stream.run(60, 0.60)
    pages = stream.pages()
    assert [(a.rule, a.service) for a in pages] == [(RULE.name, "shop")]
    notes = pages[0].to_alertmanager()["annotations"]
    assert isinstance(notes, dict)
    assert notes["description"].startswith("defect rate 0.")
    assert "over 60s against 0.40 expected from the previous 10m (" in notes["description"]
    assert float(notes["baseline_defect_rate"]) == pytest.approx(0.40, abs=0.01)
    assert float(notes["increase"]) >= 0.05
    assert float(notes["p_value"]) <= 0.001
    assert gauge(t, "alert_firing", service="shop", rule=RULE.name, severity="page", cohort="") == 1


def test_too_little_baseline_means_no_page_and_says_why() -> None:
    engine, t, clock = make()
    stream = Stream(engine, clock, per_s=1)
    # 30 verdicts: short of the baseline's 200, and of the 40 (a fifth of them) that a
    # fresh rule's first verdicts cut short at a rise must hold to be a level.
    stream.run(30, 0.10)
    stream.run(60, 0.90)
    assert stream.pages() == []
    baseline = gauge(t, "alert_samples", service="shop", rule=RULE.name, window="baseline")
    current = gauge(t, "alert_samples", service="shop", rule=RULE.name, window="current")
    assert baseline is not None and baseline < 200
    assert current is not None and current >= 50


def test_a_rise_below_half_of_min_increase_does_not_page() -> None:
    # Sequential, at a budget of 2h: a fixed test over the rise's 120,000 verdicts and the
    # 10-minute baseline would call +0.02 significant (z near 9); below half of
    # min_increase, the statistic drifts down all the same. Both tests judge one stream, a
    # rule each: the verdicts are counted once.
    # The verdicts come as counts of the sequential test's batch (`BATCH`): what is judged
    # is the rule's statistic, not how records are counted.
    rules = [RULE.model_copy(update={"name": test, "test": test}) for test in TESTS]
    clock = Clock()
    t = create_telemetry()
    engine = AlertEngine(rules, t, evaluation_interval_s=INTERVAL, clock=clock)
    stream = Counts(engine, clock, per_s=100)  # enough data that +0.02 is significant
    stream.run(900, 0.30)
    stream.run(1200, 0.32)
    assert stream.pages() == []
    for test in TESTS:  # each rule judged the rise
        rate = gauge(t, "defect_rate", service="shop", rule=test)
        assert rate == pytest.approx(0.32, abs=0.005), test


def test_baseline_does_not_learn_the_regression_and_resolves_when_it_ends() -> None:
    engine, t, clock = make()
    stream = Requests(engine, clock)
    stream.run(900, 0.20)
    stream.run(60, 0.50)
    assert engine.firing() == [(RULE.name, "shop")]
    stream.run(3 * 600, 0.50)  # three baseline windows of regression
    assert engine.firing() == [(RULE.name, "shop")]
    assert gauge(t, "defect_rate_baseline", service="shop", rule=RULE.name) == pytest.approx(
        0.20, abs=0.01
    )
    stream.run(120, 0.20)
    assert engine.firing() == []
    assert [a.status for a in stream.sent] == ["firing"] * (len(stream.sent) - 1) + ["resolved"]


def test_a_rise_that_has_begun_does_not_teach_the_baseline_before_it_is_judged() -> None:
    """A rise too thin to page yet (two verdicts a second) is held out of the baseline while
    its evidence stands: five minutes of it would otherwise make half of the 10-minute
    baseline and hide it."""
    engine, t, clock = make()
    stream = Requests(engine, clock, per_s=2)
    stream.run(900, 0.20)
    for _ in range(60):  # five minutes of a rise to 0.30
        stream.run(INTERVAL, 0.30)
        assert engine.firing() == []
        rate = gauge(t, "defect_rate_baseline", service="shop", rule=RULE.name)
        assert rate == pytest.approx(0.20, abs=0.01)
    assert gauge(t, "defect_rate", service="shop", rule=RULE.name) == pytest.approx(0.30, abs=0.02)


def test_verdicts_seen_while_firing_never_reach_the_baseline() -> None:
    engine, t, clock = make()
    stream = Requests(engine, clock)
    stream.run(900, 0.20)
    stream.run(600, 0.50)
    assert engine.firing() == [(RULE.name, "shop")]
    while engine.firing():
        stream.run(INTERVAL, 0.20)
    stream.run(180, 0.20)  # the slices current at the resolve have left the window
    rate = gauge(t, "defect_rate_baseline", service="shop", rule=RULE.name)
    assert rate == pytest.approx(0.20, abs=0.001)


def test_services_have_their_own_baselines() -> None:
    engine, _, clock = make()
    stream = Requests(engine, clock)
    for _ in range(12):
        stream.run(75, 0.10, service="a")
        stream.run(75, 0.60, service="b")
    stream.run(60, 0.60, service="a")
    assert [(a.service, a.status) for a in stream.sent] == [("a", "firing")]


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        (
            "{name: r, evaluator: local_groundedness}",
            "exactly one of max_defect_rate, baseline or cohorts",
        ),
        (
            "{name: r, evaluator: local_groundedness, max_defect_rate: 0.1, baseline: {}}",
            "exactly one of max_defect_rate, baseline or cohorts",
        ),
        (
            "{name: r, evaluator: local_groundedness, window: 1h, baseline: {window: 30m}}",
            "alerts.rules.0.baseline.window: 30m must be longer than window 1h",
        ),
        (
            "{name: r, evaluator: local_groundedness, baseline: {min_samples: 0}}",
            "alerts.rules.0.baseline.min_samples",
        ),
        (
            "{name: r, evaluator: local_groundedness, max_defect_rate: 0.1, min_increase: 0.1}",
            "only a rule with a baseline or cohorts takes min_increase",
        ),
        ("{name: r, evaluator: local_groundedness, baseline: {window: 0s}}", "baseline.window"),
    ],
)
def test_check_config_rejects_bad_regression_rules(tmp_path: Path, rule: str, problem: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"alerts: {{rules: [{rule}]}}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert problem in "; ".join(caught.value.problems)


def test_regression_rule_defaults() -> None:
    rule = RegressionRule(name="r", evaluator="local_groundedness", baseline=AlertBaseline())
    assert rule.baseline is not None
    assert (rule.window, rule.baseline.window, rule.baseline.min_samples) == ("30m", "24h", 500)
    assert (rule.min_increase, rule.false_page_every, rule.test) == (0.03, None, "sequential")
    absolute = AbsoluteRule(name="a", evaluator="local_groundedness", max_defect_rate=0.1)
    assert (absolute.window, absolute.false_page_every, absolute.min_increase) == (
        "10m",
        None,
        None,
    )
    assert load_config(None).alerts.false_page_every == "90d"


def test_confidence_is_refused_with_what_replaced_it(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "alerts: {rules: [{name: r, evaluator: local_groundedness, baseline: {}, "
        "confidence: 0.999}]}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "confidence: replaced by false_page_every" in "; ".join(caught.value.problems)


# -- the state file ---------------------------------------------------------------------


def loads(t: Telemetry, outcome: str) -> float:
    return gauge(t, "alert_state_loads_total", outcome=outcome) or 0.0


async def test_a_firing_rule_is_still_firing_after_a_restart_and_resolves_later(
    tmp_path: Path,
) -> None:
    path = tmp_path / "alerts.state"
    first, _, clock = make(state_path=path)
    await first.start()
    stream = Stream(first, clock)
    stream.run(900, 0.20)
    stream.run(60, 0.50)
    assert first.firing() == [(RULE.name, "shop")]
    await first.shutdown(10)  # SIGTERM: saves, sends nothing

    second, t, _ = make(state_path=path, clock=clock)
    await second.start()
    assert loads(t, "loaded") == 1
    assert second.firing() == [(RULE.name, "shop")]
    again = Stream(second, clock)
    again.n = stream.n
    again.run(INTERVAL, 0.50)  # one evaluation interval
    assert second.firing() == [(RULE.name, "shop")]
    assert gauge(t, "alert_firing", service="shop", rule=RULE.name, severity="page", cohort="") == 1
    assert gauge(t, "defect_rate_baseline", service="shop", rule=RULE.name) == pytest.approx(
        0.20, abs=0.01
    )
    again.run(120, 0.20)
    assert [a.status for a in again.sent][-1] == "resolved"
    assert second.firing() == []
    await second.shutdown(10)


@pytest.mark.parametrize(
    ("content", "outcome"),
    [
        (b"\x00{not json", "corrupt"),
        (b'{"format": "something-else", "version": 1}', "foreign"),
        (json.dumps({"format": FORMAT, "version": VERSION + 1}).encode(), "foreign"),
        (
            json.dumps({"format": FORMAT, "version": VERSION, "saved_at": 0, "rules": {}}).encode(),
            "stale",
        ),
        (
            json.dumps(
                {
                    "format": FORMAT,
                    "version": VERSION,
                    "saved_at": 1_700_000_000.0,
                    "rules": {RULE.name: {"fingerprint": "x", "services": []}},
                }
            ).encode(),
            "loaded",
        ),
    ],
    # Named apart from the version, which the ids would otherwise carry.
    ids=["not json", "another format", "a newer version", "too old", "a malformed rule"],
)
async def test_a_bad_state_file_starts_empty_and_is_counted(
    tmp_path: Path, content: bytes, outcome: str
) -> None:
    path = tmp_path / "alerts.state"
    path.write_bytes(content)
    engine, t, clock = make(state_path=path)
    await engine.start()
    assert loads(t, outcome) == 1
    assert engine.firing() == [] and engine.snapshot() == {}
    stream = Stream(engine, clock)
    stream.run(60, 0.9)
    assert stream.pages() == []  # no baseline yet: no page
    await engine.shutdown(10)
    saved = json.loads(path.read_text())  # replaced by a good file
    assert (saved["format"], saved["version"]) == (FORMAT, VERSION)
    # What this build could not read (another program's, a later release's) was moved
    # aside before the first save, kept as it was, named for an operator to find.
    set_aside = outcome in ("corrupt", "foreign")
    assert _set_aside(path) == ({f"alerts.state.{outcome}": content} if set_aside else {})


def _set_aside(path: Path) -> dict[str, bytes]:
    """What was moved aside from `path`, by name up to its time, with its content."""
    return {p.name.partition("-")[0]: p.read_bytes() for p in path.parent.glob(f"{path.name}.*")}


async def test_malformed_rule_state_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "alerts.state"
    first, _, clock = make(state_path=path)
    stream = Stream(first, clock)
    stream.run(120, 0.2)
    await first.shutdown(10)
    data = json.loads(path.read_text())
    data["rules"][RULE.name]["services"]["shop"][""]["state"]["current"] = [[5, 1, 9, 0]]
    path.write_text(json.dumps(data))
    second, _, _ = make(state_path=path, clock=clock)
    await second.start()
    assert second.snapshot() == {}


async def test_missing_state_file_is_counted_and_written_at_shutdown(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "alerts.state"
    engine, t, clock = make(state_path=path)
    await engine.start()
    assert loads(t, "missing") == 1
    Stream(engine, clock).run(60, 0.2)
    await engine.shutdown(10)
    saved = json.loads(path.read_text())
    assert saved["rules"][RULE.name]["services"]["shop"][""]["firing"] is False
    assert [p.name for p in path.parent.iterdir()] == ["alerts.state"]  # no temp file left


def test_check_config_shows_a_regression_rule_with_its_defaults(tmp_path: Path) -> None:
    import subprocess
    import sys

    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(
        "alerts:\n  state_file: /tmp/x.state\n  rules:\n"
        "    - {name: reg, evaluator: local_groundedness, baseline: {window: 24h}}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "check-config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "# alert reg: defect rate up by 0.03 or more on the previous 24h and this hour of the "
        "week (sequential test, window 30m, one false page per 90d)" in result.stdout
    )
    (rule,) = yaml.safe_load(result.stdout)["alerts"]["rules"]
    assert rule["baseline"] == {
        "window": "24h",
        "min_samples": 500,
        "season": "week",
        "accept_after": "7d",
        "reference": "trailing",
    }
    # Only the keys a regression rule takes, each at its default.
    assert rule["min_samples"] == 100 and "max_defect_rate" not in rule


def test_service_gives_the_engine_its_state_file(tmp_path: Path) -> None:
    from monitor.config import Config
    from monitor.service import Service

    config = Config.model_validate(
        {
            "alerts": {
                "state_file": str(tmp_path / "alerts.state"),
                "rules": [{"name": "r", "evaluator": "local_groundedness", "baseline": {}}],
            }
        }
    )
    service = Service(config, with_receivers=False, serve_http=False)
    (engine,) = [s for s in service.stage._sinks if isinstance(s, AlertEngine)]
    assert engine._state_file is not None
    assert engine._state_file.path == tmp_path / "alerts.state"


def test_every_copy_of_a_page_reports_the_evidence_it_fired_on() -> None:
    """A page is re-sent while it fires: each copy says what the first said (its verdicts,
    rates, p-value), never a later window's, which may hold fewer verdicts or none of the
    test's evidence."""
    engine, _, clock = make()
    stream = Requests(engine, clock)
    stream.run(1800, 0.20)
    stream.run(60, 0.50)
    assert stream.pages(), "the rise pages"
    stream.run(300, 0.90)  # the rise goes on: the window moves, the page is re-sent
    copies = stream.pages()
    assert len(copies) >= 4 and {a.status for a in stream.sent} == {"firing"}
    keys = ("samples", "defect_rate", "baseline_defect_rate", "increase", "p_value")
    first = {k: copies[0].annotations[k] for k in keys}
    assert [{k: a.annotations[k] for k in keys} for a in copies] == [first] * len(copies)
    assert all(a.annotations["description"] == copies[0].annotations["description"] for a in copies)


@pytest.mark.parametrize("test", TESTS)
def test_a_resolve_says_what_the_window_shows_now(test: str) -> None:
    """The resolve on-call reads says the rate came back, with the current window's
    figures: not "rose from 0.20 to 0.20" beside the p-value and distinct requests of the
    run that paged (the sequential test's strongest run keeps them until it is reset)."""
    engine, _, clock = make(RULE.model_copy(update={"test": test}))
    stream = Requests(engine, clock)
    stream.run(900, 0.20)
    stream.run(120, 0.50)
    assert engine.firing() == [(RULE.name, "shop")]
    stream.run(180, 0.20)
    assert engine.firing() == []
    (resolved,) = [a for a in stream.sent if a.status == "resolved"]
    notes = resolved.to_alertmanager()["annotations"]
    assert isinstance(notes, dict)
    assert "rose from" not in notes["summary"], notes["summary"]
    assert notes["summary"].startswith("evaluator local_groundedness defect rate on shop came back")
    assert float(notes["p_value"]) > 0.05, notes
    assert notes["distinct_requests"] == notes["samples"], notes
    assert "p < " not in notes["description"], notes["description"]
