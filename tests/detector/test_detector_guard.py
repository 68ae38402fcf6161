"""Blatant errors never pass. Each case is a context, a question, a faithful answer and the
same answer with one blatant error: a person, organisation or place swapped in a restated
sentence, a number or date changed, or a named person, place or organisation the context never
mentions given as a short answer. Every error must fail at the shipped threshold, every
faithful twin pass, and each explanation agree with its verdict.

Blatant here means the answer's value is nowhere in the context: it put a name, number or date
of its own where the context has another. A name the context holds in another role (the first
mate named as captain) is a relation error, outside this guard (detector README, known limits).

The wording here is written for this guard, apart from the families the detector's rules
and model were developed on (training/probe_families.py)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import pytest

from monitor.config import EvaluatorConfig
from monitor.detector import GroundednessVerdict, score_groundedness
from monitor.evaluators.local import LocalGroundedness
from monitor.records import ContextDoc, RagRecord
from training.detector_metrics import explanation_disagreement

# What is swapped or changed, and the wordings each kind must be tried in.
KINDS = ("person", "organisation", "place", "number", "date")
WORDINGS = ("one line", "several sentences", "pronoun subject", "passive", "list")
INVENTED = ("invented person", "invented place", "invented organisation")


@dataclass(frozen=True)
class Case:
    name: str
    # One of KINDS, or of INVENTED (a short answer naming what the context never mentions).
    error: str
    wording: frozenset[str]
    context: str
    question: str
    faithful: str
    wrong: str


CASES = [
    Case(
        "founder swapped in a restated sentence",
        "person",
        frozenset({"one line", "passive"}),
        "Brannock Cycles was founded in 2009 in Tromso by the engineer Ingrid Halvorsen. The "
        "firm builds cargo bikes for postal services.",
        "Who founded Brannock Cycles?",
        "Brannock Cycles was founded in 2009 in Tromso by the engineer Ingrid Halvorsen.",
        "Brannock Cycles was founded in 2009 in Tromso by the engineer Magnus Eriksen.",
    ),
    Case(
        "architect swapped, pronoun subject",
        "person",
        frozenset({"one line", "pronoun subject", "passive"}),
        "The Velmont Library was designed by the architect Sofia Brandt. It opened to the "
        "public in 1987 and holds about 300,000 volumes.",
        "Who designed the Velmont Library?",
        "It was designed by the architect Sofia Brandt.",
        "It was designed by the architect Karl Jensen.",
    ),
    Case(
        "mayor swapped, two sentences with a pronoun",
        "person",
        frozenset({"several sentences", "pronoun subject"}),
        "Elena Marsh became mayor of Dunmore in 2021. She had led the city's transport board "
        "for six years before that.",
        "Who became mayor of Dunmore in 2021?",
        "Elena Marsh became mayor of Dunmore in 2021. She had led the transport board before.",
        "Paul Ridley became mayor of Dunmore in 2021. He had led the transport board before.",
    ),
    Case(
        "team leader swapped, active restating passive",
        "person",
        frozenset({"one line"}),
        "The research team at the Harrow Institute is led by Dr. Lena Okafor, a marine "
        "chemist. It studies coastal erosion.",
        "Who leads the research team at the Harrow Institute?",
        "Dr. Lena Okafor leads the research team at the Harrow Institute.",
        "Dr. Tomas Reyes leads the research team at the Harrow Institute.",
    ),
    Case(
        "author swapped, then a pronoun",
        "person",
        frozenset({"several sentences", "passive", "pronoun subject"}),
        "The novel Salt Meadow was written by Hana Kobayashi. She finished it in 2016 after "
        "four years of work. It won the Delmore Prize.",
        "Who wrote Salt Meadow?",
        "Salt Meadow was written by Hana Kobayashi. She finished it in 2016.",
        "Salt Meadow was written by Yuki Tanaka. She finished it in 2016.",
    ),
    Case(
        "founding member swapped in a list",
        "person",
        frozenset({"one line", "list", "pronoun subject", "passive"}),
        "The Corran String Quartet was formed in 2004 by Ada Brennan, Liam Foley and Nora "
        "Quist. They still perform together.",
        "Who formed the Corran String Quartet?",
        "It was formed by Ada Brennan, Liam Foley and Nora Quist.",
        "It was formed by Ada Brennan, Liam Foley and Greta Sund.",
    ),
    Case(
        "award winner swapped",
        "person",
        frozenset({"one line"}),
        "The Whitcombe Medal for 2018 went to Miriam Castell for her work on soil bacteria.",
        "Who received the Whitcombe Medal in 2018?",
        "The Whitcombe Medal for 2018 went to Miriam Castell.",
        "The Whitcombe Medal for 2018 went to Rosa Lindqvist.",
    ),
    Case(
        "surgeon swapped in the second of three sentences",
        "person",
        frozenset({"several sentences", "passive", "pronoun subject"}),
        "St. Aldric Hospital opened its cardiac unit in 2017. The first operation there was "
        "performed by the surgeon Daniel Mbeki. The unit treats about 900 patients a year.",
        "Who performed the first operation in the cardiac unit?",
        "The cardiac unit opened in 2017. The first operation there was performed by the "
        "surgeon Daniel Mbeki. It treats about 900 patients a year.",
        "The cardiac unit opened in 2017. The first operation there was performed by the "
        "surgeon Victor Lund. It treats about 900 patients a year.",
    ),
    Case(
        "architect's family name swapped",
        "person",
        frozenset({"one line", "passive"}),
        "The Velmont Library was designed by the architect Sofia Brandt and opened in 1987.",
        "Who designed the Velmont Library?",
        "The library was designed by Brandt.",
        "The library was designed by Jensen.",
    ),
    Case(
        "director swapped after a pronoun",
        "person",
        frozenset({"several sentences", "pronoun subject", "passive"}),
        "The documentary Cold Harbour premiered in Oslo in 2021. It was directed by Signe Aas "
        "and produced by Nordlys Film.",
        "Who directed Cold Harbour?",
        "Cold Harbour premiered in 2021. It was directed by Signe Aas.",
        "Cold Harbour premiered in 2021. It was directed by Kristin Moe.",
    ),
    Case(
        "organisation swapped, passive voice",
        "organisation",
        frozenset({"one line", "passive"}),
        "The bridge over the Orna river was built by Halden Construction between 2011 and "
        "2014. It carries two tram lines.",
        "Which company built the bridge over the Orna?",
        "The bridge over the Orna river was built by Halden Construction between 2011 and 2014.",
        "The bridge over the Orna river was built by Vestra Engineering between 2011 and 2014.",
    ),
    Case(
        "operator swapped",
        "organisation",
        frozenset({"one line"}),
        "The wind farm off the coast of Esbjerg is operated by Nordvik Energy. It has 48 turbines.",
        "Who operates the wind farm off Esbjerg?",
        "Nordvik Energy operates the wind farm off the coast of Esbjerg.",
        "Baltic Power operates the wind farm off the coast of Esbjerg.",
    ),
    Case(
        "owner swapped after a pronoun",
        "organisation",
        frozenset({"several sentences", "pronoun subject", "passive"}),
        "The Ravelston Stadium was renovated in 2019. It is owned by Caldera Holdings and "
        "seats 31,000 people.",
        "Who owns the Ravelston Stadium?",
        "The Ravelston Stadium was renovated in 2019. It is owned by Caldera Holdings.",
        "The Ravelston Stadium was renovated in 2019. It is owned by Sterling Group.",
    ),
    Case(
        "sponsor swapped in a list",
        "organisation",
        frozenset({"one line", "list", "passive"}),
        "The Harbour Marathon is sponsored by Orvik Bank, Telmar and Kestrel Air. About 6,000 "
        "runners take part.",
        "Who sponsors the Harbour Marathon?",
        "The Harbour Marathon is sponsored by Orvik Bank, Telmar and Kestrel Air.",
        "The Harbour Marathon is sponsored by Orvik Bank, Telmar and Pelican Airways.",
    ),
    Case(
        "buyer swapped",
        "organisation",
        frozenset({"one line", "passive"}),
        "In 2020 the mapping startup Cartiq was acquired by Fenwick Software for an "
        "undisclosed sum.",
        "Which company acquired Cartiq?",
        "Cartiq was acquired by Fenwick Software in 2020.",
        "Cartiq was acquired by Arlo Systems in 2020.",
    ),
    Case(
        "one-word sponsor swapped",
        "organisation",
        frozenset({"one line", "passive"}),
        "The Lakeside half marathon is sponsored by Telmar, a phone company. About 4,000 "
        "runners take part.",
        "Who sponsors the Lakeside half marathon?",
        "The Lakeside half marathon is sponsored by Telmar.",
        "The Lakeside half marathon is sponsored by Vodex.",
    ),
    Case(
        "city swapped in a list",
        "place",
        frozenset({"one line", "list"}),
        "Pellworth Foods runs bakeries in Leeds, York and Hull. Its head office is in Leeds.",
        "Where does Pellworth Foods run bakeries?",
        "Pellworth Foods runs bakeries in Leeds, York and Hull.",
        "Pellworth Foods runs bakeries in Leeds, York and Bristol.",
    ),
    Case(
        "new headquarters city swapped",
        "place",
        frozenset({"one line"}),
        "In 2012 the shipping firm Ostrand Lines moved its headquarters to Rotterdam. It had "
        "been based in Bremen.",
        "Where did Ostrand Lines move its headquarters?",
        "Ostrand Lines moved its headquarters to Rotterdam in 2012.",
        "Ostrand Lines moved its headquarters to Antwerp in 2012.",
    ),
    Case(
        "festival town swapped",
        "place",
        frozenset({"several sentences", "pronoun subject"}),
        "The Corrib Folk Festival takes place in Galway every July. It draws about 20,000 "
        "visitors.",
        "Where does the Corrib Folk Festival take place?",
        "The Corrib Folk Festival takes place in Galway every July. It draws about 20,000 "
        "visitors.",
        "The Corrib Folk Festival takes place in Cork every July. It draws about 20,000 visitors.",
    ),
    Case(
        "birthplace swapped",
        "place",
        frozenset({"one line", "pronoun subject", "passive"}),
        "The painter Marta Ilves was born in Tartu and studied in Helsinki before settling in "
        "Stockholm.",
        "Where was Marta Ilves born?",
        "She was born in Tartu.",
        "She was born in Riga.",
    ),
    Case(
        "destination swapped in a list",
        "place",
        frozenset({"one line", "list"}),
        "From the regional airport, Skylark Air flies to Dublin, Madrid and Vienna.",
        "Where does Skylark Air fly from the regional airport?",
        "Skylark Air flies to Dublin, Madrid and Vienna.",
        "Skylark Air flies to Dublin, Madrid and Prague.",
    ),
    Case(
        "river swapped",
        "place",
        frozenset({"one line", "passive"}),
        "The old paper mill was built on the Severn in 1790 and later turned into flats.",
        "On which river was the old paper mill built?",
        "The old paper mill was built on the Severn in 1790.",
        "The old paper mill was built on the Thames in 1790.",
    ),
    Case(
        "place swapped in the third sentence",
        "place",
        frozenset({"several sentences"}),
        "The Halvard Trust was set up in 1978 to protect upland farms. It owns 40 farms and "
        "employs 120 people. Its office is in Kendal, near the lakes.",
        "Tell me about the Halvard Trust.",
        "The Halvard Trust was set up in 1978 to protect upland farms. It owns 40 farms and "
        "employs 120 people. Its office is in Kendal.",
        "The Halvard Trust was set up in 1978 to protect upland farms. It owns 40 farms and "
        "employs 120 people. Its office is in Penrith.",
    ),
    Case(
        "number changed in several sentences",
        "number",
        frozenset({"several sentences", "pronoun subject"}),
        "The Lindqvist ferry carries up to 420 passengers. It crosses the strait in 35 minutes "
        "and runs every hour from six in the morning.",
        "How many passengers can the Lindqvist ferry carry?",
        "The Lindqvist ferry carries up to 420 passengers. It crosses the strait in 35 minutes.",
        "The Lindqvist ferry carries up to 950 passengers. It crosses the strait in 35 minutes.",
    ),
    Case(
        "percentage changed",
        "number",
        frozenset({"one line"}),
        "Turnout in the Harwick council election was 64 percent, up from 58 percent four years "
        "earlier.",
        "What was the turnout in the Harwick council election?",
        "Turnout was 64 percent.",
        "Turnout was 46 percent.",
    ),
    Case(
        "cost changed",
        "number",
        frozenset({"one line"}),
        "The renovation of the Eastgate swimming pool cost 12 million euros and was paid for "
        "by the city.",
        "How much did the renovation of the Eastgate pool cost?",
        "The renovation of the Eastgate swimming pool cost 12 million euros.",
        "The renovation of the Eastgate swimming pool cost 18 million euros.",
    ),
    Case(
        "floor count changed",
        "number",
        frozenset({"one line", "pronoun subject"}),
        "The Aldine Tower has 14 floors and opened in 1998. Its top floor is a restaurant.",
        "How many floors does the Aldine Tower have?",
        "It has 14 floors.",
        "It has 22 floors.",
    ),
    Case(
        "a count changed in a list",
        "number",
        frozenset({"one line", "list", "pronoun subject"}),
        "The Quayside Kitchen's menu lists 3 soups, 5 main courses and 2 desserts.",
        "What does the Quayside Kitchen's menu list?",
        "It lists 3 soups, 5 main courses and 2 desserts.",
        "It lists 3 soups, 9 main courses and 2 desserts.",
    ),
    Case(
        "count of trees changed",
        "number",
        frozenset({"several sentences", "passive"}),
        "About 3,500 trees were planted by volunteers along the Wendle canal in 2021. Most of "
        "them are alders.",
        "How many trees were planted along the Wendle canal?",
        "About 3,500 trees were planted by volunteers in 2021. Most of them are alders.",
        "About 8,000 trees were planted by volunteers in 2021. Most of them are alders.",
    ),
    Case(
        "pupil count changed in the second sentence",
        "number",
        frozenset({"several sentences", "pronoun subject"}),
        "Brookfield School opened in 1994. It now teaches 850 pupils aged 11 to 18.",
        "How many pupils does Brookfield School teach?",
        "Brookfield School opened in 1994. It now teaches 850 pupils.",
        "Brookfield School opened in 1994. It now teaches 580 pupils.",
    ),
    Case(
        "share changed, written with a sign",
        "number",
        frozenset({"one line"}),
        "Renewables supplied 38% of the region's electricity in 2022, mostly from wind.",
        "What share of the region's electricity came from renewables in 2022?",
        "Renewables supplied 38% of the region's electricity in 2022.",
        "Renewables supplied 83% of the region's electricity in 2022.",
    ),
    Case(
        "year changed",
        "date",
        frozenset({"one line", "passive"}),
        "The Karsk observatory was completed in 1932 on the northern ridge. Its main telescope "
        "has a 1.2-metre mirror.",
        "When was the Karsk observatory completed?",
        "The Karsk observatory was completed in 1932.",
        "The Karsk observatory was completed in 1958.",
    ),
    Case(
        "full date changed",
        "date",
        frozenset({"one line", "passive"}),
        "The Treaty of Velmar was signed on 14 March 1921 by the two neighbouring states.",
        "When was the Treaty of Velmar signed?",
        "The Treaty of Velmar was signed on 14 March 1921.",
        "The Treaty of Velmar was signed on 22 October 1921.",
    ),
    Case(
        "year of a month and year changed",
        "date",
        frozenset({"one line"}),
        "The Northern tram line opened in April 2016 and runs every ten minutes.",
        "When did the Northern tram line open?",
        "The Northern tram line opened in April 2016.",
        "The Northern tram line opened in April 2019.",
    ),
    Case(
        "birth year changed",
        "date",
        frozenset({"one line", "pronoun subject", "passive"}),
        "The poet Ilse Varga was born in 1957 in Pecs. Her first collection appeared in 1981.",
        "When was Ilse Varga born?",
        "She was born in 1957.",
        "She was born in 1962.",
    ),
    Case(
        "rebuilding year changed",
        "date",
        frozenset({"several sentences", "passive", "pronoun subject"}),
        "St. Brannoc's Church burned down in 1869. It was rebuilt in 1871, and its tower was "
        "added in 1902.",
        "When was St. Brannoc's Church rebuilt?",
        "The church burned down in 1869. It was rebuilt in 1871.",
        "The church burned down in 1869. It was rebuilt in 1891.",
    ),
    Case(
        "a year changed in a list",
        "date",
        frozenset({"one line", "list"}),
        "Harrowgate United won the league title in 1998, 2003 and 2011.",
        "When did Harrowgate United win the league?",
        "Harrowgate United won the league in 1998, 2003 and 2011.",
        "Harrowgate United won the league in 1998, 2005 and 2011.",
    ),
    Case(
        "day of a date changed",
        "date",
        frozenset({"one line", "pronoun subject"}),
        "The Orlen bridge reopened on 9 September 2022 after eighteen months of repairs.",
        "When did the Orlen bridge reopen?",
        "It reopened on 9 September 2022.",
        "It reopened on 23 September 2022.",
    ),
    Case(
        "invented person as a short answer",
        "invented person",
        frozenset({"short answer"}),
        "The orchestra's principal conductor is Amara Osei, who joined in 2019. The orchestra "
        "gives forty concerts a season.",
        "Who is the orchestra's principal conductor?",
        "Amara Osei.",
        "Henrik Dahl.",
    ),
    Case(
        "invented author as a short answer",
        "invented person",
        frozenset({"short answer"}),
        "The flood report for the ministry was written by Dr. Ruth Adeyemi and published in May.",
        "Who wrote the flood report?",
        "Dr. Ruth Adeyemi.",
        "Dr. Simon Hale.",
    ),
    Case(
        "invented family name alone",
        "invented person",
        frozenset({"short answer"}),
        "The national hockey team is coached by Alicia Mendoza, a former goalkeeper.",
        "Who coaches the national hockey team?",
        "Mendoza.",
        "Ferreira.",
    ),
    Case(
        "invented place as a short answer",
        "invented place",
        frozenset({"short answer", "pronoun subject"}),
        "The cooperative's main warehouse is in Nairobi, beside the rail depot. It opened in "
        "2015 and employs forty people.",
        "Where is the cooperative's main warehouse?",
        "It is in Nairobi.",
        "It is in Mombasa.",
    ),
    Case(
        "invented country as a short answer",
        "invented place",
        frozenset({"short answer"}),
        "The Tessaro coffee blend is roasted in Trieste from beans grown in Ethiopia.",
        "Where are the beans of the Tessaro blend grown?",
        "In Ethiopia.",
        "In Colombia.",
    ),
    Case(
        "invented host city, one word",
        "invented place",
        frozenset({"short answer"}),
        "The Arbor Climate Summit is hosted in Geneva each spring.",
        "Which city hosts the Arbor Climate Summit?",
        "Geneva.",
        "Vienna.",
    ),
    Case(
        "invented venue city after a pronoun",
        "invented place",
        frozenset({"short answer", "pronoun subject", "passive"}),
        "The 2019 chess olympiad of the region was held in Granada over eleven days.",
        "Where was the 2019 chess olympiad held?",
        "It was held in Granada.",
        "It was held in Seville.",
    ),
    Case(
        "invented maker as a short answer",
        "invented organisation",
        frozenset({"short answer"}),
        "The air-quality sensors on the tram stops are made by Quillon Devices in Graz.",
        "Which company makes the sensors on the tram stops?",
        "Quillon Devices.",
        "Marten Electronics.",
    ),
    Case(
        "invented builder organisation, passive",
        "invented organisation",
        frozenset({"short answer", "pronoun subject", "passive"}),
        "The harbour crane was supplied by Torvald Machines in 2008.",
        "Who supplied the harbour crane?",
        "It was supplied by Torvald Machines.",
        "It was supplied by Hestia Cranes.",
    ),
]


def _score(context: str, question: str, answer: str) -> tuple[bool | None, str]:
    """The verdict and explanation of the evaluator as shipped (`bench/detector_ablation.py`
    scores the guard through this too)."""
    evaluator = LocalGroundedness(EvaluatorConfig(name="local_groundedness"))
    record = RagRecord(
        request_id="guard",
        query=question,
        retrieved_context=(ContextDoc(content=context, doc_uri="kb"),),
        response=answer,
    )
    result = evaluator.score(record)
    return result.passed, result.explanation or ""


@cache
def _judged(
    context: str, question: str, answer: str
) -> tuple[bool | None, str, GroundednessVerdict]:
    passed, explanation = _score(context, question, answer)
    return passed, explanation, score_groundedness(question, [context], answer)


def test_the_guard_tries_every_kind_in_every_wording() -> None:
    assert len(CASES) >= 40
    assert {c.error for c in CASES} == {*KINDS, *INVENTED}
    missing = [
        (kind, wording)
        for kind in KINDS
        for wording in WORDINGS
        if not any(c.error == kind and wording in c.wording for c in CASES)
    ]
    assert missing == []
    assert all("short answer" in c.wording for c in CASES if c.error in INVENTED)
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_blatant_error_fails(case: Case) -> None:
    passed, explanation, _ = _judged(case.context, case.question, case.wrong)
    assert passed is False, explanation


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_faithful_twin_passes(case: Case) -> None:
    passed, explanation, _ = _judged(case.context, case.question, case.faithful)
    assert passed is True, explanation


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_explanations_agree_with_the_verdict(case: Case) -> None:
    for answer in (case.faithful, case.wrong):
        passed, explanation, verdict = _judged(case.context, case.question, answer)
        assert passed is not None
        assert explanation_disagreement(passed, explanation, verdict) is None, explanation


def test_the_issue_s_two_regressions_fail_and_say_why_first() -> None:
    by_name = {c.name: c for c in CASES}
    founder = by_name["founder swapped in a restated sentence"]
    passed, explanation, _ = _judged(founder.context, founder.question, founder.wrong)
    assert passed is False
    assert explanation.startswith(
        "contradicted: answer says Magnus Eriksen; context says Ingrid Halvorsen"
    )
    warehouse = by_name["invented place as a short answer"]
    passed, explanation, _ = _judged(warehouse.context, warehouse.question, warehouse.wrong)
    assert passed is False
    assert explanation.startswith("unsupported: It is in Mombasa. | not in the context: Mombasa")


def test_the_wording_rule_flags_an_explanation_that_disagrees() -> None:
    founder = CASES[0]
    _, explanation, verdict = _judged(founder.context, founder.question, founder.wrong)
    assert verdict.decided_by == "contradiction"
    assert explanation_disagreement(False, explanation, verdict) is None
    # A pass that names a failure finding, a failure that says pass, and a failure that
    # leads with something other than the contradiction that decided it.
    assert explanation_disagreement(True, "pass; " + explanation, verdict) is not None
    assert explanation_disagreement(True, explanation, verdict) is not None
    assert explanation_disagreement(False, "pass; " + explanation, verdict) is not None
    unsupported = explanation.split(" | ", 1)[1]
    assert explanation_disagreement(False, unsupported, verdict) is not None
