"""Production-shaped verdict streams, as `rag-monitor backtest` reads them (the alert tests
replay short ones; `bench/production_streams.py` writes them to files, and the alert
benches replay years of them).

What production traffic is and independent verdicts around a flat rate are not:

- **conversations**: records come in conversations of 5 to 20 turns (uniform), a turn a
  minute; each conversation has a defect probability of its own, drawn from a Beta
  distribution with the stream's mean and intraclass correlation `icc`
  (`alpha + beta = 1 / icc - 1`), and its verdicts are binomial given it. A row carries one
  conversation's counts at its last turn, with its id (`--no-ids`: no id, and the rows of
  each service summed over 15 s, as a stream without conversation ids looks);
- **a day and a week**: the defect rate follows the day (`cycle`: amplitude, peaking at
  14:00 UTC) and the week (`week_cycle`, peaking on day 5 of 7), and traffic swings
  `traffic_ratio` times between its night and its peak (14:00 UTC too);
- **changes**: a step (the rate times a factor from a time on), a drift (linear to a rate
  over days), a good spell (a lower rate for hours, then back), an evaluator revision (from
  a time on, verdicts of another revision at another rate: a new detector's bias).

Rates and times are per service; services are independent streams. `stream()` yields rows
in time order, decoded (what `Backtest.run` takes).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

DAY_S = 86_400.0
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: day 0 of every stream
EVALUATOR = "local_groundedness"
MIN_TURNS, MAX_TURNS = 5, 20
TURN_S = 60.0
NO_ID_ROW_S = 15.0


@dataclass(frozen=True)
class Change:
    """A change of the service's defect rate: `kind` step (times `value` from `at_day`),
    drift (to `value` over `days`), spell (`value` for `days`, then back), revision (the
    evaluator changes at `at_day`; its verdicts run at `value`)."""

    kind: str
    at_day: float
    value: float
    days: float = 0.0


@dataclass(frozen=True)
class StreamSpec:
    rate: float  # verdicts a second, on average over a day
    days: float
    icc: float = 0.0
    mean: float = 0.2
    cycle: float = 0.0  # amplitude of the daily cycle of the defect rate
    week_cycle: float = 0.0
    traffic_ratio: float = 1.0  # peak over trough of the daily traffic
    ids: bool = True
    services: int = 1
    changes: tuple[Change, ...] = ()
    seed: int = 1
    service_prefix: str = "svc"
    revision: str = "r1"

    @property
    def design_effect(self) -> float:
        """How much more a conversation's mean varies than as many independent verdicts,
        averaged as the verdicts see it (size-weighted)."""
        sizes = np.arange(MIN_TURNS, MAX_TURNS + 1)
        return float(1 + (np.mean(sizes**2) / np.mean(sizes) - 1) * self.icc)


def defect_rate(spec: StreamSpec, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(defect probability, revision index) at seconds `t` since the stream's start."""
    day = t / DAY_S
    hours = (t % DAY_S) / 3600.0
    p = spec.mean + spec.cycle * np.cos(2 * math.pi * (hours - 14.0) / 24.0)
    p = p + spec.week_cycle * np.cos(2 * math.pi * (day - 5.0) / 7.0)
    revision = np.zeros(t.shape, dtype=np.int64)
    for change in spec.changes:
        after = day >= change.at_day
        if change.kind == "step":
            p = np.where(after, p * change.value, p)
        elif change.kind == "drift":
            share = np.clip((day - change.at_day) / change.days, 0.0, 1.0)
            p = p + share * (change.value - spec.mean)
        elif change.kind == "spell":
            inside = after & (day < change.at_day + change.days)
            p = np.where(inside, p - spec.mean + change.value, p)
        elif change.kind == "revision":
            p = np.where(after, p - spec.mean + change.value, p)
            revision = np.where(after, revision + 1, revision)
        else:
            raise ValueError(f"unknown change {change.kind}")
    return np.clip(p, 0.001, 0.999), revision


def traffic(spec: StreamSpec, t: np.ndarray) -> np.ndarray:
    """Relative traffic at `t` (mean 1 over a day): night to peak `traffic_ratio`."""
    k = (spec.traffic_ratio - 1) / (spec.traffic_ratio + 1)
    return 1 + k * np.cos(2 * math.pi * ((t % DAY_S) / 3600.0 - 14.0) / 24.0)


def _conversations(spec: StreamSpec, service: int) -> dict[str, np.ndarray]:
    """Every conversation of one service: end time, size, defects, revision."""
    rng = np.random.default_rng([spec.seed, service])
    mean_turns = (MIN_TURNS + MAX_TURNS) / 2
    duration = spec.days * DAY_S
    # Thinning a Poisson process at the peak intensity.
    peak = spec.rate / mean_turns * (1 + (spec.traffic_ratio - 1) / (spec.traffic_ratio + 1))
    count = rng.poisson(peak * duration)
    starts = np.sort(rng.uniform(0.0, duration, count))
    keep = rng.uniform(0.0, 1.0, count) < traffic(spec, starts) / traffic(
        spec, np.array([14 * 3600.0])
    )
    starts = starts[keep]
    sizes = rng.integers(MIN_TURNS, MAX_TURNS + 1, starts.size)
    ends = starts + (sizes - 1) * TURN_S
    p, revision = defect_rate(spec, starts)
    if spec.icc > 0:
        total = 1 / spec.icc - 1
        own = rng.beta(p * total, (1 - p) * total)
    else:
        own = p
    defects = rng.binomial(sizes, own)
    order = np.argsort(ends, kind="stable")
    return {
        "end": ends[order],
        "size": sizes[order],
        "defects": defects[order],
        "revision": revision[order],
    }


def _service_rows(spec: StreamSpec, service: int) -> Iterator[tuple[float, dict[str, Any]]]:
    name = f"{spec.service_prefix}-{service}"
    conv = _conversations(spec, service)
    revisions = [spec.revision, *(f"{spec.revision}.{k + 1}" for k in range(len(spec.changes)))]
    if spec.ids:
        for k in range(conv["end"].size):
            t = START + float(conv["end"][k])
            n, d = int(conv["size"][k]), int(conv["defects"][k])
            yield (
                t,
                {
                    "time": t,
                    "service": name,
                    "evaluator": EVALUATOR,
                    "conversation": f"{name}-c{k}",
                    "revision": revisions[int(conv["revision"][k])],
                    "passes": n - d,
                    "fails": d,
                },
            )
        return
    slot = np.floor(conv["end"] / NO_ID_ROW_S).astype(np.int64)
    keys = slot * 8 + conv["revision"]
    unique, first = np.unique(keys, return_index=True)
    sizes = np.add.reduceat(conv["size"], first)
    defects = np.add.reduceat(conv["defects"], first)
    for u, n, d in zip(unique, sizes, defects, strict=True):
        t = START + float(u // 8 + 1) * NO_ID_ROW_S
        yield (
            t,
            {
                "time": t,
                "service": name,
                "evaluator": EVALUATOR,
                "revision": revisions[int(u % 8)],
                "passes": int(n - d),
                "fails": int(d),
            },
        )


def stream(spec: StreamSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of every service, merged in time order, as `(where, row)` pairs."""
    merged = heapq.merge(
        *(_service_rows(spec, s) for s in range(spec.services)), key=lambda pair: pair[0]
    )
    for i, (_, row) in enumerate(merged):
        yield f"row {i}", row
