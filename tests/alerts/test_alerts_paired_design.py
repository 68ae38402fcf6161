"""How much the paired differences of an evaluator changeover vary (`Overlap.offset`):
measured over the conversations the records came in (`ClusteredSums`), not borrowed from
the old level's verdicts. Two revisions that disagree on scattered records give an offset
known far better than the old level's clustering would say; two that disagree on whole
conversations (a topic the new judge reads otherwise) give one known worse; and ids that
are no conversations (one for all traffic, a handful of pods) measure nothing."""

from __future__ import annotations

import math
import random

import pytest

from monitor.alerts.kinds.regression_state import Overlap
from monitor.evidence import ClusteredSums, Moments
from monitor.evidence.clusters import MAX_OPEN, MIN_CLUSTERS

# The old level's design effect, and ln(J T) of a rule's test.
OLD_DESIGN = 3.4
LOG_BUDGET = math.log(8 * 90 * 86_400.0)
SIZE = 10  # records a conversation
CONVERSATIONS = 400
DISAGREE = 0.1


def verdict(failed: bool) -> Moments:
    return Moments(1, float(failed), float(failed))


def pairs(
    overlap: Overlap, rng: random.Random, *, whole: bool, ids: int | None = CONVERSATIONS
) -> None:
    """`CONVERSATIONS` conversations of `SIZE` records both revisions scored, the new one
    failing `DISAGREE` of them more: on records at random, or (`whole`) on every record of
    that share of the conversations. `ids`: how many ids the records carry (None: none)."""
    for c in range(CONVERSATIONS):
        differs_here = rng.random() < DISAGREE
        conversation = None if ids is None else f"c{c % ids}"
        for _ in range(SIZE):
            differs = differs_here if whole else rng.random() < DISAGREE
            overlap.add_pair(verdict(False), verdict(differs), 0.0, conversation)


def measured(
    seed: int, *, whole: bool, ids: int | None = CONVERSATIONS
) -> tuple[float, float, str, float]:
    """The offset of `pairs`, its variance, how it was measured, and the variance the old
    level's design effect would give it."""
    overlap = Overlap()
    pairs(overlap, random.Random(seed), whole=whole, ids=ids)
    result = overlap.offset(OLD_DESIGN, LOG_BUDGET)
    assert result is not None
    n, total, squares = overlap.paired
    return *result, (squares / n - (total / n) ** 2) * OLD_DESIGN / n


def test_scattered_disagreements_give_an_offset_better_known_than_the_old_design_says() -> None:
    offset, variance, how, with_old_design = measured(1, whole=False)
    assert offset == pytest.approx(DISAGREE, abs=0.02)
    # Independent disagreements: a design effect near 1, raised a little for its error.
    assert variance < 0.5 * with_old_design
    assert f"over {CONVERSATIONS} conversations" in how


def test_disagreements_on_whole_conversations_give_an_offset_known_worse() -> None:
    _, variance, _, with_old_design = measured(2, whole=True)
    # Conversations of ten that disagree all or none: a design effect of about ten.
    assert variance > 2 * with_old_design


@pytest.mark.parametrize("ids", [1, 8, None], ids=["one id for all", "pods", "no ids"])
def test_ids_that_are_no_conversations_keep_the_old_design(ids: int | None) -> None:
    _, variance, how, with_old_design = measured(3, whole=True, ids=ids)
    assert variance == pytest.approx(with_old_design)
    assert "conversations" not in how


def test_records_without_a_conversation_keep_the_old_design_beside_those_with_one() -> None:
    """Half the records carry no id: their share of the offset's variance is counted with
    the old level's design effect, the rest with the measured one."""
    both, measured_only = Overlap(), Overlap()
    rng = random.Random(4)
    for c in range(CONVERSATIONS):
        for _ in range(SIZE):
            differs = rng.random() < DISAGREE
            both.add_pair(verdict(False), verdict(differs), 0.0, f"c{c}")
            measured_only.add_pair(verdict(False), verdict(differs), 0.0, f"c{c}")
            both.add_pair(verdict(False), verdict(differs), 0.0, None)
    design = measured_only.by_conversation.design_effect(LOG_BUDGET)
    assert design is not None and design < OLD_DESIGN
    result = both.offset(OLD_DESIGN, LOG_BUDGET)
    assert result is not None
    n, total, squares = both.paired
    per_record = squares / n - (total / n) ** 2
    assert result[1] == pytest.approx(per_record * (design + OLD_DESIGN) / 2 / n, rel=1e-6)


def test_the_design_effect_is_raised_for_its_error_and_needs_enough_clusters() -> None:
    """A few clusters measure the design effect poorly: the estimate is raised for it (or,
    under `MIN_CLUSTERS`, none is given); many measure it near what it is."""
    rng = random.Random(5)
    few, many = ClusteredSums(), ClusteredSums()
    for c in range(2000):
        own = rng.random() < 0.3
        for _ in range(5):
            value = float(own and rng.random() < 0.5)
            many.add(c, 1, value, value)
            if c < MIN_CLUSTERS + 5:
                few.add(c, 1, value, value)
    # Propensity 0 or 0.5, share 0.3: rate 0.15, ICC = var(propensity) / (p (1 - p)) =
    # 0.0525 / 0.1275; design effect 1 + 4 ICC.
    truth = 1 + 4 * 0.0525 / 0.1275
    raised, plain = many.design_effect(LOG_BUDGET), many.design_effect(0.0)
    assert plain is not None and raised is not None
    assert plain == pytest.approx(truth, rel=0.15)
    assert plain < raised < 1.2 * plain
    few_raised, few_plain = few.design_effect(LOG_BUDGET), few.design_effect(0.0)
    assert few_raised is not None and few_plain is not None
    assert few_raised > 1.5 * few_plain
    fewer = ClusteredSums()
    for c in range(MIN_CLUSTERS - 1):
        fewer.add(c, 5, 1.0, 1.0)
    assert fewer.design_effect(LOG_BUDGET) is None


def test_a_cluster_let_go_and_the_sums_read_back_from_the_state_file() -> None:
    """Only `MAX_OPEN` clusters are held open; the sums are what the state file keeps, and
    read back equal."""
    sums = ClusteredSums()
    for c in range(5000):
        sums.add(c % 4500, 2, 1.0, 1.0)
    # The first 500 were let go before they came back: new clusters.
    assert sums.clusters == 5000 and len(sums._open) == MAX_OPEN
    again = ClusteredSums.restored(sums.saved())
    assert again == sums and again.design_effect(LOG_BUDGET) == sums.design_effect(LOG_BUDGET)
    with pytest.raises(ValueError, match="wrong count"):
        ClusteredSums.restored(sums.saved()[:-1])
    with pytest.raises(ValueError, match="negative"):
        ClusteredSums.restored([-1.0, *sums.saved()[1:]])
