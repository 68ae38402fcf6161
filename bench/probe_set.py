"""The planted-error probe set: fictional fact sheets, faithful answers and single planted errors.

    python bench/probe_set.py [--out PROBE.jsonl] [--seed N]

Each fact sheet describes an invented landmark, company, vessel, festival or research station
(names, places and people are generated from syllables, so no model has seen them). For every
sheet there are one-line answers (one question, one sentence) and multi-sentence answers (an
overview of three facts), each either faithful or carrying exactly one planted error:

- `number`: a quantity with its unit changed (sometimes to the value another thing in the same
  sheet has in that unit),
- `date`: the year or the month of a date changed,
- `name`: a person replaced (sometimes by another person named in the sheet),
- `negation`: a stated fact negated, or a negated fact stated,
- `extra`: an invented claim added that the sheet does not contain.

Answers are worded differently from the sheet (templates of their own), so a faithful answer
is a paraphrase, not a copy. The generator is deterministic for a seed; records are in the
native record shape with `label = {hallucinated, kind, length, sheet}`. The probe measures; it
is never used to fit or tune anything (`bench/train_detector.py` trains on perturbations of
other data).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SEED = 4242
SHEETS = 40
MONTHS = (
    "January February March April May June July August September October November December"
).split()
_FIRST = (
    "Ilsa Tomas Maren Oskar Petra Anselm Veda Corin Dagny Emeric Halvard Ines Jorun Kasimir "
    "Liesl Mattias Nadia Orla Priya Rune Selma Teodor Ulla Viggo Wanda Yusuf Zora Bastian "
    "Celeste Dorian Edda Florin Greta Hugo Idris Jasna Konrad Lenka Milo Noor"
).split()
_ONSET = (
    "Var Bren Kel Tor Mar Ost Hal Dre Lun Fen Sil Gar Quen Rav Thal Wes Corm Elb Ysk Pell".split()
)
_CODA = (
    "holt wick ane berg mont ley ridge stad ova ard ell sen ström by acre dahl ness ford".split()
)
_PLACE = "port haven minster field mouth bury vale stead crag wold".split()


def _surname(rng: random.Random) -> str:
    return rng.choice(_ONSET) + rng.choice(_CODA)


def _person(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST)} {_surname(rng)}"


def _place(rng: random.Random) -> str:
    return rng.choice(_ONSET) + rng.choice(_PLACE)


def _date(rng: random.Random, lo: int, hi: int) -> tuple[int, str, int]:
    return rng.randint(1, 28), rng.choice(MONTHS), rng.randint(lo, hi)


def _fmt_date(d: tuple[int, str, int]) -> str:
    return f"{d[1]} {d[0]}, {d[2]}"


def _fmt_num(n: int) -> str:
    return f"{n:,}"


@dataclass(frozen=True, slots=True)
class Fact:
    """One attribute: how the sheet states it, how a question asks it, how answers put it.

    `answer` takes the value (already formatted); `slot` says which kind of planted error it
    carries (number, date, name, negation).
    """

    slot: str
    question: str
    answer: Callable[[str], str]
    value: str
    wrong: Callable[[random.Random], str]


@dataclass(slots=True)
class Sheet:
    title: str
    text: str
    facts: list[Fact]
    extras: list[str]


def _shift_number(rng: random.Random, n: int, others: list[int]) -> int:
    if others and rng.random() < 0.3:
        candidate = rng.choice(others)
        if candidate != n:
            return candidate
    factor = rng.choice((0.4, 0.5, 0.6, 0.7, 1.4, 1.5, 2.0, 2.5, 3.0))
    out = int(round(n * factor, -1 if n >= 100 else 0))
    return out if out != n else n + rng.randint(2, 9)


def _shift_date(rng: random.Random, d: tuple[int, str, int]) -> tuple[int, str, int]:
    if rng.random() < 0.6:
        return d[0], d[1], d[2] + rng.choice((-27, -12, -9, -4, -2, 2, 3, 6, 11, 19))
    month = rng.choice([m for m in MONTHS if m != d[1]])
    return d[0], month, d[2]


def _other_person(rng: random.Random, person: str, others: list[str]) -> str:
    if others and rng.random() < 0.3:
        return rng.choice(others)
    while True:
        candidate = _person(rng)
        if candidate != person and candidate.split()[1] != person.split()[1]:
            return candidate


def _tower(rng: random.Random) -> Sheet:
    name = f"{_surname(rng)} Tower"
    city = _place(rng)
    architect, engineer, mayor = _person(rng), _person(rng), _person(rng)
    height, deck = rng.randint(120, 640), rng.randint(80, 900)
    bridge_len = rng.randint(150, 900)
    cost = rng.randint(12, 480)
    opened = _date(rng, 1890, 2015)
    bridge_year = rng.randint(1880, 2018)
    bridge = f"{_surname(rng)} Bridge"
    text = (
        f"The {name} stands on the waterfront of {city}. It rises {_fmt_num(height)} metres "
        f"above the harbour and was designed by the architect {architect}. The tower opened "
        f"to the public on {_fmt_date(opened)}, after {rng.randint(3, 9)} years of work. Its "
        f"observation deck can hold up to {_fmt_num(deck)} visitors at a time. The project "
        f"cost {cost} million dollars, paid by the {city} harbour board. Visitors can climb "
        f"the stairs to the top on weekends. The steel frame was calculated by the engineer "
        f"{engineer}. Nearby, the {bridge}, finished in {bridge_year}, spans {bridge_len} "
        f"metres across the estuary. The tower was inaugurated by the mayor, {mayor}."
    )
    people = [engineer, mayor]
    facts = [
        Fact(
            "number",
            f"How tall is the {name}?",
            lambda v: f"The {name} is {v} metres tall.",
            _fmt_num(height),
            lambda r: _fmt_num(_shift_number(r, height, [bridge_len])),
        ),
        Fact(
            "date",
            f"When did the {name} open?",
            lambda v: f"The {name} opened to visitors on {v}.",
            _fmt_date(opened),
            lambda r: _fmt_date(_shift_date(r, opened)),
        ),
        Fact(
            "name",
            f"Who designed the {name}?",
            lambda v: f"The {name} was designed by {v}.",
            architect,
            lambda r: _other_person(r, architect, people),
        ),
        Fact(
            "number",
            "How many people fit on the observation deck?",
            lambda v: f"The observation deck holds up to {v} visitors.",
            _fmt_num(deck),
            lambda r: _fmt_num(_shift_number(r, deck, [])),
        ),
        Fact(
            "negation",
            "Can visitors climb to the top?",
            lambda v: (
                "Yes, visitors can climb the stairs to the top on weekends."
                if v == "yes"
                else "No, visitors cannot climb the stairs to the top on weekends."
            ),
            "yes",
            lambda r: "no",
        ),
    ]
    extras = [
        "A revolving restaurant occupies the top floor.",
        f"It was the tallest building in the country until {opened[2] + 31}.",
        "Its lights turn green every spring to mark the fishing season.",
        f"The interior murals were painted by {_person(rng)}.",
    ]
    return Sheet(name, text, facts, extras)


def _company(rng: random.Random) -> Sheet:
    name = f"{_surname(rng)} {rng.choice(['Instruments', 'Foods', 'Textiles', 'Robotics'])}"
    city = _place(rng)
    founder, ceo, partner = _person(rng), _person(rng), _person(rng)
    staff, plants = rng.randint(140, 9000), rng.randint(2, 14)
    revenue = rng.randint(20, 900)
    founded = _date(rng, 1860, 2012)
    text = (
        f"{name} is a manufacturer based in {city}. The firm was founded on "
        f"{_fmt_date(founded)} by {founder}, a former watchmaker. Today it employs "
        f"{_fmt_num(staff)} people and runs {plants} factories. Annual revenue reached "
        f"{revenue} million euros last year. The chief executive is {ceo}. The company does "
        f"not sell directly to consumers; its products reach shops through distributors. "
        f"Its oldest supplier, run by {partner}, has delivered parts for decades."
    )
    people = [ceo, partner]
    facts = [
        Fact(
            "name",
            f"Who founded {name}?",
            lambda v: f"{name} was founded by {v}.",
            founder,
            lambda r: _other_person(r, founder, people),
        ),
        Fact(
            "date",
            f"When was {name} founded?",
            lambda v: f"The company was established on {v}.",
            _fmt_date(founded),
            lambda r: _fmt_date(_shift_date(r, founded)),
        ),
        Fact(
            "number",
            f"How many people work at {name}?",
            lambda v: f"{name} has a workforce of {v} employees.",
            _fmt_num(staff),
            lambda r: _fmt_num(_shift_number(r, staff, [])),
        ),
        Fact(
            "number",
            "How much revenue does it make?",
            lambda v: f"Its yearly revenue was {v} million euros.",
            str(revenue),
            lambda r: str(_shift_number(r, revenue, [])),
        ),
        Fact(
            "negation",
            "Can consumers buy directly from the company?",
            lambda v: (
                "No, the company does not sell directly to consumers; shops get its products "
                "through distributors."
                if v == "no"
                else "Yes, the company sells directly to consumers as well as through distributors."
            ),
            "no",
            lambda r: "yes",
        ),
        Fact(
            "name",
            f"Who runs {name}?",
            lambda v: f"The company is led by its chief executive, {v}.",
            ceo,
            lambda r: _other_person(r, ceo, [founder, partner]),
        ),
    ]
    extras = [
        "It is listed on the stock exchange.",
        f"The company opened a research centre in {_place(rng)} in {founded[2] + 44}.",
        "Most of its sales come from exports to Asia.",
        "It was once owned by a large mining group.",
    ]
    return Sheet(name, text, facts, extras)


def _vessel(rng: random.Random) -> Sheet:
    name = f"RV {_surname(rng)}"
    port = _place(rng)
    captain, builder_person, scientist = _person(rng), _person(rng), _person(rng)
    length, crew, depth = rng.randint(40, 140), rng.randint(12, 60), rng.randint(800, 6000)
    launched = _date(rng, 1950, 2020)
    text = (
        f"The {name} is an oceanographic research vessel whose home port is {port}. She is "
        f"{length} metres long and carries a crew of {crew}. The ship was launched on "
        f"{_fmt_date(launched)} at the yard of {builder_person}. Her sonar can map the sea "
        f"floor down to {_fmt_num(depth)} metres. The current captain is {captain}. The "
        f"vessel is not equipped for work in polar ice. Its chief scientist, {scientist}, "
        f"leads the plankton survey each summer."
    )
    facts = [
        Fact(
            "number",
            f"How long is the {name}?",
            lambda v: f"The {name} has a length of {v} metres.",
            str(length),
            lambda r: str(_shift_number(r, length, [])),
        ),
        Fact(
            "date",
            f"When was the {name} launched?",
            lambda v: f"She was launched on {v}.",
            _fmt_date(launched),
            lambda r: _fmt_date(_shift_date(r, launched)),
        ),
        Fact(
            "name",
            f"Who captains the {name}?",
            lambda v: f"The ship is captained by {v}.",
            captain,
            lambda r: _other_person(r, captain, [scientist, builder_person]),
        ),
        Fact(
            "number",
            "How many crew does she carry?",
            lambda v: f"She sails with a crew of {v}.",
            str(crew),
            lambda r: str(_shift_number(r, crew, [])),
        ),
        Fact(
            "negation",
            "Can the ship operate in polar ice?",
            lambda v: (
                "No, the vessel is not equipped to work in polar ice."
                if v == "no"
                else "Yes, the vessel is equipped to work in polar ice."
            ),
            "no",
            lambda r: "yes",
        ),
        Fact(
            "number",
            "How deep can its sonar map?",
            lambda v: f"Its sonar maps the sea floor to a depth of {v} metres.",
            _fmt_num(depth),
            lambda r: _fmt_num(_shift_number(r, depth, [length])),
        ),
    ]
    extras = [
        "She also carries a small submarine for deep dives.",
        f"The ship was refitted in {launched[2] + 23}.",
        "Her hull is painted bright red.",
        f"She is named after the explorer {_person(rng)}.",
    ]
    return Sheet(name, text, facts, extras)


def _festival(rng: random.Random) -> Sheet:
    town = _place(rng)
    name = f"{town} {rng.choice(['Folk', 'Lantern', 'Film', 'Harvest'])} Festival"
    founder, director, headliner = _person(rng), _person(rng), _person(rng)
    visitors, days, stages = rng.randint(2000, 90000), rng.randint(2, 12), rng.randint(2, 9)
    first = _date(rng, 1920, 2016)
    ticket = rng.randint(15, 180)
    text = (
        f"The {name} takes place every year in the town of {town}. It was first held on "
        f"{_fmt_date(first)}, organised by {founder}. The festival lasts {days} days and "
        f"draws about {_fmt_num(visitors)} visitors. Performances are spread over {stages} "
        f"stages in the old market square. A full pass costs {ticket} euros. Dogs are not "
        f"allowed on the festival grounds. The artistic director is {director}, and this "
        f"year's closing act is {headliner}."
    )
    facts = [
        Fact(
            "date",
            f"When was the first {name}?",
            lambda v: f"The first edition was held on {v}.",
            _fmt_date(first),
            lambda r: _fmt_date(_shift_date(r, first)),
        ),
        Fact(
            "name",
            f"Who started the {name}?",
            lambda v: f"The festival was started by {v}.",
            founder,
            lambda r: _other_person(r, founder, [director, headliner]),
        ),
        Fact(
            "number",
            "How many people attend?",
            lambda v: f"Around {v} people attend the festival.",
            _fmt_num(visitors),
            lambda r: _fmt_num(_shift_number(r, visitors, [])),
        ),
        Fact(
            "number",
            "How much is a festival pass?",
            lambda v: f"A pass for the whole festival is {v} euros.",
            str(ticket),
            lambda r: str(_shift_number(r, ticket, [])),
        ),
        Fact(
            "negation",
            "Can I bring my dog?",
            lambda v: (
                "No, dogs are not permitted on the festival grounds."
                if v == "no"
                else "Yes, dogs are permitted on the festival grounds."
            ),
            "no",
            lambda r: "yes",
        ),
        Fact(
            "number",
            "How long does the festival last?",
            lambda v: f"The festival runs for {v} days.",
            str(days),
            lambda r: str(_shift_number(r, days, [stages])),
        ),
    ]
    extras = [
        "Entry is free for children under twelve.",
        "A fireworks show closes every evening.",
        f"In {first[2] + 17} the festival was cancelled because of flooding.",
        f"The mayor of {town}, {_person(rng)}, opens it each year.",
    ]
    return Sheet(name, text, facts, extras)


def _station(rng: random.Random) -> Sheet:
    name = f"{_surname(rng)} Research Station"
    region = f"the {_surname(rng)} Plateau"
    director, builder, botanist = _person(rng), _person(rng), _person(rng)
    altitude, staff, km = rng.randint(900, 4800), rng.randint(6, 70), rng.randint(12, 300)
    opened = _date(rng, 1930, 2019)
    text = (
        f"The {name} sits on {region} at an altitude of {_fmt_num(altitude)} metres. It "
        f"opened on {_fmt_date(opened)} and was built by the firm of {builder}. Up to {staff} "
        f"scientists live there during the summer. The nearest road ends {km} kilometres "
        f"away, so supplies arrive by helicopter. The station director is {director}. "
        f"The station is powered by solar panels and does not use diesel generators. "
        f"Its greenhouse, run by the botanist {botanist}, grows vegetables all year."
    )
    facts = [
        Fact(
            "number",
            f"At what altitude is the {name}?",
            lambda v: f"The station is located {v} metres above sea level.",
            _fmt_num(altitude),
            lambda r: _fmt_num(_shift_number(r, altitude, [])),
        ),
        Fact(
            "date",
            f"When did the {name} open?",
            lambda v: f"It began operating on {v}.",
            _fmt_date(opened),
            lambda r: _fmt_date(_shift_date(r, opened)),
        ),
        Fact(
            "name",
            f"Who directs the {name}?",
            lambda v: f"The station is directed by {v}.",
            director,
            lambda r: _other_person(r, director, [botanist, builder]),
        ),
        Fact(
            "number",
            "How far away is the nearest road?",
            lambda v: f"The closest road ends {v} kilometres from the station.",
            str(km),
            lambda r: str(_shift_number(r, km, [])),
        ),
        Fact(
            "negation",
            "Does the station use diesel generators?",
            lambda v: (
                "No, it does not use diesel generators; it runs on solar panels."
                if v == "no"
                else "Yes, it uses diesel generators alongside its solar panels."
            ),
            "no",
            lambda r: "yes",
        ),
        Fact(
            "number",
            "How many scientists stay there?",
            lambda v: f"In summer as many as {v} scientists live at the station.",
            str(staff),
            lambda r: str(_shift_number(r, staff, [])),
        ),
    ]
    extras = [
        "It also operates a weather radar for the national forecast.",
        f"A second station was added in {opened[2] + 21}.",
        "Tourists can book guided tours in winter.",
        f"The station is named after the geologist {_person(rng)}.",
    ]
    return Sheet(name, text, facts, extras)


KINDS = (_tower, _company, _vessel, _festival, _station)
ERRORS = ("number", "date", "name", "negation", "extra")


def _with_extra(answer: str, extra: str, one_line: bool) -> str:
    if not one_line:
        return f"{answer} {extra}"
    return f"{answer.rstrip('.')}, and {extra[0].lower()}{extra[1:]}"


def _statement(answer: str) -> str:
    """An answer sentence as part of an overview: without its leading "Yes," / "No,"."""
    for lead in ("Yes, ", "No, "):
        if answer.startswith(lead):
            rest = answer[len(lead) :]
            return rest[0].upper() + rest[1:]
    return answer


def _chunks(sheet: Sheet, other: Sheet, rng: random.Random) -> list[dict[str, str]]:
    """What a retriever returns: the sheet in two chunks (split at a sentence) and a chunk of
    another sheet, in a shuffled order."""
    own = re.split(r"(?<=\.)\s+(?=[A-Z])", sheet.text)
    theirs = re.split(r"(?<=\.)\s+(?=[A-Z])", other.text)
    cut = rng.randint(2, len(own) - 2)
    half = len(theirs) // 2
    chunks = [
        {"content": " ".join(own[:cut]), "doc_uri": f"probe://{sheet.title}#1"},
        {"content": " ".join(own[cut:]), "doc_uri": f"probe://{sheet.title}#2"},
        {"content": " ".join(theirs[half:]), "doc_uri": f"probe://{other.title}#2"},
    ]
    rng.shuffle(chunks)
    return chunks


def _record(
    sheet: Sheet,
    other: Sheet,
    rng: random.Random,
    n: int,
    question: str,
    answer: str,
    kind: str,
    length: str,
) -> dict[str, object]:
    return {
        "request_id": f"probe-{n:05d}",
        "request": question,
        "retrieved_context": _chunks(sheet, other, rng),
        "response": answer,
        "label": {
            "hallucinated": kind != "faithful",
            "kind": kind,
            "length": length,
            "sheet": sheet.title,
        },
    }


def build(seed: int = SEED, sheets: int = SHEETS) -> list[dict[str, object]]:
    """The probe records, deterministic for `seed`."""
    rng = random.Random(seed)
    made = [KINDS[i % len(KINDS)](rng) for i in range(sheets)]
    out: list[dict[str, object]] = []
    for i, sheet in enumerate(made):
        other = made[(i + 1) % len(made)]

        def record(
            question: str,
            answer: str,
            kind: str,
            length: str,
            sheet: Sheet = sheet,
            other: Sheet = other,
        ) -> dict[str, object]:
            return _record(sheet, other, rng, len(out), question, answer, kind, length)

        by_slot = {
            s: [f for f in sheet.facts if f.slot == s]
            for s in ("number", "date", "name", "negation")
        }
        # One-line answers: two faithful, then one per error kind.
        for fact in rng.sample(sheet.facts, 2):
            out.append(record(fact.question, fact.answer(fact.value), "faithful", "one_line"))
        for kind in ERRORS:
            if kind == "extra":
                fact = rng.choice(sheet.facts)
                answer = _with_extra(fact.answer(fact.value), rng.choice(sheet.extras), True)
            else:
                fact = rng.choice(by_slot[kind])
                answer = fact.answer(fact.wrong(rng))
            out.append(record(fact.question, answer, kind, "one_line"))
        # Multi-sentence overviews of three facts: two faithful, then one per error kind.
        question = f"Give me an overview of the {sheet.title}."
        for _ in range(2):
            chosen = rng.sample(sheet.facts, 3)
            answer = " ".join(_statement(f.answer(f.value)) for f in chosen)
            out.append(record(question, answer, "faithful", "multi"))
        for kind in ERRORS:
            if kind == "extra":
                chosen = rng.sample(sheet.facts, 3)
                parts = [_statement(f.answer(f.value)) for f in chosen]
                parts.insert(rng.randint(1, 3), rng.choice(sheet.extras))
            else:
                planted = rng.choice(by_slot[kind])
                rest = rng.sample([f for f in sheet.facts if f is not planted], 2)
                chosen = [*rest, planted]
                rng.shuffle(chosen)
                parts = [
                    _statement(f.answer(f.wrong(rng) if f is planted else f.value)) for f in chosen
                ]
            out.append(record(question, " ".join(parts), kind, "multi"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write JSONL here (default: stdout)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--sheets", type=int, default=SHEETS)
    args = parser.parse_args(argv)
    lines = "".join(json.dumps(r) + "\n" for r in build(args.seed, args.sheets))
    if args.out is None:
        sys.stdout.write(lines)
    else:
        args.out.write_text(lines, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
