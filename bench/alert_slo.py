"""The SLO rule of deploy/monitor.yaml on production-shaped streams: slow drifts and healthy
months, through `rag-monitor backtest`'s engine.

    python bench/alert_slo.py [--rates 1 10] [--services 4] [--days 28] [--interval 60]
        [--seed 1] [--write-docs]

The rule is `groundedness_slo` as deploy/monitor.yaml writes it (its objective, window and
burn-rate rows), replayed by `monitor.alerts.backtest.Backtest` on simulated time, evaluated
every `--interval` seconds (the sidecar's default is 15; a day-scale rule does not change
within a minute). Streams come from `harness/production_streams.py`: conversations of 5 to 20
turns with an intraclass correlation, a daily cycle of the defect rate with traffic that
swings tenfold between night and the 14:00 peak, and rows of 15 verdicts on average (the SLO counts
verdicts, so the windows hold what they would hold row by row).

1. **Slow drift**: the defect rate rises linearly from 0.20 to 0.30 over 7 days (+50 %),
   starting on day 4 (the 3-day row has seen a whole window by then); the hours from the
   moment the rise reaches `min_increase` (0.03, 2.1 days in) to the rule's first alert,
   per service (negative: before it), median and worst of `--services`, and the severity of
   the first alert. The target: within 24 h, at 1 and 10 verdicts/s.
2. **Healthy months**: `--days` of each stream at its usual rate (mean 0.20), `--services`
   services each: the rule's alerts (the target: none), the highest burn rate over a day
   and over three days, and the share of the error budget the month spent (at most 1: the
   budget the rule states). The last stream (a weekly cycle on top) is one the rule's
   parameters were not chosen on.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import bench_docs, bench_smoke
from harness.deploy_examples import monitor_with_slo
from harness.production_streams import DAY_S, START, Change, StreamSpec, stream
from monitor.alerts.backtest import Backtest
from monitor.config import Config, RegressionRule

REPO = Path(__file__).resolve().parent.parent
RULE = "groundedness_slo"
MEAN = 0.20
DRIFT_TO = 0.30
DRIFT_DAYS = 7.0
DRIFT_AT = 4.0
# The regression rule's smallest rise worth a page, at its default.
MIN_INCREASE = RegressionRule.default("min_increase")
# After the rise reaches min_increase, how long the drift runs are watched.
WATCH_DAYS = 3.0


@dataclass(frozen=True)
class Shape:
    name: str
    icc: float
    cycle: float = 0.0
    traffic_ratio: float = 1.0
    week_cycle: float = 0.0


SHAPES = (
    Shape("conversations (ICC 0.17), flat rate", 0.17),
    Shape("daily cycle ±0.03, traffic 10x, ICC 0.17", 0.17, 0.03, 10.0),
    Shape("daily cycle ±0.03, traffic 10x, ICC 0.3", 0.3, 0.03, 10.0),
)
HELD_OUT = Shape("+ weekly cycle ±0.01 (held out)", 0.3, 0.03, 10.0, 0.01)


def slo_config(interval_s: float) -> Config:
    """deploy/monitor.yaml's SLO rule (shipped commented out) alone, evaluated every
    `interval_s`."""
    deployed = Config.model_validate(yaml.safe_load(monitor_with_slo()))
    (rule,) = [r for r in deployed.alerts.rules if r.name == RULE]
    return Config.model_validate(
        {
            "alerts": {
                "rules": [rule.model_dump(exclude_unset=True)],
                "evaluation_interval_s": interval_s,
            }
        }
    )


@dataclass
class Run:
    """What one backtest over one stream showed, per service."""

    first: dict[str, tuple[float, str]] = field(default_factory=dict)  # day, severity
    alerts: dict[str, int] = field(default_factory=dict)  # by severity
    verdicts: dict[str, float] = field(default_factory=dict)
    defects: dict[str, float] = field(default_factory=dict)
    # Per service and hour: [verdicts, defects].
    hours: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    seconds: float = 0.0

    def highest_rate(self, hours: int, after_day: float) -> float:
        """The highest defect rate over `hours` consecutive hours ending after `after_day`,
        over the services."""
        best = 0.0
        for by_hour in self.hours.values():
            last = max(by_hour)
            n = np.zeros(last + 1)
            d = np.zeros(last + 1)
            for hour, (verdicts, defects) in by_hour.items():
                n[hour], d[hour] = verdicts, defects
            cn = np.concatenate([[0.0], np.cumsum(n)])
            cd = np.concatenate([[0.0], np.cumsum(d)])
            ends = np.arange(max(hours, int(after_day * 24)), last + 1)
            if ends.size:
                rates = (cd[ends] - cd[ends - hours]) / np.maximum(cn[ends] - cn[ends - hours], 1)
                best = max(best, float(rates.max()))
        return best


def replay(config: Config, spec: StreamSpec) -> Run:
    out = Run()
    started = time.perf_counter()
    backtest = Backtest(config)
    for event in backtest.run(_counted(stream(spec), out)):
        if event.status != "firing":
            continue
        severity = event.alert.labels["severity"]
        out.alerts[severity] = out.alerts.get(severity, 0) + 1
        day = (event.time - START) / DAY_S
        out.first.setdefault(event.alert.service, (day, severity))
    out.seconds = time.perf_counter() - started
    return out


def _counted(rows: Iterator[tuple[str, dict[str, Any]]], run: Run) -> Iterator[tuple[str, Any]]:
    for where, row in rows:
        service = row["service"]
        run.verdicts[service] = run.verdicts.get(service, 0) + row["passes"] + row["fails"]
        run.defects[service] = run.defects.get(service, 0) + row["fails"]
        hour = int((row["time"] - START) // 3600)
        counts = run.hours.setdefault(service, {}).setdefault(hour, [0.0, 0.0])
        counts[0] += row["passes"] + row["fails"]
        counts[1] += row["fails"]
        yield where, row


def spec(
    shape: Shape, rate: float, days: float, services: int, seed: int, *changes: Change
) -> StreamSpec:
    return StreamSpec(
        rate=rate,
        days=days,
        icc=shape.icc,
        mean=MEAN,
        cycle=shape.cycle,
        week_cycle=shape.week_cycle,
        traffic_ratio=shape.traffic_ratio,
        ids=False,
        services=services,
        changes=changes,
        seed=seed,
    )


def drifts(config: Config, rates: list[float], services: int, seed: int) -> list[list[object]]:
    crossing = DRIFT_AT + MIN_INCREASE / (DRIFT_TO - MEAN) * DRIFT_DAYS
    rows: list[list[object]] = []
    for rate in rates:
        for shape in (SHAPES[0], SHAPES[2]):
            drift = Change("drift", DRIFT_AT, DRIFT_TO, DRIFT_DAYS)
            run = replay(config, spec(shape, rate, crossing + WATCH_DAYS, services, seed, drift))
            hours = sorted((day - crossing) * 24 for day, _ in run.first.values())
            missed = services - len(hours)
            within = sum(h <= 24 for h in hours)
            severities = sorted({s for _, s in run.first.values()})
            rows.append(
                [
                    f"{rate:g}",
                    shape.name,
                    f"{statistics.median(hours):+.1f}" if hours else "-",
                    f"{max(hours):+.1f}" + (f" ({missed} not alerted)" if missed else "")
                    if hours
                    else "-",
                    f"{within}/{services}",
                    ", ".join(severities) or "-",
                    f"{run.seconds:.0f}",
                ]
            )
            print(" | ".join(str(c) for c in rows[-1]), file=sys.stderr, flush=True)
    return rows


def healthy(
    config: Config, rates: list[float], services: int, days: float, seed: int
) -> list[list[object]]:
    assert config.alerts.rules[0].slo is not None
    budget = 1 - config.alerts.rules[0].slo.objective
    rows: list[list[object]] = []
    for rate in rates:
        for shape in (*SHAPES, HELD_OUT):
            run = replay(config, spec(shape, rate, days, services, seed + 1))
            spent = [run.defects[s] / run.verdicts[s] / budget for s in run.verdicts]
            alerts = ", ".join(f"{n} {sev}" for sev, n in sorted(run.alerts.items())) or "0"
            rows.append(
                [
                    f"{rate:g}",
                    shape.name,
                    f"{services} x {days:g} d",
                    alerts,
                    f"{run.highest_rate(24, 3) / budget:.3f}",
                    f"{run.highest_rate(72, 3) / budget:.3f}",
                    f"{statistics.mean(spent):.0%} ({max(spent):.0%})",
                    f"{run.seconds:.0f}",
                ]
            )
            print(" | ".join(str(c) for c in rows[-1]), file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[1.0, 10.0])
    parser.add_argument("--services", type=int, default=4)
    parser.add_argument("--days", type=float, default=28.0)
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, argv, rates=[0.1], services=1, days=2.0, interval=300.0)
    # Each first page and resolve is logged by the engine: not wanted here.
    logging.getLogger("monitor").setLevel(logging.ERROR)
    config = slo_config(args.interval)
    rule = config.alerts.rules[0]
    assert rule.slo is not None
    from monitor.alerts.kinds.slo import rows_text, slo_text

    with bench_docs.captured() as out:
        print(
            f"`{RULE}` (deploy/monitor.yaml): {slo_text(rule.slo)}; "
            + "; ".join(rows_text(rule.slo))
        )
        print(
            f"\n**Slow drift** {MEAN:.2f} → {DRIFT_TO:.2f} over {DRIFT_DAYS:g} days from day "
            f"{DRIFT_AT:g}: hours from reaching min_increase ({MIN_INCREASE:g}) to "
            f"the first alert, {args.services} services each\n"
        )
        print(
            bench_docs.table(
                [
                    "verdicts/s",
                    "stream",
                    "hours, median",
                    "hours, worst",
                    "within 24 h",
                    "first alert",
                    "run s",
                ],
                drifts(config, args.rates, args.services, args.seed),
            )
        )
        print(
            f"\n**Healthy months** (mean {MEAN:.2f}): alerts, the highest burn rate over a "
            "day and over three days (from day 3 on; the rows fire above 1), and the share "
            f"of the {rule.slo.window} error budget spent, mean (highest) of the services\n"
        )
        print(
            bench_docs.table(
                [
                    "verdicts/s",
                    "stream",
                    "services x days",
                    "alerts",
                    "highest burn, 1d",
                    "highest burn, 3d",
                    "budget spent",
                    "run s",
                ],
                healthy(config, args.rates, args.services, args.days, args.seed),
            )
        )
    if args.write_docs:
        mode = "" if (args.services, args.days, args.interval) == (4, 28.0, 60.0) else "custom size"
        bench_docs.write_block("docs/quality.md", "alert-slo", out.getvalue(), mode=mode)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
