"""Swapped opposites, co-hyponyms and units fail with an explanation naming both words; the
same words where the context backs them, or in sentences that do not restate the claim, pass."""

from __future__ import annotations

from monitor.detector import score_groundedness
from monitor.evaluators.local import LocalGroundedness

THRESHOLD = LocalGroundedness.default_threshold
SHEET = [
    "The Kelholt ferry terminal sits on the west bank of the river. Each crossing takes "
    "25 minutes. The largest bell of the town is cast in bronze. Guided walks start in the "
    "morning.",
    "The museum shop is on the east side of the square.",
]


def _verdict(question: str, answer: str) -> tuple[float, list[str]]:
    v = score_groundedness(question, SHEET, answer)
    return v.score, [c.describe() for c in v.contradictions]


def test_a_reversed_direction_fails_and_names_both_words() -> None:
    score, found = _verdict("Where is the terminal?", "The ferry terminal is on the east bank.")
    assert score < THRESHOLD
    assert "answer says east; context says west" in found


def test_a_swapped_kind_and_a_swapped_unit_fail() -> None:
    metal, found = _verdict("What is the largest bell made of?", "It is cast in copper.")
    assert metal < THRESHOLD and "answer says copper; context says bronze" in found
    unit, found = _verdict("How long is the crossing?", "The crossing takes 25 hours.")
    assert unit < THRESHOLD and "answer says hours; context says minutes" in found
    period, found = _verdict("When do walks start?", "Guided walks start in the evening.")
    assert period < THRESHOLD and "answer says evening; context says morning" in found


def test_restated_words_and_other_frames_are_no_swap() -> None:
    for question, answer in (
        ("Where is the terminal?", "The ferry terminal is on the west bank of the river."),
        ("How long is the crossing?", "A crossing takes 25 minutes."),
        # "east" belongs to the shop's sentence, which shares the frame "side".
        ("Where is the shop?", "The shop is on the east side of the square."),
    ):
        score, found = _verdict(question, answer)
        assert found == [], (answer, found)
        assert score >= THRESHOLD, answer


def test_a_polarity_flipped_in_other_words_fails_both_ways() -> None:
    negative = ["Dogs are not permitted on the trails. The reserve opens at dawn."]
    flipped = score_groundedness("Can I bring my dog?", negative, "Dogs may walk the trails.")
    assert flipped.score < THRESHOLD
    assert [c.kind for c in flipped.contradictions] == ["negation"]
    positive = ["The trains are powered by steam."]
    denied = score_groundedness(
        "Are they steam trains?", positive, "Its trains do not run on steam."
    )
    assert denied.score < THRESHOLD
    agreeing = score_groundedness("Can I bring my dog?", negative, "Dogs may not walk the trails.")
    assert agreeing.contradictions == () and agreeing.score >= THRESHOLD


def test_a_negation_in_a_condition_or_a_side_remark_is_no_flip() -> None:
    context = [
        "Shut the door and try to lock it.",
        "Wet the silver and apply the cleaner with a soft cloth (not paper towels).",
    ]
    for answer in (
        "If this doesn't work, shut the door and try to lock it.",
        "Wet the silver and apply the cleaner with a soft cloth.",
    ):
        verdict = score_groundedness("How do I do it?", context, answer)
        assert verdict.contradictions == (), answer


def test_an_invented_clause_lowers_the_score_and_fails_a_doubtful_answer() -> None:
    context = ["The library holds 130,000 books. It opened in 1921."]
    plain = score_groundedness("How many books?", context, "It holds 130,000 books.")
    invented = score_groundedness(
        "How many books?",
        context,
        "It holds 130,000 books, and a rooftop garden grows rare orchids.",
    )
    assert plain.score >= THRESHOLD
    assert invented.score < plain.score * 0.75
    assert "rooftop" in invented.unsupported_terms
    # Advice is no claim about the context.
    advice = score_groundedness(
        "How many books?",
        context,
        "It holds 130,000 books, so it may be best to consult a librarian.",
    )
    assert advice.score > invented.score


def test_a_negative_word_on_both_sides_leaves_the_added_negation_to_decide() -> None:
    context = ["Books can be borrowed without a card."]
    flipped = score_groundedness(
        "Do I need a card?", context, "You cannot borrow books without a card."
    )
    assert [c.kind for c in flipped.contradictions] == ["negation"]
    assert flipped.score < THRESHOLD
    # A leading "No," answers the question; the sentence itself agrees with the context.
    negative = ["Dogs are not permitted on the trails."]
    agreeing = score_groundedness(
        "Can I bring my dog?", negative, "No, dogs are not permitted on the trails."
    )
    assert agreeing.contradictions == () and agreeing.score >= THRESHOLD


def test_a_kind_the_context_lacks_where_it_names_one_of_that_class_is_swapped() -> None:
    context = ["The reading-room shelves are made of oak. The library opened in 1921."]
    swapped = score_groundedness(
        "Tell me about the library.", context, "They are built from birch."
    )
    assert "answer says birch; context says oak" in [c.describe() for c in swapped.contradictions]
    assert swapped.score < THRESHOLD
    # Two woods in the context: which one the claim replaced is unknown, so no swap is named.
    two = ["The shelves are made of oak. The doors are made of pine."]
    verdict = score_groundedness("Tell me about the library.", two, "They are built from birch.")
    assert verdict.contradictions == ()
