"""Slot contradictions: blatant wrong numbers, dates, names and negations fail at the shipped
threshold, through `rag-monitor replay`, with explanations naming the contradicted evidence."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from monitor.detector import score_groundedness
from monitor.detector.slots import parse
from monitor.evaluators.local import LocalGroundedness

THRESHOLD = LocalGroundedness.default_threshold
TOWER = "The tower is 330 metres tall."
BRIDGE = (
    "The Golden Gate Bridge opened to traffic on May 27, 1937. Its main span is 1,280 meters "
    "long, and the chief engineer was Joseph Strauss. The bridge is painted International "
    "Orange so that it stays visible in fog."
)


def test_wrong_quantity_fails_and_names_both_values() -> None:
    verdict = score_groundedness(
        "How tall is the tower?", [TOWER], "It is 900 metres tall and made of gold."
    )
    assert verdict.score < THRESHOLD
    assert [c.describe() for c in verdict.contradictions] == [
        "answer says 900 metres; context says 330 metres"
    ]
    right = score_groundedness("How tall is the tower?", [TOWER], "It is 330 metres tall.")
    assert right.score >= THRESHOLD and right.contradictions == ()


def test_wrong_date_and_wrong_name_fail() -> None:
    date = score_groundedness("When did it open?", [BRIDGE], "It opened on May 27, 1952.")
    assert date.score < THRESHOLD
    assert date.contradictions[0].describe() == (
        "answer says May 27, 1952; context says May 27, 1937"
    )
    name = score_groundedness(
        "Who was the chief engineer?", [BRIDGE], "The chief engineer was Frank Lloyd Wright."
    )
    assert name.score < THRESHOLD
    assert name.contradictions[0].said == "Frank Lloyd Wright"
    assert name.contradictions[0].evidence == "Joseph Strauss"


def test_flipped_negation_fails_with_both_phrasings() -> None:
    context = ["Visitors can climb the stairs to the top on weekends."]
    verdict = score_groundedness(
        "Can I climb it?", context, "No, visitors cannot climb the stairs to the top on weekends."
    )
    assert verdict.score < THRESHOLD
    (found,) = verdict.contradictions
    assert found.kind == "negation"
    assert "cannot climb" in found.said and "can climb" in found.evidence


def test_synonym_of_a_negated_word_is_a_flip() -> None:
    context = ["Dogs are not allowed on the festival grounds."]
    verdict = score_groundedness(
        "Can I bring my dog?", context, "Yes, dogs are permitted on the festival grounds."
    )
    assert verdict.score < THRESHOLD
    assert verdict.contradictions[0].kind == "negation"


def test_same_values_in_other_forms_are_not_contradictions() -> None:
    for answer in (
        "The main span is 1280 meters long.",
        "It opened on 27 May 1937.",
        "Strauss was the chief engineer.",
        "The main span is about 1,300 meters long.",
    ):
        verdict = score_groundedness("Tell me about the bridge.", [BRIDGE], answer)
        assert verdict.contradictions == (), answer
        assert verdict.score >= THRESHOLD, answer


def test_other_units_and_other_facts_are_not_contradictions() -> None:
    # A conversion (another unit) and a number about another thing are unsupported at most.
    verdict = score_groundedness(
        "How long is the span?", [BRIDGE], "The main span is 4,200 feet long."
    )
    assert all(c.kind != "number" for c in verdict.contradictions)


def test_slots_of_a_sentence() -> None:
    parsed = parse("Revenue reached $35 million in 1998, up 12% on a crew of 60.")
    kinds = {(s.kind, s.unit, s.value) for s in parsed.slots}
    assert ("number", "dollar", 35e6) in kinds
    assert ("year", "year", 1998.0) in kinds
    assert ("number", "percent", 12.0) in kinds
    assert ("number", "crew", 60.0) in kinds


def _replay(
    tmp_path: Path, cli: list[str], records: list[dict[str, object]]
) -> list[dict[str, Any]]:
    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "results.jsonl"
    result = subprocess.run(
        [*cli, "replay", str(data), "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_replay_fails_blatant_hallucinations_and_explains_them(
    tmp_path: Path, cli: list[str]
) -> None:
    records: list[dict[str, object]] = [
        {
            "request_id": "tower-wrong",
            "request": "How tall is the tower?",
            "retrieved_context": [{"content": TOWER, "doc_uri": "doc://tower"}],
            "response": "It is 900 metres tall and made of gold.",
        },
        {
            "request_id": "engineer-wrong",
            "request": "Who was the chief engineer of the bridge?",
            "retrieved_context": [{"content": BRIDGE, "doc_uri": "doc://bridge"}],
            "response": "The chief engineer was Frank Lloyd Wright.",
        },
        {
            "request_id": "tower-right",
            "request": "How tall is the tower?",
            "retrieved_context": [{"content": TOWER, "doc_uri": "doc://tower"}],
            "response": "The tower is 330 metres tall.",
        },
        {
            "request_id": "engineer-right",
            "request": "Who was the chief engineer of the bridge?",
            "retrieved_context": [{"content": BRIDGE, "doc_uri": "doc://bridge"}],
            "response": "The chief engineer was Joseph Strauss.",
        },
    ]
    lines = {
        line["request_id"]: line["results"]["local_groundedness"]
        for line in _replay(tmp_path, cli, records)
    }
    tower, engineer = lines["tower-wrong"], lines["engineer-wrong"]
    assert tower["passed"] is False and tower["label"] == "fail"
    assert "answer says 900 metres; context says 330 metres" in tower["explanation"]
    assert engineer["passed"] is False
    assert "answer says Frank Lloyd Wright; context says Joseph Strauss" in engineer["explanation"]
    assert lines["tower-right"]["passed"] is True
    assert lines["engineer-right"]["passed"] is True


def _decisive(query: str, context: str, answer: str) -> list[str]:
    verdict = score_groundedness(query, [context], answer)
    return [c.describe() for c in verdict.contradictions if c.decisive]


def test_a_lone_month_is_not_decisive() -> None:
    # The month is what the sentence is about, not the value it states.
    context = "The warmest monthly average in Portvale for September is 19 degrees."
    verdict = score_groundedness(
        "How warm does it get?", [context], "The warmest monthly average is 23 degrees in July."
    )
    months = [c for c in verdict.contradictions if c.kind == "date"]
    assert months != [] and not any(c.decisive for c in months)


def test_a_flip_needs_the_evidence_to_restate_the_claim() -> None:
    context = (
        "When a latch will not catch, the latch does not align with the hole in the strike plate."
    )
    answer = "It suggests moving the strike plate so that the hole lines up and the latch can align with it."
    assert _decisive("How do I fix a latch?", context, answer) == []


def test_a_word_the_evidence_both_states_and_negates_is_not_flipped() -> None:
    context = (
        "After you submit proof of the amounts owed to you, the business must explain why "
        "the debt is not owed."
    )
    answer = "You submit proof of the amounts owed to you to the court."
    assert _decisive("How do I claim?", context, answer) == []


SHIP = (
    "The RV Arden is a research ship with a crew of 51. The current captain is Edda Torberg. Its chief "
    "scientist, Yusuf Brenard, leads the plankton survey each summer."
)


def test_a_name_moved_into_another_role_is_decisive() -> None:
    # Yusuf Brenard is in the context, but as the chief scientist: the captain is someone else.
    verdict = score_groundedness(
        "Who captains the RV Arden?", [SHIP], "The ship is captained by Yusuf Brenard."
    )
    assert verdict.score < THRESHOLD
    (found,) = verdict.contradictions
    assert found.decisive
    assert found.describe() == "answer says Yusuf Brenard; context says Edda Torberg"
    right = score_groundedness(
        "Who captains the RV Arden?", [SHIP], "The ship is captained by Edda Torberg."
    )
    assert right.score >= THRESHOLD and right.contradictions == ()


def test_a_name_given_the_role_of_its_only_holder_is_decisive() -> None:
    # The ship is not in the captain's sentence, but the context has one captain: that
    # role is the frame, and the answer gives it to the chief scientist.
    context = [
        "Her sonar can map the sea floor down to 4,287 metres. The current captain is Edda "
        "Torberg. Its chief scientist, Yusuf Brenard, leads the plankton survey each summer."
    ]
    answer = "The ship is captained by Yusuf Brenard."
    assert _decisive("Who captains the ship?", context[0], answer) == [
        "answer says Yusuf Brenard; context says Edda Torberg"
    ]
    assert score_groundedness("Who captains the ship?", context, answer).score < THRESHOLD
    # With two captains in the context the role does not say which one is meant.
    two = context[0] + " The Orla, her sister ship, is captained by Tomas Lunane."
    assert _decisive("Who captains the ship?", two, answer) == []


def test_a_one_word_place_that_the_context_gives_otherwise_is_decisive() -> None:
    context = ["The Varn Bridge stands in Kelford and was opened in 1931."]
    for answer in ("The Varn Bridge is in Dresby.", "Dresby."):
        verdict = score_groundedness("Where is the Varn Bridge?", context, answer)
        assert verdict.score < THRESHOLD, answer
        assert [c.describe() for c in verdict.contradictions] == [
            "answer says Dresby; context says Kelford"
        ], answer
    for answer in ("The Varn Bridge is in Kelford.", "Kelford."):
        right = score_groundedness("Where is the Varn Bridge?", context, answer)
        assert right.score >= THRESHOLD and right.contradictions == (), answer


def test_names_in_a_list_or_after_an_article_are_no_swap() -> None:
    context = (
        "On Friday the storm moves further south, hitting cities including Jackson and Birmingham."
    )
    answer = "On Friday the storm moves south, hitting cities including Jackson and Knoxville."
    assert _decisive("Where does the storm go?", context, answer) == []


def test_a_comma_ends_a_name() -> None:
    names = [s.text for s in parse("It rained in Memphis, Jackson and Knoxville.").slots]
    assert names == ["Memphis", "Jackson", "Knoxville"]


def test_a_swapped_subject_is_decisive() -> None:
    context = ["The Orvel carries more water to the sea than any other river in the region."]
    verdict = score_groundedness(
        "Which river carries the most water?",
        context,
        "The Sarn carries more water to the sea than any other river.",
    )
    assert verdict.score < THRESHOLD
    assert [c.describe() for c in verdict.contradictions] == [
        "answer says Sarn; context says Orvel"
    ]


def test_a_unit_conversion_added_by_the_answer_is_supported() -> None:
    context = ["The coastal trail is 12 miles long and climbs 800 feet."]
    right = score_groundedness(
        "How long is the trail?", context, "The trail is 12 miles (19 km) long."
    )
    assert right.unsupported_terms == () and right.contradictions == ()
    assert right.score >= THRESHOLD
    wrong = score_groundedness(
        "How long is the trail?", context, "The trail is 12 miles (40 km) long."
    )
    assert "40" in wrong.unsupported_terms


def test_a_name_moved_from_another_role_is_read_across_verb_forms() -> None:
    context = [
        "A loaf costs 5 euros. The shop is owned by Konrad Elbova. The head baker is Yusuf Varane."
    ]
    verdict = score_groundedness("Who owns the bakery?", context, "Yusuf Varane owns the shop.")
    assert verdict.score < THRESHOLD
    assert verdict.contradictions[0].describe() == (
        "answer says Yusuf Varane; context says Konrad Elbova"
    )


def test_every_short_month_name_is_read_as_its_month() -> None:
    months = [s for s in parse("The fair opened on 12 Sept 2021.").slots if s.kind == "month"]
    assert [m.value for m in months] == [9.0]
    verdict = score_groundedness(
        "When did the fair open?", ["The fair opened on 12 Sept 2021."], "It opened on 12 Oct 2021."
    )
    assert [c.describe() for c in verdict.contradictions][:1] == [
        "answer says 12 Oct 2021; context says 12 Sept 2021"
    ]
