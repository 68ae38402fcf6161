"""The comparisons at page time: every held value against what the rest of its dimension
predicts, and the rise split into what came with retrieval and what came at the same
retrieval quality (docs/alerts.md says how)."""

from __future__ import annotations

import math

from monitor.alerts.attribution._buckets import (
    MIN_REFERENCE,
    MIN_SLICE,
    Side,
    bernoulli,
    strata,
    sums,
    variance_of,
)
from monitor.alerts.attribution._explanation import Cause, Change, Slice, Split
from monitor.alerts.rule import Rule
from monitor.evidence import one_sided_z, rise_p_value
from monitor.records.where import DIMENSIONS
from monitor.telemetry import OVERFLOW


def compare_slices(
    rule: Rule,
    sides: tuple[Side, Side],
    t1: tuple[float, float, float],
    t0: tuple[float, float, float],
    deff: float,
    *,
    screened: bool = False,
) -> tuple[list[Slice], int]:
    """Every tested value's comparison, and how many were tested (`screened`: of the
    verdicts of senders not flagged, `t1` and `t0` theirs too)."""
    n1_all, x1_all, q1_all = t1
    n0_all, x0_all, q0_all = t0
    mu0 = x0_all / n0_all if n0_all > 0 else None
    pooled = (
        variance_of(n1_all, x1_all, q1_all),
        variance_of(n0_all, x0_all, q0_all) if n0_all > 0 else variance_of(n1_all, x1_all, q1_all),
    )
    binary = rule.terms.steps == 1

    def var(rate: float, side: int) -> float:
        """A verdict's variance at `rate`: the binomial one for pass/fail verdicts,
        the side's own for scores."""
        return bernoulli(rate) if binary else pooled[side]

    margin = rule.terms.margin(mu0 if mu0 is not None else 0.0)
    excess_all = x1_all - n1_all * mu0 if mu0 is not None else 0.0
    out: list[Slice] = []
    tested = 0
    for d, name in enumerate(DIMENSIONS):
        values: set[str] = set()
        for state, _ in (*sides[0], *sides[1]):
            values.update(state.values[d])
        for value in sorted(values):
            if value == OVERFLOW:
                continue
            n1, x1 = sums(sides[0], d, value, screened=screened)
            if n1 < MIN_SLICE or n1_all - n1 < MIN_SLICE:
                continue
            n0, x0 = sums(sides[1], d, value, screened=screened)
            r1n, r1x = n1_all - n1, x1_all - x1
            r0n, r0x = n0_all - n0, x0_all - x0
            p1 = x1 / n1
            # A rest without a defect still has an uncertain rate.
            p1r = max(r1x, 0.5) / r1n
            own = n0 >= MIN_REFERENCE and r0n >= MIN_REFERENCE and r0x > 0
            if own:
                p0 = x0 / n0
                p0r = r0x / r0n
                ratio = p1r / p0r
                expected = min(1.0, ratio * p0)
                # The value's two rates, and the rest's ratio (delta method).
                variance = deff * (
                    var(p1, 0) / n1
                    + ratio * ratio * var(p0, 1) / n0
                    + (p0 * ratio) ** 2
                    * (var(p1r, 0) / (r1n * p1r * p1r) + var(p0r, 1) / (r0n * p0r * p0r))
                )
            else:
                expected = p1r
                variance = deff * (var(p1, 0) / n1 + var(p1r, 0) / r1n)
            tested += 1
            rise = p1 - expected
            z = (rise - margin) / math.sqrt(variance) if variance > 0 else 0.0
            reference = x0 / n0 if own else None
            base = reference if own else mu0
            share = None
            if base is not None and excess_all > 0:
                share = (x1 - n1 * base) / excess_all
            # The same comparison without what flagged senders sent (the comparison
            # itself when it is of screened verdicts).
            without = z
            fn, fx = sums(sides[0], d, value, flagged=True)
            if fn > 0 and not screened:
                sn, sx = n1 - fn, x1 - fx
                if sn < MIN_SLICE:
                    without = -math.inf
                else:
                    sp = sx / sn
                    sv = variance + deff * (var(sp, 0) / sn - var(p1, 0) / n1)
                    without = (sp - expected - margin) / math.sqrt(sv) if sv > 0 else 0.0
            out.append(
                Slice(name, value, int(n1), p1, int(n0), reference, expected, share, z, without)
            )
    return out, tested


def split_rise(
    rule: Rule,
    evaluator: str | None,
    sides: tuple[Side, Side],
    deff: float,
    interval_s: float,
) -> Split | None:
    """Retriever or generator (docs/alerts.md); None without a retrieval
    evaluator's verdicts on both sides."""
    if evaluator is None:
        return None
    (np1, xp1, nf1, xf1), (np0, xp0, nf0, xf0) = strata(sides[0]), strata(sides[1])
    if min(np1, np0) < MIN_SLICE or min(nf1 + np1, nf0 + np0) < MIN_REFERENCE:
        return None
    if nf0 < MIN_SLICE and nf1 < MIN_SLICE:
        return None
    s1, s0 = nf1 / (nf1 + np1), nf0 / (nf0 + np0)
    pp1, pp0 = xp1 / np1, xp0 / np0
    pf0 = xf0 / nf0 if nf0 > 0 else pp0
    pf1 = xf1 / nf1 if nf1 > 0 else pf0
    within = (1 - s1) * (pp1 - pp0) + s1 * (pf1 - pf0)
    mix = (s1 - s0) * (pf0 - pp0)
    level = rule.terms.level(interval_s, 2)
    z_level = one_sided_z(level)
    margin = rule.terms.margin(pp0)
    share_var = deff * (s1 * (1 - s1) / (nf1 + np1) + s0 * (1 - s0) / (nf0 + np0))
    # Retrieval failed more often, and that carries a rise.
    moved = rise_p_value(s1 - s0, share_var, 0.0) <= level
    gap = pf0 - pp0
    mix_var = share_var * gap * gap + (s1 - s0) ** 2 * deff * (
        bernoulli(pf0) / max(nf0, 1.0) + bernoulli(pp0) / np0
    )
    retriever = moved and mix > 0 and rise_p_value(mix, mix_var, margin) <= level
    within_var = deff * (
        (1 - s1) ** 2 * (bernoulli(pp1) / np1 + bernoulli(pp0) / np0)
        + (s1**2 * (bernoulli(pf1) / nf1 + bernoulli(pf0) / max(nf0, 1.0)) if nf1 else 0.0)
    )
    significant = z_level * math.sqrt(max(within_var, 1e-12)) <= within - margin
    cause: Cause
    if retriever:
        cause = "both" if significant else "retriever"
    elif significant or (not moved and within > max(mix, margin)):
        # The page's rise, at retrieval that did not fail more often: the generator.
        cause = "generator"
    else:
        cause = "unclear"
    return Split(cause, evaluator, (s0, s1), mix, within)


# What a page says changed at its rise: the dimensions a deploy or an outage moves, a value
# that holds at least `CHANGED_SHARE` of the verdicts since the rise and held at most a
# `CHANGED_RATIO`th of that share before it (a new version, a model switched, the context
# gone: `context 0`). Shares of verdicts, not of defects: a change is news even where the
# slice comparison cannot yet name it.
CHANGE_DIMENSIONS = ("version", "model", "route", "context", "documents")
CHANGED_SHARE = 0.2
CHANGED_RATIO = 5.0
SHOWN_CHANGES = 3


def changes_at_rise(sides: tuple[Side, Side], n1_all: float, n0_all: float) -> list[Change]:
    """The values whose share of verdicts grew at the rise, the largest first; none where
    the reference holds too few verdicts to tell."""
    if n1_all < MIN_SLICE or n0_all < MIN_REFERENCE:
        return []
    out: list[Change] = []
    for name in CHANGE_DIMENSIONS:
        d = DIMENSIONS.index(name)
        values: set[str] = set()
        for state, _ in sides[0]:
            values.update(state.values[d])
        for value in values:
            if value == OVERFLOW:
                continue
            since = sums(sides[0], d, value)[0] / n1_all
            before = sums(sides[1], d, value)[0] / n0_all
            if since >= CHANGED_SHARE and before * CHANGED_RATIO <= since:
                out.append(Change(name, value, before, since))
    out.sort(key=lambda c: (-c.since, c.dimension, c.value))
    return out[:SHOWN_CHANGES]
