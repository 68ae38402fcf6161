"""The production streams where what is scored changes, not the service
(`harness/production_streams.py`): a judge outage loses a share of the verdicts, more of
the failing ones; a lower sampling rate keeps a share of the turns. The turns themselves
are those of the same stream without them (`bench/alert_production.py --only operations`
replays these streams)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from harness.production_streams import (
    DAY_S,
    OUTAGE_ERRORS,
    OUTAGE_S,
    START,
    Change,
    StreamSpec,
    stream,
)

BASE = StreamSpec(rate=1.0, days=2.0, icc=0.17, cycle=0.03, traffic_ratio=10.0, seed=4)


def _turns(spec: StreamSpec) -> dict[tuple[float, str], int]:
    """Each scored turn, (time, conversation id) -> failed."""
    return {(r["time"], r["conversation"]): r["fails"] for _, r in stream(spec)}


def test_a_judge_outage_loses_a_share_of_the_verdicts_and_more_of_the_failing_ones() -> None:
    every = _turns(BASE)
    scored = _turns(replace(BASE, outages_per_day=1.0))
    assert scored.items() <= every.items()  # the same turns and verdicts, some lost
    lost = sorted(k for k in every if k not in scored)
    assert lost
    # Lost turns fall in two outages (one a day on average over two days) of OUTAGE_S each.
    starts = [lost[0][0]]
    for (t, _), (before, _) in zip(lost[1:], lost, strict=False):
        if t - before > OUTAGE_S:
            starts.append(t)
    assert len(starts) == 2
    inside = {k for k in every if any(s <= k[0] < s + OUTAGE_S for s in starts)}
    lost_share = len(lost) / len(inside)
    assert abs(lost_share - OUTAGE_ERRORS) < 0.05
    rate_lost = sum(every[k] for k in lost) / len(lost)
    kept = [k for k in inside if k in scored]
    rate_kept = sum(every[k] for k in kept) / len(kept)
    assert rate_lost > 1.5 * rate_kept  # a failing turn errs twice as often
    outside = [k for k in every if k not in inside]
    assert all(k in scored for k in outside)


def test_a_lower_sampling_rate_scores_that_share_of_the_turns_from_then_on() -> None:
    every = _turns(BASE)
    scored = _turns(replace(BASE, changes=(Change("sampling", 1.0, 0.1),)))
    assert scored.items() <= every.items()
    before = [k for k in every if k[0] < START + DAY_S]
    after = [k for k in every if k[0] >= START + DAY_S]
    assert all(k in scored for k in before)
    share = sum(k in scored for k in after) / len(after)
    assert abs(share - 0.1) < 0.01
    # Each turn is drawn alone: conversations keep some of their turns, not all or none.
    sizes = Counter(c for _, c in after)
    kept = Counter(c for t, c in after if (t, c) in scored)
    assert any(0 < kept[c] < size for c, size in sizes.items())
