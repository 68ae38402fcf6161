"""Blatant errors never pass. Each case is a context, a question, a faithful answer and the
same answer with one blatant error: a person, organisation or place swapped in a restated
sentence, a number or date changed, or a named place or person the context never mentions
in a short answer. Every error must fail at the shipped threshold and every faithful twin
pass; the explanation of a passing answer never headlines a failure finding.

The wording here is written for this guard, apart from the families the detector's rules
and model were developed on (training/probe_families.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from monitor.config import EvaluatorConfig
from monitor.evaluators.local import LocalGroundedness
from monitor.records import ContextDoc, RagRecord


@dataclass(frozen=True)
class Case:
    name: str
    context: str
    question: str
    faithful: str
    wrong: str


CASES = [
    Case(
        "founder swapped in a restated sentence",
        "Brannock Cycles was founded in 2009 in Tromso by the engineer Ingrid Halvorsen. "
        "The firm builds cargo bikes for postal services.",
        "Who founded Brannock Cycles?",
        "Brannock Cycles was founded in 2009 in Tromso by the engineer Ingrid Halvorsen.",
        "Brannock Cycles was founded in 2009 in Tromso by the engineer Magnus Eriksen.",
    ),
    Case(
        "invented place as a short answer",
        "The cooperative's main warehouse is in Nairobi, beside the rail depot. "
        "It opened in 2015 and employs forty people.",
        "Where is the cooperative's main warehouse?",
        "It is in Nairobi.",
        "It is in Mombasa.",
    ),
    Case(
        "architect swapped, pronoun subject",
        "The Velmont Library was designed by the architect Sofia Brandt. It opened to the "
        "public in 1987 and holds about 300,000 volumes.",
        "Who designed the Velmont Library?",
        "It was designed by the architect Sofia Brandt.",
        "It was designed by the architect Karl Jensen.",
    ),
    Case(
        "organisation swapped, passive voice",
        "The bridge over the Orna river was built by Halden Construction between 2011 and "
        "2014. It carries two tram lines.",
        "Which company built the bridge over the Orna?",
        "The bridge over the Orna river was built by Halden Construction between 2011 and 2014.",
        "The bridge over the Orna river was built by Vestra Engineering between 2011 and 2014.",
    ),
    Case(
        "city swapped in a list",
        "Pellworth Foods runs bakeries in Leeds, York and Hull. Its head office is in Leeds.",
        "Where does Pellworth Foods run bakeries?",
        "Pellworth Foods runs bakeries in Leeds, York and Hull.",
        "Pellworth Foods runs bakeries in Leeds, York and Bristol.",
    ),
    Case(
        "year changed",
        "The Karsk observatory was completed in 1932 on the northern ridge. Its main "
        "telescope has a 1.2-metre mirror.",
        "When was the Karsk observatory completed?",
        "The Karsk observatory was completed in 1932.",
        "The Karsk observatory was completed in 1958.",
    ),
    Case(
        "number changed in several sentences",
        "The Lindqvist ferry carries up to 420 passengers. It crosses the strait in 35 "
        "minutes and runs every hour from six in the morning.",
        "How many passengers can the Lindqvist ferry carry?",
        "The Lindqvist ferry carries up to 420 passengers. It crosses the strait in 35 minutes.",
        "The Lindqvist ferry carries up to 950 passengers. It crosses the strait in 35 minutes.",
    ),
    Case(
        "invented person as a short answer",
        "The orchestra's principal conductor is Amara Osei, who joined in 2019. The orchestra "
        "gives forty concerts a season.",
        "Who is the orchestra's principal conductor?",
        "Amara Osei.",
        "Henrik Dahl.",
    ),
    Case(
        "mayor swapped, two sentences with a pronoun",
        "Elena Marsh became mayor of Dunmore in 2021. She had led the city's transport "
        "board for six years before that.",
        "Who became mayor of Dunmore in 2021?",
        "Elena Marsh became mayor of Dunmore in 2021. She had led the transport board before.",
        "Paul Ridley became mayor of Dunmore in 2021. He had led the transport board before.",
    ),
    Case(
        "invented country as a short answer",
        "The Tessaro coffee blend is roasted in Trieste from beans grown in Ethiopia.",
        "Where are the beans of the Tessaro blend grown?",
        "In Ethiopia.",
        "In Colombia.",
    ),
]


def _score(context: str, question: str, answer: str) -> tuple[bool | None, str]:
    evaluator = LocalGroundedness(EvaluatorConfig(name="local_groundedness"))
    record = RagRecord(
        request_id="guard",
        query=question,
        retrieved_context=(ContextDoc(content=context, doc_uri="kb"),),
        response=answer,
    )
    result = evaluator.score(record)
    return result.passed, result.explanation or ""


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_blatant_error_fails(case: Case) -> None:
    passed, explanation = _score(case.context, case.question, case.wrong)
    assert passed is False, explanation


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_faithful_twin_passes(case: Case) -> None:
    passed, explanation = _score(case.context, case.question, case.faithful)
    assert passed is True, explanation


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_explanations_agree_with_the_verdict(case: Case) -> None:
    for answer in (case.faithful, case.wrong):
        passed, explanation = _score(case.context, case.question, answer)
        if passed:
            assert explanation.startswith("pass"), explanation
            assert "contradicted:" not in explanation and "unsupported:" not in explanation
        else:
            assert not explanation.startswith("pass"), explanation
