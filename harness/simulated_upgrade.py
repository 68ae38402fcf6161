"""Evaluator switches through a confusion model on simulated time, for the scorecard's
`upgrade` and `night switch` rows: a service whose true defect rate follows the day
(0.30 on average, 0.20 at 02:00, 0.40 at 14:00) is scored for four weeks by one evaluator,
then switches to another, each of the two reading a record as failed with its own chance
given the record's truth (`EVALUATORS`: a detector at a false-positive rate of 0.30 and a
true-positive rate of 0.75, a judge at 0.10 / 0.85, the detector with its threshold moved at
0.20 / 0.60; independent given the truth, so they disagree on a third of the records or
more, and read the day's swing with slopes of 0.45 to 0.75).

How the switch comes (`Switch.mode`):

- `shadow`: a day of the new revision scoring a share of the records in shadow before it,
  as a monitor release that carries the previous revision of its detector does on its own
  (docs/alerts.md, "A monitor upgrade"), and as `evaluators[].next` does when the operator
  switches after a day;
- `previous`: the old revision scoring a share after it (`evaluators[].previous`);
- `neither`: the new revision alone from the switch (a release without the previous one).

Then the true rate doubles `rise_s` after the switch; a page's time after the rise is
divided by the information limit of the new revision's reading of that hour's rate and its
double. Records come one at a time, one a second, through the engine's own entry points
(`count_results`, `count_shadow`), judged every 15 s on a clock that follows them.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.production_streams import DAY_S, START, StreamSpec, defect_rate
from harness.simulated_alerts import (
    BUDGET,
    DEFAULT_RULE,
    INTERVAL_S,
    RULE,
    SERVICE,
    WARM_DAYS,
    config,
    counted,
    information_limit_s,
)
from harness.simulated_changeover import count_record
from monitor.config import parse_duration

# (false-positive rate, true-positive rate) of each evaluator.
EVALUATORS: dict[str, tuple[float, float]] = {
    "detector": (0.30, 0.75),
    "judge": (0.10, 0.85),
    "moved threshold": (0.20, 0.60),
}
TRUTH = StreamSpec(rate=1.0, days=1.0, mean=0.3, cycle=0.1, ids=False)
SHARE = 0.2
SHADOW_S = DAY_S
BUDGET_S = parse_duration(BUDGET)
# A run without a page this long after the rise is not paged.
NOT_PAGED_S = 12 * 3600.0
HEALTHY_AFTER_S = 6 * 3600.0


@dataclass(frozen=True)
class Switch:
    """One switch: from evaluator `old` to `new` at `hour` (UTC, of the day the run's
    switch falls on), how (`mode`: "shadow", "previous" or "neither", the module
    docstring), and the true rate doubling `rise_s` after it (inf: never)."""

    old: str
    new: str
    hour: float
    mode: str = "shadow"
    rise_s: float = math.inf


def truth(t: float) -> float:
    """The service's true defect rate at `t` (seconds since the epoch)."""
    return float(defect_rate(TRUTH, np.array([t - START]))[0][0])


def reads(name: str, q: float) -> float:
    """The defect rate evaluator `name` reads of a service whose true rate is `q`."""
    fpr, tpr = EVALUATORS[name]
    return fpr + (tpr - fpr) * q


def limit_s(switch: Switch) -> float:
    """The information limit of the new revision's reading of a doubling at the rise."""
    q = truth(_switch_at(switch) + switch.rise_s)
    return information_limit_s(reads(switch.new, q), reads(switch.new, 2 * q), 1.0, BUDGET_S)


def _switch_at(switch: Switch) -> float:
    return START + WARM_DAYS * DAY_S + switch.hour * 3600.0


@functools.cache
def _history(old: str, end: float) -> dict[str, Any]:
    """The engine's state after four weeks of `old` reading the service, as hourly counts,
    ending at `end`."""
    fpr, tpr = EVALUATORS[old]
    spec = StreamSpec(
        rate=1.0,
        days=1.0,
        mean=reads(old, TRUTH.mean),
        cycle=(tpr - fpr) * TRUTH.cycle,
        ids=False,
        revision=old,
    )
    return counted(spec, 1, WARM_DAYS * DAY_S - SHADOW_S, end=end)


def switch_run(switch: Switch, seed: int) -> list[tuple[float, dict[str, str]]]:
    """One run: its pages, each at its seconds since the switch with its annotations (it
    stops at the first page after a rise)."""
    from monitor.alerts import AlertEngine
    from monitor.alerts.rule import Origin
    from monitor.telemetry import create_telemetry

    at = _switch_at(switch)
    clock = [at - SHADOW_S]
    engine = AlertEngine.from_config(
        config(DEFAULT_RULE), create_telemetry(), clock=lambda: clock[0]
    )
    engine.restore(_history(switch.old, at - SHADOW_S))
    end_s = switch.rise_s + NOT_PAGED_S if math.isfinite(switch.rise_s) else HEALTHY_AFTER_S
    old_rates, new_rates = EVALUATORS[switch.old], EVALUATORS[switch.new]
    rng = random.Random(seed)
    origin = Origin(SERVICE)
    pages: list[tuple[float, dict[str, str]]] = []
    step = int(INTERVAL_S)
    t = -SHADOW_S
    while t < end_s:
        q = truth(at + t) * (2.0 if t >= switch.rise_s else 1.0)
        for _ in range(step):
            bad = rng.random() < q
            old = rng.random() < old_rates[bad]
            new = rng.random() < new_rates[bad]
            now = clock[0]
            count_record(
                engine,
                origin,
                now,
                switched=t >= 0,
                old=(old, switch.old),
                new=(new, switch.new),
                shadow=lambda: switch.mode == "shadow" and rng.random() < SHARE,
                previous=lambda: switch.mode == "previous" and rng.random() < SHARE,
            )
        t += step
        clock[0] = at + t
        for alert in engine.evaluate():
            if alert.status == "firing" and alert.rule == RULE:
                pages.append((t, dict(alert.annotations)))
        if pages and math.isfinite(switch.rise_s):
            break
    return pages


def switch_trial(switch: Switch, seed: int) -> dict[str, float]:
    """A run with a rise: its page's time after the rise over the limit (inf: none within
    `NOT_PAGED_S`), and whether it paged before the rise."""
    pages = switch_run(switch, seed)
    if not pages:
        return {"ratio": math.inf, "early": 0.0}
    at = pages[0][0]
    if at < switch.rise_s:
        return {"ratio": math.nan, "early": 1.0}
    return {"ratio": (at - switch.rise_s) / limit_s(switch), "early": 0.0}


def switch_healthy(switch: Switch, seed: int) -> dict[str, float]:
    """A run without a rise: its false pages from the start of the day before the switch
    to `HEALTHY_AFTER_S` after it."""
    return {"pages": float(len(switch_run(switch, seed))), "switches": 1.0}
