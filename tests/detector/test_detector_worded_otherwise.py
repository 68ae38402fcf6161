"""Errors worded otherwise than the context: roles by verb or possessive, a number moved onto
another noun of its sentence, an opposite in a short claim, a shared first name, a clause half
of whose words the context lacks (and one a context sentence restates in other words, or an
offer of help, that is not invented), a unit swapped in a short claim, and a polarity flipped
in a short claim or in other words."""

from __future__ import annotations

from monitor.detector import score_groundedness
from monitor.detector.embedding import shared_embedder
from monitor.detector.features import analyse
from monitor.detector.groundedness import clause_factor
from monitor.evaluators.local import LocalGroundedness

THRESHOLD = LocalGroundedness.default_threshold
CHOIR = [
    "The Kelova Singers are a chamber choir based in Yskstead. The singers rehearse for 4 "
    "hours before each concert. Its accompanist, Mattias Torard, plays at every concert. "
    "Auditions are held twice a year. The choir's conductor is Veda Varell. It has 9 "
    "sopranos and 17 basses."
]
HARBOUR = [
    "Ostard Harbour is a fishing port near Elbport. The harbour master is Selma Torby. The "
    "lifeboat crew is commanded by Selma Halacre. The harbour lights are painted blue."
]


def _fails(question: str, context: list[str], answer: str) -> bool:
    return score_groundedness(question, context, answer).score < THRESHOLD


def test_a_role_swap_fails_however_the_answer_words_the_role() -> None:
    for answer in (
        "Mattias Torard conducts the choir.",
        "Its conductor is Mattias Torard.",
        "Veda Varell accompanies the singers.",
        "The accompanist is Veda Varell.",
    ):
        assert _fails("Who is it?", CHOIR, answer), answer
    for answer in (
        "Veda Varell conducts the choir.",
        "Mattias Torard accompanies the singers.",
        "The accompanist is Mattias Torard.",
    ):
        assert not _fails("Who is it?", CHOIR, answer), answer


def test_two_people_sharing_a_first_name_are_two_people() -> None:
    assert _fails("Who commands the lifeboat?", HARBOUR, "The lifeboat's commander is Selma Torby.")
    assert _fails("Who is the harbour master?", HARBOUR, "Selma Halacre is the harbour master.")
    assert not _fails(
        "Who commands the lifeboat?", HARBOUR, "The lifeboat's commander is Selma Halacre."
    )


def test_a_number_moved_onto_the_other_noun_of_its_sentence_fails() -> None:
    moved = score_groundedness("How big?", CHOIR, "The choir has 17 sopranos and 9 basses.")
    assert moved.score < THRESHOLD
    assert moved.contradictions[0].describe() == "answer says 17 sopranos; context says 9 sopranos"
    assert not _fails("How big?", CHOIR, "The choir has 9 sopranos and 17 basses.")


def test_a_unit_swapped_in_a_short_restated_claim_fails() -> None:
    assert _fails("How long?", CHOIR, "Rehearsals last 4 days.")
    assert not _fails("How long?", CHOIR, "Rehearsals last 4 hours.")


def test_an_opposite_in_a_short_claim_against_the_context_s_only_one_fails() -> None:
    context = ["The Dreacre Brewery brews ale in an old mill. The taproom is outside the old mill."]
    assert _fails("Where is the taproom?", context, "The taproom is located inside it.")
    assert not _fails("Where is the taproom?", context, "The taproom is located outside it.")


def test_a_clause_half_of_whose_words_the_context_lacks_takes_a_share_of_the_score() -> None:
    context = ["The bakery is a family bakery in Marby. It delivers on Sundays."]
    answer = "It delivers on Sundays, and it also runs baking classes for children."
    verdict = score_groundedness("Does it deliver?", context, answer)
    plain = score_groundedness("Does it deliver?", context, "It delivers on Sundays.")
    assert verdict.score < plain.score * 0.85
    assert {"classes", "children"} <= {t.lower() for t in verdict.unsupported_terms}
    # The thin clause counts less than one whose specific words are all missing.
    checks = analyse("Does it deliver?", context, answer, shared_embedder()).sentences
    assert [c for s in checks for c in s.invented] == [
        ("and it also runs baking classes for children.", True)  # thin, no other
    ]
    assert clause_factor(checks) == 0.8


YARD = [
    "Marane Yard builds fishing boats at the river mouth in Varvale. The yard sits downstream "
    "of the old bridge. The chief designer of the yard is Konrad Brenberg. The yard belongs to "
    "Milo Silholt. Gulls nest on the crane."
]


def test_a_role_given_to_the_owner_fails_even_after_a_pronoun() -> None:
    # The yard's own name builds the boats: the designer is the rival, not the yard.
    assert _fails("Who designs the boats?", YARD, "Its boats are designed by Milo Silholt.")
    assert not _fails("Who designs the boats?", YARD, "Its boats are designed by Konrad Brenberg.")


def test_an_offer_of_help_is_not_an_invented_clause() -> None:
    context = ["Gemini is a constellation of the zodiac, named after the twins of Greek myth."]
    answer = (
        "Gemini is a constellation named after the twins of Greek myth. Let me know if you "
        "need further clarification or if there is anything else I can help you with."
    )
    checks = analyse("What is Gemini?", context, answer, shared_embedder()).sentences
    assert [c for s in checks for c in s.invented] == []
    invented = (
        "Gemini is a constellation named after the twins. Its brightest star hosts seven planets."
    )
    checks = analyse("What is Gemini?", context, invented, shared_embedder()).sentences
    assert [c for s in checks for c in s.invented] != []


def test_a_polarity_flip_restated_with_a_synonym_fails() -> None:
    ferry = [
        "Tordahl Ferries runs the crossing between Kelport and Marvale. Boats leave Kelport "
        "every 40 minutes. Bicycles are allowed on board. The first boat sailed in 1921."
    ]
    assert _fails("Can I bring my bike?", ferry, "Bikes are not allowed on the boats.")
    assert not _fails("Can I bring my bike?", ferry, "Bikes are allowed on the boats.")


def test_a_short_claim_with_its_polarity_flipped_fails() -> None:
    harbour = [
        "Kelacre Harbour is a fishing port near Wescrag. Swimming is allowed in the harbour. "
        "Pupils of the sailing school are required to wear life jackets."
    ]
    # Two content words, one of them the flipped one, inflected otherwise ("swim").
    assert _fails("Can I swim?", harbour, "You may not swim in the harbour.")
    assert not _fails("Can I swim?", harbour, "You may swim in the harbour.")
    assert _fails("Are jackets required?", harbour, "Life jackets are not required.")
    assert not _fails("Are jackets required?", harbour, "Life jackets are required.")


LIBRARY = [
    "The Thalell Library is the public library of Garminster. Rare books are kept below the "
    "main hall. The library opened in 1928. It holds 220,359 books."
]


def test_a_clause_a_context_sentence_restates_in_other_words_is_not_invented() -> None:
    answer = "The collection counts 220,359 books, and the library hosts a jazz festival."
    checks = analyse("Tell me about it.", LIBRARY, answer, shared_embedder()).sentences
    # "collection counts" is missing, but "It holds 220,359 books" says the same; the
    # festival has no sentence of its own.
    assert [c for s in checks for c in s.invented] == [
        ("and the library hosts a jazz festival.", False)
    ]
    restated = "The collection counts 220,359 books."
    checks = analyse("Tell me about it.", LIBRARY, restated, shared_embedder()).sentences
    assert [c for s in checks for c in s.invented] == []
    assert not _fails("Tell me about it.", LIBRARY, restated)


def test_a_restated_clause_with_a_number_the_context_lacks_is_still_invented() -> None:
    answer = "The collection counts 310,000 books."
    checks = analyse("Tell me about it.", LIBRARY, answer, shared_embedder()).sentences
    assert [c for s in checks for c in s.invented] != []
