"""SLO rules (`slo`): burn-rate rows over a long and a short window, severities per row, the
remaining error budget, bounded windows, state across restarts, `backtest`.

The engine is driven minute by minute with a fake clock: `Stream.run` adds a minute's
verdicts at a defect rate and evaluates, as the sidecar's loop does every
`evaluation_interval_s`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.backtest import Backtest
from monitor.alerts.kinds import Entry
from monitor.alerts.kinds.forms import summary
from monitor.alerts.kinds.slo import Slo, SloState, slices_for
from monitor.alerts.rule import Origin, Rule
from monitor.alerts.state import StateFile
from monitor.component import Alert
from monitor.config import AlertRule, Config, ConfigError, alert_rule, load_config
from monitor.telemetry import Telemetry, create_telemetry

MINUTE = 60.0
# Error budget 0.2: the page row fires above a defect rate of 0.6 over 1h and 5m, the
# ticket row above 0.24 over 6h and 30m.
RULE = alert_rule(
    {
        "name": "grounded_slo",
        "evaluator": "local_groundedness",
        "slo": {
            "objective": 0.8,
            "window": "7d",
            "burn_rates": [
                {"burn_rate": 3, "long": "1h", "short": "5m", "severity": "page"},
                {"burn_rate": 1.2, "long": "6h", "short": "30m", "severity": "ticket"},
            ],
        },
    }
)


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Stream:
    """`per_minute` verdicts a minute at a defect rate, evaluated every minute; what the
    engine sends is kept in `sent`."""

    def __init__(self, engine: AlertEngine, clock: Clock, per_minute: int = 100) -> None:
        self.engine, self.clock, self.per_minute = engine, clock, per_minute
        self.sent: list[Alert] = []

    def run(self, minutes: int, rate: float, service: str = "shop") -> None:
        fails = round(self.per_minute * rate)
        for _ in range(minutes):
            self.clock.now += MINUTE
            histogram = [float(self.per_minute - fails), float(fails)]
            self.engine.count(0, Origin(service), histogram, "r1", self.clock.now)
            self.sent.extend(self.engine.evaluate())

    def story(self) -> list[tuple[str, str]]:
        return [(a.status, a.labels["severity"]) for a in self.sent if _first(a, self.sent)]


def _first(alert: Alert, sent: list[Alert]) -> bool:
    """Not a re-send: the first firing after a resolve (or the start), or a resolve."""
    i = next(k for k, a in enumerate(sent) if a is alert)
    if alert.status == "resolved":
        return True
    earlier = [a for a in sent[:i] if a.labels == alert.labels]
    return not earlier or earlier[-1].status == "resolved"


def make(
    rule: AlertRule = RULE, state: Path | None = None, clock: Clock | None = None
) -> tuple[AlertEngine, Telemetry, Clock]:
    t = create_telemetry()
    clock = clock or Clock()
    engine = AlertEngine(
        [rule],
        t,
        evaluation_interval_s=MINUTE,
        clock=clock,
        state_file=StateFile(str(state), t) if state is not None else None,
    )
    return engine, t, clock


def gauge(t: Telemetry, name: str, **labels: str) -> float | None:
    return t.registry.get_sample_value(f"rag_monitor_{name}", labels)


def state_of(engine: AlertEngine, service: str = "shop") -> Any:
    return engine.snapshot()[RULE.name]["services"][service][""]["state"]


# -- what fires, at which severity ---------------------------------------------------------


def test_healthy_stays_silent_slow_burn_tickets_fast_burn_pages() -> None:
    engine, t, clock = make()
    stream = Stream(engine, clock)
    stream.run(8 * 60, 0.15)  # within the budget: burn rate 0.75
    assert stream.sent == []
    assert gauge(t, "slo_error_budget_remaining", service="shop", rule=RULE.name) == (
        pytest.approx(0.25)
    )
    assert gauge(t, "slo_burn_rate", service="shop", rule=RULE.name, window="6h") == (
        pytest.approx(0.75)
    )
    stream.run(6 * 60, 0.26)  # burns 1.3 times as fast as the budget lasts: a ticket
    assert stream.story() == [("firing", "ticket")]
    ticket = stream.sent[0]
    assert ticket.labels["alertname"] == RULE.name and ticket.labels["severity"] == "ticket"
    notes = ticket.annotations
    assert (notes["long_window"], notes["short_window"], notes["objective"]) == ("6h", "30m", "0.8")
    assert float(notes["burn_rate"]) > 1.2 and float(notes["short_burn_rate"]) > 1.2
    assert "of the 7d error budget left" in notes["description"]
    assert "burns its error budget at" in notes["summary"] and "ticket" in notes["summary"]
    stream.run(60, 0.9)  # a collapse: the page row holds; the ticket gives way to a page
    assert stream.story() == [("firing", "ticket"), ("resolved", "ticket"), ("firing", "page")]
    resolved = stream.sent[[a.status for a in stream.sent].index("resolved")]
    assert "a page row holds" in resolved.annotations["description"]
    assert gauge(t, "alert_firing", service="shop", rule=RULE.name, severity="page", cohort="") == 1
    assert (
        gauge(t, "alert_firing", service="shop", rule=RULE.name, severity="ticket", cohort="") == 0
    )
    stream.run(7 * 60, 0.1)  # fixed: the hour's rate falls below 0.6 within minutes ...
    assert stream.story()[3:] == [
        ("resolved", "page"),
        # ... while the six hours still burn too fast, and the half hour too, for a while
        ("firing", "ticket"),
        ("resolved", "ticket"),
    ]
    assert engine.firing() == []


def test_a_rate_below_every_row_never_fires_however_long() -> None:
    engine, t, clock = make()
    stream = Stream(engine, clock)
    stream.run(3 * 24 * 60, 0.23)  # burn 1.15, under the ticket's 1.2
    assert stream.sent == []
    remaining = gauge(t, "slo_error_budget_remaining", service="shop", rule=RULE.name)
    assert remaining == pytest.approx(1 - 0.23 / 0.2)  # overspent, said, not paged


def test_a_row_waits_until_it_has_seen_its_long_window() -> None:
    engine, _, clock = make()
    stream = Stream(engine, clock)
    stream.run(59, 1.0)  # an hour's rate would be far above: but no hour was seen yet
    assert stream.sent == []
    stream.run(2, 1.0)
    assert stream.story() == [("firing", "page")]


def test_a_window_that_held_nothing_is_seen_whole_again_before_it_judges() -> None:
    """A silence longer than a row's long window (an outage, a restart after one) empties
    it: the row waits for a whole window again, as at the start."""
    engine, _, clock = make()
    stream = Stream(engine, clock)
    stream.run(2 * 60, 0.1)
    for _ in range(3 * 60):  # three hours without a verdict
        clock.now += MINUTE
        engine.evaluate()
    stream.run(55, 1.0)  # five minutes would be enough for a window seen whole
    assert stream.sent == []
    stream.run(6, 1.0)
    assert stream.story() == [("firing", "page")]


def test_the_short_window_needs_min_samples() -> None:
    engine, _, clock = make(RULE.model_copy(update={"min_samples": 700}))
    stream = Stream(engine, clock)  # 100 a minute: 600 at most in the 5m window (its
    # newest five minutes and the slice it began in), 3,000 in 30m
    stream.run(6 * 60 + 5, 1.0)
    assert stream.story() == [("firing", "ticket")]  # the page row's 5m window is too thin


def test_a_firing_alert_holds_while_its_long_window_burns() -> None:
    """The short window starts an alert; the long window ends it: a dip of the short
    window (a quiet night in a drift) does not resolve a ticket whose six hours still burn
    too fast, and every alert lasts at least its short window."""
    engine, _, clock = make()
    stream = Stream(engine, clock)
    stream.run(6 * 60 + 5, 0.30)
    assert stream.story() == [("firing", "ticket")]
    stream.run(45, 0.10)  # the 30m window is clean, the 6h one still above 0.24
    assert stream.story() == [("firing", "ticket")]
    stream.run(5 * 60, 0.10)
    assert stream.story() == [("firing", "ticket"), ("resolved", "ticket")]


def test_each_service_has_its_own_budget() -> None:
    engine, t, clock = make()
    stream = Stream(engine, clock)
    for _ in range(2 * 60):
        stream.run(1, 0.9, service="a")
        stream.run(1, 0.1, service="b")
    assert engine.firing() == [(RULE.name, "a")]
    assert gauge(t, "slo_error_budget_remaining", service="b", rule=RULE.name) == pytest.approx(0.5)


# -- state: bounded, across restarts ----------------------------------------------------------


def test_windows_stay_bounded_whatever_the_traffic() -> None:
    rule = alert_rule({"name": "r", "evaluator": "e", "slo": {"objective": 0.7, "window": "28d"}})
    kind = Slo(Rule.of(rule, "90d", {}), MINUTE)
    state: SloState = kind.new_state()
    now = 1_700_000_000.0
    for _ in range(35 * 24 * 12):  # 35 days, every 5 minutes, a thousand verdicts each
        now += 300
        kind.add(state, [700.0, 300.0], None, now)
        kind.judge({"": Entry(state)}, now)  # as the engine does every evaluation
    held = {length: len(window.slices()) for length, window in state.windows.items()}
    assert set(held) == {300.0, 1800.0, 3600.0, 6 * 3600.0, 3 * 86400.0, 28 * 86400.0}
    for length, slices in held.items():
        assert slices <= slices_for(length) + 1, length
    assert slices_for(28 * 86400.0) == 672  # hourly


async def test_state_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "alerts.state"
    first, t, clock = make(state=path)
    await first.start()
    stream = Stream(first, clock)
    stream.run(7 * 60, 0.30)
    assert first.firing() == [(RULE.name, "shop")]
    remaining = gauge(t, "slo_error_budget_remaining", service="shop", rule=RULE.name)
    await first.shutdown(10)
    saved = json.loads(path.read_text())["rules"][RULE.name]["services"]["shop"][""]
    assert saved["firing"] is True and saved["state"]["severity"] == "ticket"
    assert set(saved["state"]["windows"]) == {"300", "1800", "3600", "21600", "604800"}

    clock.now += 120  # two minutes down
    second, t2, _ = make(state=path, clock=clock)
    await second.start()
    assert second.firing() == [(RULE.name, "shop")]
    again = Stream(second, clock)
    again.run(1, 0.30)
    # Still firing, not paged anew; the budget kept its 7 hours.
    assert again.sent == [] or all(a.status == "firing" for a in again.sent)
    assert gauge(t2, "slo_error_budget_remaining", service="shop", rule=RULE.name) == (
        pytest.approx(remaining, abs=0.01)
    )
    # The rows judge at once: their windows were seen whole before the restart.
    again.run(60, 0.9)
    assert again.story()[-2:] == [("resolved", "ticket"), ("firing", "page")]
    await second.shutdown(10)


def test_a_row_added_after_a_restart_counts_its_window_from_then() -> None:
    engine, _, clock = make()
    stream = Stream(engine, clock)
    stream.run(3 * 60, 0.9)
    assert stream.story() == [("firing", "page")]
    saved = engine.snapshot()
    slo = RULE.slo
    assert slo is not None
    wider = RULE.model_copy(
        update={
            "slo": slo.model_copy(
                update={
                    "burn_rates": [
                        *slo.burn_rates,
                        slo.burn_rates[1].model_copy(update={"long": "2d", "short": "1h"}),
                    ]
                }
            )
        }
    )
    second, _, _ = make(wider, clock=clock)
    second.restore(saved)
    state = state_of(second)
    assert state["windows"]["172800"]["since"] is None  # not seen yet
    assert state["windows"]["3600"]["since"] is not None


@pytest.mark.parametrize(
    "change",
    [
        {"since": "yesterday"},
        {"since": float("nan")},
        {"slices": [[5, 1, 9, 0]]},  # more defects than verdicts
    ],
)
def test_a_malformed_slo_state_is_left_out_alone(change: dict[str, Any]) -> None:
    engine, _, clock = make()
    Stream(engine, clock).run(10, 0.2)
    Stream(engine, clock).run(10, 0.2, service="web")
    saved = engine.snapshot()
    saved[RULE.name]["services"]["shop"][""]["state"]["windows"]["3600"].update(change)
    second, _, _ = make(clock=clock)
    second.restore(json.loads(json.dumps(saved)))
    assert set(second.snapshot()[RULE.name]["services"]) == {"web"}


# -- config and check-config --------------------------------------------------------------


def test_the_default_rows_are_the_workbooks_and_check_config_says_which_can_fire() -> None:
    rule = alert_rule({"name": "r", "evaluator": "e", "slo": {"objective": 0.7}})
    assert rule.window == "28d" and rule.min_samples == 30
    assert rule.slo is not None
    rows = [(r.budget, r.long, r.short, r.severity) for r in rule.slo.burn_rates]
    assert rows == [
        (0.02, "1h", "5m", "page"),
        (0.05, "6h", "30m", "page"),
        (0.1, "3d", "6h", "ticket"),
    ]
    assert [r.factor(28 * 86400) for r in rule.slo.burn_rates] == pytest.approx(
        [13.44, 5.6, 0.9333], abs=1e-4
    )
    text = summary(rule, "90d")
    assert text.startswith("alert r: SLO 0.7 over 28d (error budget 0.3): page at burn rate 13.4")
    assert "(defect rate > 4.032: never)" in text and "(defect rate > 1.68: never)" in text
    assert "ticket at burn rate 0.933 over 3d and 6h (defect rate > 0.28)" in text


@pytest.mark.parametrize(
    ("slo", "extra", "problem"),
    [
        (
            "{objective: 0.5, burn_rates: [{budget: 0.02, long: 1h, short: 5m}]}",
            "",
            "no row can ever fire",
        ),
        ("{objective: 1}", "", "slo.objective"),
        (
            "{objective: 0.7, burn_rates: [{budget: 0.1, burn_rate: 1, long: 1h, short: 5m}]}",
            "",
            "exactly one of budget or burn_rate",
        ),
        (
            "{objective: 0.7, burn_rates: [{burn_rate: 1, long: 1h, short: 1h}]}",
            "",
            "must be shorter than long",
        ),
        (
            "{objective: 0.7, window: 1d, burn_rates: [{burn_rate: 1, long: 3d, short: 6h}]}",
            "",
            "longer than the SLO's window",
        ),
        ("{objective: 0.7, burn_rates: []}", "", "at least one row"),
        ("{objective: 0.7}", ", window: 1h", "an SLO rule's window is its slo.window"),
        ("{objective: 0.7}", ", min_increase: 0.03", "not on a rise"),
        ("{objective: 0.7}", ", false_page_every: 30d", "thresholds, not a test"),
        ("{objective: 0.7}", ", boost: {sample_rate: 0.5}", "only a regression or cohort rule"),
        ("{objective: 0.7}", ", max_defect_rate: 0.1", "exactly one of max_defect_rate"),
    ],
)
def test_check_config_rejects_bad_slo_rules(
    tmp_path: Path, slo: str, extra: str, problem: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        f"alerts: {{rules: [{{name: r, evaluator: local_groundedness, slo: {slo}{extra}}}]}}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert problem in str(caught.value)
    assert all(line.startswith("alerts.rules.0") for line in caught.value.problems)


# -- backtest -----------------------------------------------------------------------------


def test_backtest_replays_an_slo_rule_on_simulated_time() -> None:
    """A results-file month in an afternoon: a day at 0.15, then a day at 0.3 — a ticket
    once the six-hour window burns too fast — and nothing sent anywhere."""
    config = Config.model_validate(
        {"alerts": {"rules": [RULE.model_dump(exclude_unset=True)], "evaluation_interval_s": 60}}
    )
    start = 1_767_225_600.0
    rows = []
    for minute in range(2 * 24 * 60):
        rate = 0.15 if minute < 24 * 60 else 0.30
        fails = round(20 * rate)
        rows.append(
            (
                f"row {minute}",
                {
                    "time": start + minute * 60,
                    "service": "shop",
                    "evaluator": "local_groundedness",
                    "passes": 20 - fails,
                    "fails": fails,
                },
            )
        )
    backtest = Backtest(config)
    events = list(backtest.run(rows))
    assert [(e.status, e.alert.labels["severity"]) for e in events] == [("firing", "ticket")]
    hours = (events[0].time - start) / 3600 - 24
    assert 3 < hours < 6  # the six hours' rate passes 0.24 after 3.6 hours of 0.30
    assert backtest.summary.pages == {RULE.name: 1}
    assert events[0].as_json()["labels"]["severity"] == "ticket"


def test_the_fleets_counters_feed_the_same_rule() -> None:
    """With `alerts.fleet` the verdicts come as the fleet's counts (`add_counts`)."""
    engine, t, clock = make()
    for _ in range(61):
        clock.now += MINUTE
        engine.add_counts(RULE.name, "shop", "", [10.0, 90.0])
        engine.evaluate()
    assert engine.firing() == [(RULE.name, "shop")]
    assert gauge(t, "slo_burn_rate", service="shop", rule=RULE.name, window="1h") == (
        pytest.approx(4.5)
    )


def test_rag_monitor_backtest_prints_the_slo_pages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rag-monitor backtest FILE --config C --json`: a verdict file of seven hours, a
    collapse in its last hour, paged at the page row's severity."""
    from monitor.__main__ import main

    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"alerts": {"rules": [RULE.model_dump(exclude_unset=True)]}}))
    start = 1_767_225_600.0
    with (tmp_path / "verdicts.jsonl").open("w") as out:
        for minute in range(7 * 60):
            fails = 90 if minute >= 6 * 60 else 10
            row = {
                "time": start + minute * 60,
                "service": "shop",
                "evaluator": "local_groundedness",
                "passes": 100 - fails,
                "fails": fails,
            }
            out.write(json.dumps(row) + "\n")
    code = main(["backtest", str(tmp_path / "verdicts.jsonl"), "--config", str(config), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    events = [json.loads(line) for line in captured.out.splitlines()]
    assert [(e["status"], e["labels"]["severity"]) for e in events] == [("firing", "page")]
    assert events[0]["annotations"]["long_window"] == "1h"
    assert "pages: grounded_slo 1" in captured.err
