"""The alerting end-to-end tests' scenarios on simulated time, for the scorecard's
`sidecar tests` row: the statistics of what those tests wire up (how soon a rise pages, no
page on a healthy or bursty stream, a changeover quiet) are judged here, over seeded runs,
through `rag-monitor backtest`'s code (`monitor.alerts.backtest.Backtest`) with the rules,
evaluation intervals and rates of a real sidecar fed paced test traffic; the end-to-end
tests keep the wiring (a page reaches Alertmanager or a webhook with its labels and
annotations, resolves, restarts, replicas), driven by rises that page at once.

Rules (`RULES`):

- `compressed` (the fresh-start tests' scenario, `tests/alerts/fresh_e2e.py`, at the
  statistical bar): window 30s, baseline 3m of 240 verdicts, a false page an hour, an
  evaluation every second; fed 8 requests a second at 0.20.
- `regression` (`tests/alerts/test_alerts_regression_e2e.py`'s): window 30s, baseline 3m,
  every other setting at its default (min_samples 100 and 500, one false page per 90 days,
  an evaluation every 15 s); fed 24 a second at 0.20.
- `fleet` (`harness/rag_service.FLEET_RULE`, `tests/alerts/test_alerts_fleet_e2e.py`'s): the
  fleet's verdicts, read from Prometheus every second, summed per second: 12 a second at
  0.10.
- `cohorts` (`tests/alerts/test_alerts_cohorts_e2e.py`'s): `cohorts: {by: version}`, every
  other key at its default, an evaluation every second; two versions at 0.20.

Every stream starts with no history (a fresh start), as the tests' sidecars did; verdicts
are independent (each request its own, a Poisson process), but for a burst of identical
requests (one fingerprint, as the sidecar gives one question, context and answer sent
again).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from harness.production_streams import EVALUATOR, START
from harness.rag_service import FLEET_RULE
from harness.simulated_alerts import RULE, SERVICE, information_limit_s
from monitor.config import parse_duration

RULES: dict[str, tuple[dict[str, Any], float]] = {
    # The rule, and its evaluation interval in seconds.
    "compressed": (
        {
            "evaluator": EVALUATOR,
            "window": "30s",
            "baseline": {"window": "3m", "min_samples": 240},
            "false_page_every": "1h",
        },
        1.0,
    ),
    "regression": (
        {"evaluator": EVALUATOR, "window": "30s", "baseline": {"window": "3m"}},
        15.0,
    ),
    "fleet": (
        {k: v for k, v in FLEET_RULE.items() if k != "name"},
        1.0,
    ),
    "cohorts": ({"evaluator": EVALUATOR, "cohorts": {"by": "version"}}, 1.0),
}
# A rule's false page budget where it names none: the default.
DEFAULT_BUDGET = "90d"
HEALTHY = 0.20
RISE = 2.5
# A run without a page this many limits after the rise is not paged.
NOT_PAGED_LIMITS = 30
# The healthy cells' span of each start (a trial).
HEALTHY_S = 1200.0
# What the stricter revision of the changeover misreads of the faithful answers (7 of the
# 36 the tests' service cycles through, harness/rag_answers.py).
MISREAD = 7 / 36


def config(rule: str) -> Any:
    from monitor.config import Config

    body, interval = RULES[rule]
    return Config.model_validate(
        {
            "alerts": {
                "evaluation_interval_s": interval,
                "false_page_every": DEFAULT_BUDGET,
                "rules": [{"name": RULE, **body}],
            }
        }
    )


def budget_s(rule: str) -> float:
    return parse_duration(str(RULES[rule][0].get("false_page_every", DEFAULT_BUDGET)))


@dataclass(frozen=True)
class Feed:
    """One stream: `rate` requests a second failing at `share` (times `factor` from
    `rise_s` on), for `span_s`; each request read by revision `revision` until
    `switch_s`, then by `"b"` (which also fails `MISREAD` of the faithful ones) after a
    gap of `gap_s` (a restart); `burst` identical failing requests at `burst_rate` a
    second from `burst_s`; `versions` splits the requests evenly across versions, the
    rise on the last one only; `per_second` sums each second's verdicts into one row (a
    fleet read)."""

    rate: float
    span_s: float
    share: float = HEALTHY
    factor: float = RISE
    rise_s: float = math.inf
    revision: str = "a"
    switch_s: float = math.inf
    gap_s: float = 0.0
    burst: int = 0
    burst_s: float = 0.0
    burst_rate: float = 24.0
    versions: tuple[str, ...] = ()
    per_second: bool = False


def rows(feed: Feed, seed: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """`feed`'s verdict rows in time order, from `seed`."""
    rng = np.random.default_rng([seed % 2**63, 11])
    burst = [feed.burst_s + i / feed.burst_rate for i in range(feed.burst)]
    if feed.per_second:
        yield from _summed(feed, rng)
        return
    t, i = 0.0, 0
    while True:
        t += float(rng.exponential(1.0 / feed.rate))
        if t >= feed.switch_s and t < feed.switch_s + feed.gap_s:
            t = feed.switch_s + feed.gap_s  # the process restarting takes nothing in
        if t >= feed.span_s:
            return
        while burst and burst[0] <= t:
            at = burst.pop(0)
            row = _row(at, 0, 1, feed.revision if at < feed.switch_s else "b")
            yield f"burst{len(burst)}", {**row, "fingerprint": "burst-request"}
        i += 1
        version = feed.versions[i % len(feed.versions)] if feed.versions else None
        risen = t >= feed.rise_s and (version is None or version == feed.versions[-1])
        bad = bool(rng.uniform() < feed.share * (feed.factor if risen else 1.0))
        revision = feed.revision
        if t >= feed.switch_s:
            revision = "b"
            bad = bad or bool(rng.uniform() < MISREAD)
        row = _row(t, 1 - int(bad), int(bad), revision)
        if version is not None:
            row["version"] = version
        yield f"v{i}", row


def _summed(feed: Feed, rng: np.random.Generator) -> Iterator[tuple[str, dict[str, Any]]]:
    for second in range(round(feed.span_s)):
        share = feed.share * (feed.factor if second >= feed.rise_s else 1.0)
        n = int(rng.poisson(feed.rate))
        if n:
            k = int(rng.binomial(n, share))
            yield f"s{second}", _row(second + 1.0, n - k, k, feed.revision)


def _row(t: float, passes: int, fails: int, revision: str) -> dict[str, Any]:
    return {
        "time": START + t,
        "service": SERVICE,
        "evaluator": EVALUATOR,
        "revision": revision,
        "passes": passes,
        "fails": fails,
    }


def replay(rule: str, feed: Feed, seed: int, stop_at_page: bool = True) -> list[Any]:
    """`feed`'s pages under `rule` (fresh: no history): each (seconds from the start, the
    alert)."""
    from monitor.alerts.backtest import Backtest

    backtest = Backtest(config(rule))
    pages = []
    for event in backtest.run(rows(feed, seed)):
        if event.status == "firing" and event.alert.rule == RULE:
            pages.append((event.time - START, event.alert))
            if stop_at_page:
                break
    return pages


def limit_s(rule: str, feed: Feed) -> float:
    """The information limit of the rise as the evaluator of record reads it."""
    p0, p1 = feed.share, feed.share * feed.factor
    if feed.rise_s >= feed.switch_s:
        p0, p1 = p0 + (1 - p0) * MISREAD, p1 + (1 - p1) * MISREAD
    rate = feed.rate / len(feed.versions) if feed.versions else feed.rate
    return information_limit_s(p0, p1, rate, budget_s(rule))


def timed_trial(rule: str, feed: Feed, seed: int) -> dict[str, float]:
    """A run with a rise: its page's time after the rise over the limit (inf: none within
    `NOT_PAGED_LIMITS` of them), whether it paged before the rise, the expectation the
    page states, and (with versions) whether it paged a version that did not rise."""
    limit = limit_s(rule, feed)
    span = min(feed.span_s, feed.rise_s + NOT_PAGED_LIMITS * limit)
    run = replace(feed, span_s=span)
    pages = replay(rule, run, seed, stop_at_page=not feed.versions)
    out = {"ratio": math.inf, "early": 0.0, "expected": math.nan}
    if feed.versions:
        others = [a for _, a in pages if a.labels.get("cohort") != feed.versions[-1]]
        pages = [(t, a) for t, a in pages if a.labels.get("cohort") == feed.versions[-1]]
        out["other"] = float(len(others))
    if not pages:
        return out
    at, alert = pages[0]
    if at < feed.rise_s:
        return {**out, "ratio": math.nan, "early": 1.0}
    notes = alert.annotations
    # What the page judged against: the level, or a cohort's rest.
    expected = float(notes.get("baseline_defect_rate") or notes["rest_defect_rate"])
    return {**out, "ratio": (at - feed.rise_s) / limit, "expected": expected}


def healthy_trial(rule: str, feed: Feed, seed: int) -> dict[str, float]:
    """A fresh start of `feed` without a rise: its false pages."""
    return {"pages": float(len(replay(rule, feed, seed, stop_at_page=False)))}


# The cells: the rule, the feed, and whether a rise is timed.
BURST_AT_S = 45.0  # once the compressed rule can judge (its baseline's 240 verdicts)
RISE_AT_S = 200.0  # the level holding most of its 3m
SWITCH_AT_S = 45.0
SWITCH_GAP_S = 5.0
# The cells' names, by what the tests call them.
NAMES: dict[str, str] = {
    "burst": "compressed rule, 0.20 at 8/s, a burst of 240 identical failing requests at 45 s, "
    "x2.5 from 200 s",
    "burst healthy": "compressed rule, healthy 0.20 at 8/s with the burst, 20 min",
    "changeover": "compressed rule, a switch at 45 s to a revision reading 0.36, x2.5 2 min after",
    "changeover healthy": "compressed rule, healthy through a switch at 45 s, 20 min",
    "regression": "default settings on 30s / 3m windows, 0.20 at 24/s, x2.5 from 90 s",
    "regression healthy": "default settings on 30s / 3m windows, healthy 0.20 at 24/s, 20 min",
    "fleet healthy": "the fleet rule, healthy 0.10 at 12/s read per second, 20 min",
    "cohorts": "cohorts by version, 0.20 at 2/s on two versions, v2 x2.5 from its first request",
    "cohorts healthy": "cohorts by version, healthy 0.20 at 2/s on two versions, 20 min",
}
CELLS: dict[str, tuple[str, Feed, bool]] = {
    NAMES["burst"]: (
        "compressed",
        Feed(rate=8.0, span_s=math.inf, rise_s=RISE_AT_S, burst=240, burst_s=BURST_AT_S),
        True,
    ),
    NAMES["burst healthy"]: (
        "compressed",
        Feed(rate=8.0, span_s=HEALTHY_S, burst=240, burst_s=BURST_AT_S),
        False,
    ),
    NAMES["changeover"]: (
        "compressed",
        Feed(
            rate=8.0,
            span_s=math.inf,
            switch_s=SWITCH_AT_S,
            gap_s=SWITCH_GAP_S,
            rise_s=SWITCH_AT_S + SWITCH_GAP_S + 120.0,
        ),
        True,
    ),
    NAMES["changeover healthy"]: (
        "compressed",
        Feed(rate=8.0, span_s=HEALTHY_S, switch_s=SWITCH_AT_S, gap_s=SWITCH_GAP_S),
        False,
    ),
    NAMES["regression"]: (
        "regression",
        Feed(rate=24.0, span_s=math.inf, rise_s=90.0),
        True,
    ),
    NAMES["regression healthy"]: (
        "regression",
        Feed(rate=24.0, span_s=HEALTHY_S),
        False,
    ),
    NAMES["fleet healthy"]: (
        "fleet",
        Feed(rate=12.0, span_s=HEALTHY_S, share=0.10, per_second=True),
        False,
    ),
    NAMES["cohorts"]: (
        "cohorts",
        Feed(rate=2.0, span_s=math.inf, rise_s=0.0, versions=("v1", "v2")),
        True,
    ),
    NAMES["cohorts healthy"]: (
        "cohorts",
        Feed(rate=2.0, span_s=HEALTHY_S, versions=("v1", "v2")),
        False,
    ),
}


def cell_trial(name: str, seed: int) -> dict[str, float]:
    """One run of the cell `name` (`CELLS`)."""
    rule, feed, timed = CELLS[name]
    return (timed_trial if timed else healthy_trial)(rule, feed, seed)
