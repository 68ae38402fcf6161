"""Evidence robust to one sender: a forger that sends a share of a service's traffic in one
conversation id, all of it passing in one window and failing in the next (the service's
rate over time unchanged), widens neither the attribution's design effect nor the time a
real rise takes to be named in a `Where` alert, beyond its share.

The engine is driven with a fake clock and real records and results, seeded, as in
`test_attribution.py` (which group a unit lands in follows Python's string hash)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from monitor.alerts.attribution._buckets import GROUPS, OUTLYING, TRIMMED, spread_of
from monitor.component import Evaluated
from monitor.records import ContextDoc, RagRecord
from tests.alerts.test_alerts import question
from tests.alerts.test_attribution import PER_S, Stream, healthy, make, verdict

FORGED = "forged-conversation"
_numbers = itertools.count()


def _forge(stream: Stream, share: float) -> None:
    """One second's forged records: about `share` of the traffic, one conversation id, all
    failing in even minutes (the rule's window) and all passing in odd ones."""
    failed = int(stream.clock.now // 60) % 2 == 0
    for _ in range(PER_S):
        if stream.rng.random() >= share / (1 - share):
            continue
        k = next(_numbers)
        record = RagRecord(
            request_id=f"forged{k}",
            service="shop",
            version="1.0",
            route="/ask",
            model="m1",
            conversation=FORGED,
            query=f"How long is the warranty on {question(10**6 + k)}?",
            retrieved_context=(ContextDoc(content="Two years.", doc_uri="kb/warranty.md"),),
            response="Two years.",
        )
        stream.engine.emit(
            [Evaluated(record, {"local_groundedness": verdict("local_groundedness", not failed)})]
        )


def _time_to_name_m2(share: float) -> tuple[float, float]:
    """Seconds from the start of a rise in model m2 until a `Where` alert names it, and the
    design effect the page states, with a forger at `share` of the traffic."""
    stream, _ = make()
    stream.rng = random.Random(7)

    def second(fails: Callable[[str, str, str, bool], float]) -> None:
        _forge(stream, share)
        stream.run(1, fails)

    for _ in range(12 * 60):
        second(healthy)
    for elapsed in range(1, 3600):
        second(lambda m, r, s, b: 0.5 if m == "m2" else 0.2)
        if any(a.labels.get("value") == "m2" for a in stream.wheres()):
            (listed,) = stream.engine.attribution.firing_alerts()
            return float(elapsed), float(listed["attribution"]["design_effect"])
    raise AssertionError("m2 never named")


@pytest.mark.e2e
@pytest.mark.parametrize("share", [0.1, 0.2])
def test_a_forged_conversation_neither_widens_the_design_effect_nor_delays_the_where_alert(
    share: float,
) -> None:
    clean_s, clean_effect = _time_to_name_m2(0.0)
    forged_s, forged_effect = _time_to_name_m2(share)
    # Without trimming, the forger's group carried the effect to about 3 (a tenth) and 6
    # (a fifth) and the Where alert came one and a half and two and a half times later.
    assert forged_effect <= clean_effect * (1 + share)
    assert forged_s <= clean_s * (1 + share) + 10  # one evaluation's grain besides


def test_the_spread_leaves_out_a_group_that_stands_apart_and_only_it() -> None:
    """Independent units' groups: the spread is their sum (a group past `OUTLYING` times
    the others' mean is as good as never drawn); one group that stands apart (a forged
    unit) is left out and the others stand for all of them."""
    rng = random.Random(3)
    for _ in range(2000):
        terms = [rng.gauss(0, 1) ** 2 for _ in range(GROUPS)]
        assert spread_of(terms) == pytest.approx(sum(terms))
    honest = [rng.gauss(0, 1) ** 2 for _ in range(GROUPS - 1)]
    forged = OUTLYING * 1_000 * sum(honest) / len(honest)
    assert spread_of([*honest, forged]) == pytest.approx(sum(honest) * GROUPS / (GROUPS - 1))
    # No more than `TRIMMED` groups are ever left out.
    many = [forged] * (TRIMMED + 1)
    assert spread_of([*honest[: GROUPS - len(many)], *many]) >= forged
