"""The engine of the regression scorecard (`bench/scorecard.py`) on simulated time: a
service's history (`warmed`: four weeks, or the days a row asks for), then rows replayed through
`rag-monitor backtest`'s code (`replay`), and the verdict rows of independent streams."""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from harness.production_streams import (
    DAY_S,
    EVALUATOR,
    START,
    StreamSpec,
    defect_rate,
    stream,
    traffic,
)

BUDGET = "90d"
INTERVAL_S = 15.0
HOUR_S = 3600.0
WARM_DAYS = 28
# The warm-up's last hours come as rows (conversations in them, where the stream has ids,
# at 1 a second at most): enough hours for the correlation within conversations to be
# measured.
ROWS_WARM_S = 13 * HOUR_S
SERVICE = "svc-0"
RULE = "regression"
DEFAULT_RULE: dict[str, Any] = {"evaluator": EVALUATOR, "baseline": {}}


def config(rule: dict[str, Any]) -> Any:
    from monitor.config import Config

    return Config.model_validate(
        {
            "alerts": {
                "evaluation_interval_s": INTERVAL_S,
                "false_page_every": BUDGET,
                "rules": [{"name": RULE, **rule}],
            }
        }
    )


@functools.cache
def warmed(spec: StreamSpec, days: int = WARM_DAYS) -> dict[str, Any]:
    """The engine's state after `days` of `spec`'s healthy time before its start (see the
    module docstring), from `spec.seed`: one warm-up per stream, shared by its runs."""
    healthy = replace(spec, changes=(), days=ROWS_WARM_S / DAY_S, seed=spec.seed + 1)
    saved = counted(healthy, spec.seed, days * DAY_S - ROWS_WARM_S)
    # A busier stream's last hours at 1 a second: as many conversations as the correlation
    # needs, at a tenth of the rows.
    healthy = replace(healthy, rate=min(healthy.rate, 1.0))
    if not spec.ids:
        return _hours_as_counts(healthy, spec.seed, saved)
    rows = (
        (w, {**r, "time": r["time"] - ROWS_WARM_S, "conversation": "w" + r["conversation"]})
        for w, r in stream(healthy)
        if "conversation" in r
    )
    from monitor.alerts.backtest import Backtest

    backtest = Backtest(config(DEFAULT_RULE))
    backtest.engine.restore(saved)
    for _ in backtest.run(rows):
        pass
    return backtest.engine.snapshot()


def _hours_as_counts(spec: StreamSpec, seed: int, saved: dict[str, Any]) -> dict[str, Any]:
    """The last `ROWS_WARM_S` as hourly counts too, for streams whose verdicts carry no ids
    (no conversation to measure)."""
    return counted(spec, seed + 1, ROWS_WARM_S, saved)


def counted(
    spec: StreamSpec,
    seed: int,
    span_s: float,
    saved: dict[str, Any] | None = None,
    rule: dict[str, Any] = DEFAULT_RULE,
    end: float | None = None,
) -> dict[str, Any]:
    """The engine's state after `span_s` of `spec`'s healthy hours fed as hourly counts,
    ending at `end` (by default `ROWS_WARM_S` before its start, or at it going on from
    `saved`)."""
    from monitor.alerts import AlertEngine
    from monitor.telemetry import create_telemetry

    if end is None:
        end = START if saved is not None else START - ROWS_WARM_S
    clock = [end - span_s]
    engine = AlertEngine.from_config(config(rule), create_telemetry(), clock=lambda: clock[0])
    if saved is not None:
        engine.restore(saved)
    rng = np.random.default_rng([seed % 2**63, 7])
    design = spec.design_effect
    healthy = replace(spec, changes=())
    for hour in range(round(span_s / HOUR_S)):
        t = np.array([clock[0] - START + HOUR_S / 2])
        p = float(defect_rate(healthy, t)[0][0])
        n = int(rng.poisson(spec.rate * float(traffic(spec, t)[0]) * HOUR_S))
        if design > 1 and n:
            p = min(
                0.999, max(0.001, p + rng.normal(0.0, math.sqrt((design - 1) * p * (1 - p) / n)))
            )
        k = int(rng.binomial(n, p))
        engine.add_counts(RULE, SERVICE, "", [float(n - k), float(k)], spec.revision)
        clock[0] += HOUR_S
        if engine.evaluation_due or (hour + 1) % 24 == 0:
            engine.evaluate()
    engine.evaluate()
    return engine.snapshot()


@dataclass
class Run:
    """What one replay saw: its pages (time, annotations), when it stopped, and the
    expectation the rule judged against then (nan: none)."""

    pages: list[tuple[float, dict[str, str]]]
    end: float
    expected: float = math.nan


def replay(
    rows: Iterator[tuple[str, dict[str, Any]]],
    saved: dict[str, Any] | None,
    rule: dict[str, Any] = DEFAULT_RULE,
    stop_at_page: bool = True,
) -> Run:
    """`rows` through a backtest of `rule`, restored from `saved` (None: a fresh start)."""
    from monitor.alerts.backtest import Backtest

    backtest = Backtest(config(rule))
    if saved is not None:
        backtest.engine.restore(saved)
    pages: list[tuple[float, dict[str, str]]] = []
    end = START
    for event in backtest.run(rows):
        end = event.time
        if event.status == "firing" and event.alert.rule == RULE:
            pages.append((event.time, dict(event.alert.annotations)))
            if stop_at_page:
                break
    return Run(pages, end, _expected(backtest.engine))


def _expected(engine: Any) -> float:
    """The mean the engine's one regression entry judges against now (nan: none)."""
    for entry in engine._entries.values():
        judging = getattr(entry.state, "judging", None)
        if judging is not None and judging.expected is not None:
            return float(judging.expected.mean)
    return math.nan


def independent(
    p0: float, rate: float, seed: int, rise_at: float, factor: float, span_s: float
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Verdicts without ids, a Poisson process at `rate` from `START`, each on its own row,
    failing at `p0` and at `p0 x factor` from `rise_at` seconds on."""
    rng = np.random.default_rng([seed % 2**63, 1])
    t = 0.0
    i = 0
    while t < span_s:
        t += float(rng.exponential(1.0 / rate))
        p = p0 * factor if t >= rise_at else p0
        failed = int(rng.uniform() < p)
        i += 1
        yield f"v{i}", _row(t, 1 - failed, failed)


def summed(
    p0: float, rate: float, seed: int, span_s: float
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Healthy independent verdicts without ids, summed per second (Poisson counts)."""
    rng = np.random.default_rng([seed % 2**63, 2])
    for second in range(round(span_s)):
        n = int(rng.poisson(rate))
        if n:
            k = int(rng.binomial(n, p0))
            yield f"s{second}", _row(second + 1.0, n - k, k)


def _row(t: float, passes: int, fails: int) -> dict[str, Any]:
    return {
        "time": START + t,
        "service": SERVICE,
        "evaluator": EVALUATOR,
        "revision": "r1",
        "passes": passes,
        "fails": fails,
    }


def until(
    rows: Iterator[tuple[str, dict[str, Any]]], end: float
) -> Iterator[tuple[str, dict[str, Any]]]:
    for where, row in rows:
        if row["time"] > START + end:
            return
        yield where, row


def shaped(spec: StreamSpec) -> StreamSpec:
    return replace(spec, service_prefix="svc", services=1)


def run_seed(*parts: object) -> int:
    """A seed of its own for each run, the same whatever process runs it."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


def kl(p1: float, p0: float) -> float:
    return p1 * math.log(p1 / p0) + (1 - p1) * math.log((1 - p1) / (1 - p0))


def information_limit_s(p0: float, p1: float, rate: float, budget_s: float) -> float:
    """Seconds of verdicts a test that knew both rates would need at one false page per
    `budget_s`: ln(verdicts per budget) over the divergence per verdict."""
    return math.log(rate * budget_s) / kl(p1, p0) / rate
