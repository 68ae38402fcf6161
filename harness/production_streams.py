"""Production-shaped verdict streams, as `rag-monitor backtest` reads them (the alert tests
replay short ones; `bench/production_streams.py` writes them to files, and the alert
benches replay years of them).

What production traffic is and independent verdicts around a flat rate are not:

- **conversations**: records come in conversations of 5 to 20 turns (uniform), a turn a
  minute; each conversation has a defect propensity of its own, drawn at its start from a
  Beta distribution with the rate then and intraclass correlation `icc`
  (`alpha + beta = 1 / icc - 1`), or (`mixing="failing"`) a two-point one of the same mean
  and correlation: a few conversations fail on every turn, the rest at a rate a little
  below the mean (what a beta-binomial model of the test does not describe). Each turn
  fails with that propensity times the rate at
  the turn's time over the rate at the start, so a change reaches the conversations under
  way at once and the clustering is kept. A row is one turn at its time, with its
  conversation's id (`--no-ids`: no id, and each service's turns summed over as many
  seconds as hold 15 verdicts on average, 15 s at 1 verdict a second, as a stream without
  conversation ids looks);
- **a day and a week**: the defect rate follows the day (`cycle`: amplitude, peaking at
  14:00 UTC) and the week (`week_cycle`, peaking on day 5 of 7), and traffic swings
  `traffic_ratio` times between its night and its peak (14:00 UTC too);
- **changes**: a step (the rate times a factor from a time on), a drift (linear to a rate
  over days), a good spell (a lower rate for hours, then back), an evaluator revision (from
  a time on, verdicts of another revision at another rate: a new detector's bias), or its
  rollout (both revisions live, the new one on a tenth, a half, then all of the turns), or
  a lower sampling rate (from a time on, a share of the turns is scored);
- **judge outages** (`outages_per_day`): for two hours a share of the evaluations err and
  give no verdict, more of them on failing turns.

Rates and times are per service; services are independent streams. `stream()` yields rows
in time order, decoded (what `Backtest.run` takes).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

DAY_S = 86_400.0
POD_IDS = 8
POOL_IDS = 1_000
USERS = 2_000
BURST_REQUESTS = 2_000
BURST_S = 600.0
# A judge outage: for OUTAGE_S this share of the evaluations err and give no verdict, a
# failing turn's twice as often as a passing one's (a timeout that hits long, hard answers
# first), so the verdicts left lean to pass.
OUTAGE_S = 7_200.0
OUTAGE_ERRORS = 0.3
TOPIC_RATES = (0.05, 0.6)
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: day 0 of every stream
EVALUATOR = "local_groundedness"
MIN_TURNS, MAX_TURNS = 5, 20
TURN_S = 60.0
# Without ids a service's turns are summed into rows that hold this many verdicts on average
# (15 s at 1 verdict a second): a row's span delays what it holds, so a busier stream's
# rows are shorter.
NO_ID_ROW_VERDICTS = 15.0


@dataclass(frozen=True)
class Change:
    """A change of the service's defect rate: `kind` step (times `value` from `at_day`),
    drift (to `value` over `days`), spell (`value` for `days`, then back), revision (the
    evaluator changes at `at_day`; its verdicts run at `value`), rollout (the same, rolled
    out over `days`); or of what is scored: sampling (from `at_day` a share `value` of the
    turns, each drawn alone, as a sampler hashing each request's trace id draws them)."""

    kind: str
    at_day: float
    value: float
    days: float = 0.0


@dataclass(frozen=True)
class StreamSpec:
    rate: float  # verdicts a second, on average over a day
    days: float
    icc: float = 0.0
    mixing: str = "beta"  # or "failing": a share of conversations fail on every turn
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
    # What the rows' conversation id is (with `ids`): `conversation` (its own), or what apps
    # send by mistake: `constant` (one id for everything), `pods` (the pod that served the
    # request, `POD_IDS` of them), `pool` (a recycled pool of `POOL_IDS`: a wrapping
    # counter), `user` (the user, `USERS` of them: sessions over days).
    id_kind: str = "conversation"
    # Bursts a day: a client sending `BURST_REQUESTS` near-identical requests (one
    # fingerprint, identical verdicts: all fail with the rate's chance, else all pass) over
    # `BURST_S`, without a conversation id (with `burst_ids`: each request with a fresh
    # session id of its own), on top of the traffic.
    bursts_per_day: float = 0.0
    burst_ids: bool = False
    # Topics (0: none): each conversation is on one of `topics`, whose defect rates spread
    # from TOPIC_RATES; the topic mix follows the day and wanders hour to hour
    # (`topic_wander`, the sd of a topic's log-weight each hour), so the service's rate
    # moves about its daily profile by about 0.01 (`mean` and `cycle` are then unused).
    topics: int = 0
    topic_wander: float = 0.3
    # After a revision change, the share of turns (with ids) the previous revision scores
    # too (`evaluators[].previous`): rows carry its verdict on the same turn, drawn with the
    # same chance so that the two agree where their rates allow.
    previous_share: float = 0.0
    # How many hours a topic's wander lasts (0: independent each hour; else an AR(1) over
    # hours of that correlation time and the same sd).
    topic_wander_hours: float = 0.0
    # Judge outages a day (that many times the days in all, each at a random time):
    # `OUTAGE_S` each, see `OUTAGE_ERRORS`.
    outages_per_day: float = 0.0

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
        elif change.kind == "rollout":
            # The new revision on a tenth of the turns, then half, then all, over `days`
            # (a thirds each), turns drawn to it by a hash of their time.
            stage = np.clip((day - change.at_day) / max(change.days, 1e-9), 0.0, 1.0)
            share = np.where(
                day < change.at_day, 0.0, np.select([stage < 1 / 3, stage < 2 / 3], [0.1, 0.5], 1.0)
            )
            drawn = (np.sin(t * 12.9898) * 43758.5453) % 1.0 < share
            p = np.where(drawn, p - spec.mean + change.value, p)
            revision = np.where(drawn, revision + 1, revision)
        elif change.kind != "sampling":  # sampling changes what is scored (`_Scored`)
            raise ValueError(f"unknown change {change.kind}")
    return np.clip(p, 0.001, 0.999), revision


def traffic(spec: StreamSpec, t: np.ndarray) -> np.ndarray:
    """Relative traffic at `t` (mean 1 over a day): night to peak `traffic_ratio`."""
    k = (spec.traffic_ratio - 1) / (spec.traffic_ratio + 1)
    return 1 + k * np.cos(2 * math.pi * ((t % DAY_S) / 3600.0 - 14.0) / 24.0)


CHUNK_S = DAY_S  # conversations are drawn a day's starts at a time (memory stays bounded)


def topic_mix(spec: StreamSpec, service: int = 0) -> _Topics:
    """The topics of `service` as its stream draws them (its generator's first draws)."""
    return _Topics.drawn(spec, np.random.default_rng([spec.seed, service]))


def topic_design_effect(spec: StreamSpec, service: int = 0) -> float:
    """The design effect of a topic stream's conversations: each conversation's propensity
    is its topic's rate, so their intraclass correlation is the variance of the rates
    (over the day's mix) over the binomial variance."""
    topics = topic_mix(spec, service)
    t = np.arange(0.0, DAY_S, 600.0)
    weights = topics.weights(t).mean(axis=0)
    mean = float(weights @ topics.rates)
    icc = float(weights @ (topics.rates - mean) ** 2) / (mean * (1 - mean))
    sizes = np.arange(MIN_TURNS, MAX_TURNS + 1)
    return float(1 + (np.mean(sizes**2) / np.mean(sizes) - 1) * icc)


@dataclass(frozen=True)
class _Turns:
    """Turns of one service in time order: time (seconds since the start), failed or not,
    revision index, conversation number."""

    time: np.ndarray
    failed: np.ndarray
    revision: np.ndarray
    conversation: np.ndarray
    # What the first revision would have given (`StreamSpec.previous_share`).
    old_failed: np.ndarray

    def __getitem__(self, index: Any) -> _Turns:
        return _Turns(*(getattr(self, f)[index] for f in _Turns.__dataclass_fields__))

    @staticmethod
    def joined(parts: list[_Turns]) -> _Turns:
        return _Turns(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in _Turns.__dataclass_fields__)
        )


@dataclass(frozen=True)
class _Topics:
    """One service's topics: their defect rates, and the log-weights of the mix (a daily
    profile per topic, and an hourly wander)."""

    rates: np.ndarray
    base: np.ndarray
    amplitude: np.ndarray
    phase: np.ndarray
    wander: np.ndarray  # [hour since the start, topic]

    @classmethod
    def drawn(cls, spec: StreamSpec, rng: np.random.Generator) -> _Topics:
        k = spec.topics
        hours = math.ceil(spec.days * 24) + 2
        rates = np.linspace(*TOPIC_RATES, k)
        base = rng.normal(0.0, 0.5, k)
        amplitude = rng.uniform(0.0, 1.0, k)
        phase = rng.uniform(0.0, 24.0, k)
        wander = rng.normal(0.0, spec.topic_wander, (hours, k))
        if spec.topic_wander_hours > 0:
            keep = math.exp(-1.0 / spec.topic_wander_hours)
            for hour in range(1, hours):
                wander[hour] = keep * wander[hour - 1] + math.sqrt(1 - keep * keep) * wander[hour]
        return cls(rates, base, amplitude, phase, wander)

    def weights(self, t: np.ndarray) -> np.ndarray:
        """The topic mix at seconds `t`: [time, topic], rows summing to 1."""
        hours = (t % DAY_S) / 3600.0
        cycle = self.amplitude * np.cos(2 * math.pi * (hours[:, None] - self.phase) / 24.0)
        # A stream shorter than a day still has a day's mix (`topic_design_effect`): the
        # hours past its end keep its last hour's wander.
        hour = np.minimum(t // 3600.0, len(self.wander) - 1).astype(np.int64)
        log_w = self.base + cycle + self.wander[hour]
        w = np.exp(log_w - log_w.max(axis=1, keepdims=True))
        mix: np.ndarray = w / w.sum(axis=1, keepdims=True)
        return mix

    def rate(self, t: np.ndarray) -> np.ndarray:
        """The service's defect rate at `t`, as the mix makes it."""
        rate: np.ndarray = self.weights(t) @ self.rates
        return rate


def _drawn(
    spec: StreamSpec,
    rng: np.random.Generator,
    lo: float,
    hi: float,
    first: int,
    topics: _Topics | None = None,
) -> tuple[_Turns, int]:
    """The turns of the conversations that start in `[lo, hi)`, numbered from `first`, and
    how many conversations they are."""
    mean_turns = (MIN_TURNS + MAX_TURNS) / 2
    peak_traffic = traffic(spec, np.array([14 * 3600.0]))
    # Thinning a Poisson process at the peak intensity.
    count = rng.poisson(spec.rate / mean_turns * float(peak_traffic[0]) * (hi - lo))
    starts = np.sort(rng.uniform(lo, hi, count))
    starts = starts[rng.uniform(0.0, 1.0, count) < traffic(spec, starts) / peak_traffic]
    sizes = rng.integers(MIN_TURNS, MAX_TURNS + 1, starts.size)
    p_start, _ = defect_rate(spec, starts)
    if topics is not None:
        # Each conversation on one topic, drawn from the mix at its start: its propensity
        # is the topic's rate, times what changes made of the rate by then (`mean` is the
        # unchanged rate; changes after the start scale it through the ratio below).
        mix = topics.weights(starts)
        topic = (mix.cumsum(axis=1) < rng.uniform(0.0, 1.0, (starts.size, 1))).sum(axis=1)
        own = topics.rates[np.minimum(topic, topics.rates.size - 1)] * p_start / spec.mean
    elif spec.icc > 0 and spec.mixing == "failing":
        # Propensity 1 for a share s, `low` for the rest: mean p and variance icc p (1 - p)
        # give low = p (1 - icc), s = (p - low) / (1 - low).
        low = p_start * (1 - spec.icc)
        own = np.where(rng.uniform(0.0, 1.0, starts.size) < (p_start - low) / (1 - low), 1.0, low)
    elif spec.icc > 0:
        total = 1 / spec.icc - 1
        own = rng.beta(p_start * total, (1 - p_start) * total)
    else:
        own = p_start
    conversation = np.repeat(np.arange(starts.size), sizes)
    turn = np.arange(conversation.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    t = starts[conversation] + turn * TURN_S
    p_turn, revision = defect_rate(spec, t)
    # The conversation's propensity moves with the rate at each turn, so a change reaches
    # conversations already under way and the clustering about the rate stays as it was.
    chance = np.clip(own[conversation] * p_turn / p_start[conversation], 0.0, 1.0)
    drawn = rng.uniform(0.0, 1.0, t.size)
    failed = drawn < chance
    old_failed = failed
    if spec.previous_share > 0:
        unchanged = replace(
            spec, changes=tuple(c for c in spec.changes if c.kind not in ("revision", "rollout"))
        )
        p_old, _ = defect_rate(unchanged, t)
        old_failed = drawn < np.clip(own[conversation] * p_old / p_start[conversation], 0.0, 1.0)
    return _Turns(t, failed, revision, conversation + first, old_failed), int(starts.size)


def _turns(spec: StreamSpec, service: int) -> Iterator[_Turns]:
    """Every turn of one service, a chunk of time at a time, in time order."""
    rng = np.random.default_rng([spec.seed, service])
    topics = _Topics.drawn(spec, rng) if spec.topics else None
    duration = spec.days * DAY_S
    carried: list[_Turns] = []
    first = 0
    lo = 0.0
    while lo < duration:
        hi = min(lo + CHUNK_S, duration)
        drawn, count = _drawn(spec, rng, lo, hi, first, topics)
        first += count
        turns = _Turns.joined([*carried, drawn])
        turns = turns[np.argsort(turns.time, kind="stable")]
        # A conversation lasts less than a chunk: what runs past `hi` goes with the next one.
        done = int(np.searchsorted(turns.time, hi))
        yield turns[:done]
        carried = [turns[done:]] if hi < duration else []
        lo = hi


def conversation_id(spec: StreamSpec, name: str, conversation: int, t: float) -> str:
    """The id a row of conversation number `conversation` at `t` carries (`id_kind`)."""
    kind = spec.id_kind
    if kind == "conversation":
        return f"{name}-c{conversation}"
    if kind == "constant":
        return f"{name}-session"
    if kind == "pods":
        # The pod that served the request: round robin over requests, whatever the user.
        return f"{name}-pod-{int(t * 1000) % POD_IDS}"
    if kind == "pool":
        return f"{name}-slot-{conversation % POOL_IDS}"
    if kind == "user":
        return f"{name}-user-{(conversation * 7_919) % USERS}"
    raise ValueError(f"unknown id kind {kind}")


def _burst_rows(spec: StreamSpec, service: int, name: str) -> list[tuple[float, dict[str, Any]]]:
    """The rows of `bursts_per_day` bursts (`BURST_REQUESTS` near-identical requests over
    `BURST_S` each, one fingerprint, one verdict for all), in time order."""
    if spec.bursts_per_day <= 0:
        return []
    rng = np.random.default_rng([spec.seed, service, 1])
    count = rng.poisson(spec.bursts_per_day * spec.days)
    starts = np.sort(rng.uniform(0.0, max(0.0, spec.days * DAY_S - BURST_S), count))
    p, _ = defect_rate(spec, starts)
    failing = rng.uniform(0.0, 1.0, count) < p
    rows = []
    for k, (start, failed) in enumerate(zip(starts.tolist(), failing.tolist(), strict=True)):
        times = (START + start + np.linspace(0.0, BURST_S, BURST_REQUESTS)).tolist()
        for i, t in enumerate(times):
            row = {
                "time": t,
                "service": name,
                "evaluator": EVALUATOR,
                "fingerprint": f"{name}-burst-{k}",
                "revision": spec.revision,
                "passes": 1 - int(failed),
                "fails": int(failed),
            }
            if spec.burst_ids:
                row["conversation"] = f"{name}-burst-{k}-session-{i}"
            rows.append((t, row))
    return rows


def _service_rows(spec: StreamSpec, service: int) -> Iterator[tuple[float, dict[str, Any]]]:
    name = f"{spec.service_prefix}-{service}"
    bursts = _burst_rows(spec, service, name)
    if bursts:
        yield from heapq.merge(_traffic_rows(spec, service, name), bursts, key=lambda r: r[0])
    else:
        yield from _traffic_rows(spec, service, name)


def _traffic_rows(
    spec: StreamSpec, service: int, name: str
) -> Iterator[tuple[float, dict[str, Any]]]:
    revisions = [spec.revision, *(f"{spec.revision}.{k + 1}" for k in range(len(spec.changes)))]
    scored = _Scored.of(spec, service)
    for turns in _turns(spec, service):
        if scored is not None:
            turns = turns[scored.kept(turns)]
        if spec.ids:
            for t, failed, revision, conversation, old_failed in zip(
                (START + turns.time).tolist(),
                turns.failed.tolist(),
                turns.revision.tolist(),
                turns.conversation.tolist(),
                turns.old_failed.tolist(),
                strict=True,
            ):
                row = {
                    "time": t,
                    "service": name,
                    "evaluator": EVALUATOR,
                    "conversation": conversation_id(spec, name, conversation, t - START),
                    "revision": revisions[revision],
                    "passes": 1 - failed,
                    "fails": int(failed),
                }
                if revision > 0 and _hashed(t) < spec.previous_share:
                    outcome = "fail" if old_failed else "pass"
                    row["previous"] = {"revision": revisions[0], "outcome": outcome}
                yield t, row
            continue
        span = NO_ID_ROW_VERDICTS / spec.rate
        slot = np.floor(turns.time / span).astype(np.int64)
        keys = slot * 8 + turns.revision
        order = np.argsort(keys, kind="stable")
        unique, first = np.unique(keys[order], return_index=True)
        sizes = np.diff(np.append(first, order.size))
        defects = np.add.reduceat(turns.failed[order].astype(np.int64), first)
        for u, n, d in zip(unique.tolist(), sizes.tolist(), defects.tolist(), strict=True):
            t = START + float(u // 8 + 1) * span
            yield (
                t,
                {
                    "time": t,
                    "service": name,
                    "evaluator": EVALUATOR,
                    "revision": revisions[u % 8],
                    "passes": n - d,
                    "fails": d,
                },
            )


@dataclass(frozen=True)
class _Scored:
    """Which turns give a verdict when the sampling rate falls or the judge has outages
    (drawn from generators of their own, so the turns themselves are as without them)."""

    spec: StreamSpec
    rng: np.random.Generator
    outages: np.ndarray  # start times, seconds since the stream's start, sorted

    @classmethod
    def of(cls, spec: StreamSpec, service: int) -> _Scored | None:
        if spec.outages_per_day <= 0 and all(c.kind != "sampling" for c in spec.changes):
            return None
        timing = np.random.default_rng([spec.seed, service, 2])
        count = round(spec.outages_per_day * spec.days)
        outages = np.sort(timing.uniform(0.0, spec.days * DAY_S, count))
        return cls(spec, np.random.default_rng([spec.seed, service, 3]), outages)

    def kept(self, turns: _Turns) -> np.ndarray:
        sampled = self.rng.uniform(0.0, 1.0, turns.time.size)
        erred = self.rng.uniform(0.0, 1.0, turns.time.size)
        keep = np.ones(turns.time.size, dtype=bool)
        day = turns.time / DAY_S
        for change in self.spec.changes:
            if change.kind == "sampling":
                keep &= (day < change.at_day) | (sampled < change.value)
        if self.outages.size:
            last = np.searchsorted(self.outages, turns.time, side="right") - 1
            inside = (last >= 0) & (turns.time < self.outages[np.maximum(last, 0)] + OUTAGE_S)
            # A passing turn errs with chance q and a failing one 2q, so that at the turn's
            # defect rate p a share q (1 + p) = OUTAGE_ERRORS err.
            p, _ = defect_rate(self.spec, turns.time)
            q = OUTAGE_ERRORS / (1 + p)
            keep &= ~(inside & (erred < np.where(turns.failed, 2 * q, q)))
        return keep


def _hashed(t: float) -> float:
    """A turn's position in [0, 1), from its time (as the rollout draws its turns)."""
    return float((math.sin(t * 78.233) * 43758.5453) % 1.0)


def stream(spec: StreamSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of every service, merged in time order, as `(where, row)` pairs."""
    merged = heapq.merge(
        *(_service_rows(spec, s) for s in range(spec.services)), key=lambda pair: pair[0]
    )
    for i, (_, row) in enumerate(merged):
        yield f"row {i}", row
