"""The family probe: planted errors in answers about invented fact sheets, split by template family.

    python -m training.probe_families [--out PROBE.jsonl] [--seed N] [--sheets N] [--split dev|report|all]

Each *family* is a sheet template written on its own (a ferry line, a bakery, a foundry, ...):
its own sentences for the sheet, its own questions and its own answer phrasings (plain,
pronoun subjects, passive voice, yes/no answers, hedges; several facts as prose or as a list).
Names and places are generated from syllables, so no model has seen them. Every answer is
either faithful or carries exactly one planted error of one of these kinds:

- `number`: a quantity changed, same unit, or moved onto the other noun of its sentence
  ("12 sopranos and 5 basses" -> "5 sopranos and 12 basses");
- `unit`: the same number with another unit or period ("40 minutes" -> "40 hours");
- `date`: a year changed;
- `role`: a person of the sheet put into another person's role;
- `cohyponym`: a kind swapped for another of its class (animal, metal, colour, city, wood,
  instrument, grain);
- `antonym`: a direction or position reversed (east/west, upstream/downstream, above/below);
- `negation`: a stated fact negated, or a negated fact stated (`label.direction` says which),
  in statements and in yes/no answers;
- `extra`: an invented clause or sentence about the same subject.

Families are split in two: `DEV_FAMILIES` may be looked at while developing the detector;
`REPORT_FAMILIES` are only scored for the report (their misses are not read). The records are
in the native record shape with `label = {hallucinated, kind, length, family, split, sheet}`;
nothing here is used to fit a model.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

SEED = 2611
SHEETS = 6

_FIRST = (
    "Ilsa Tomas Maren Oskar Petra Anselm Veda Corin Dagny Emeric Halvard Ines Jorun Kasimir "
    "Liesl Mattias Nadia Orla Priya Rune Selma Teodor Ulla Viggo Wanda Yusuf Zora Bastian "
    "Celeste Dorian Edda Florin Greta Hugo Idris Jasna Konrad Lenka Milo Noor"
).split()
_ONSET = "Var Bren Kel Tor Mar Ost Hal Dre Lun Fen Sil Gar Quen Rav Thal Wes Corm Elb Ysk".split()
_CODA = "holt wick ane berg mont ley ridge stad ova ard ell sen by acre dahl ness ford".split()
_PLACE = "port haven minster field mouth bury vale stead crag wold".split()

CLASSES = {
    "animal": "otter heron badger lynx beaver falcon salmon tortoise stag owl".split(),
    "metal": "copper bronze zinc tin iron silver brass nickel".split(),
    "colour": "red blue green yellow white black orange grey".split(),
    "city": "Lisbon Oslo Porto Lyon Ghent Bergen Turin Krakow Tallinn Leipzig".split(),
    "wood": "oak pine birch cedar walnut maple".split(),
    "instrument": "violin cello flute oboe trumpet harp".split(),
    "grain": "wheat barley rye oats maize".split(),
}
OPPOSITES = {
    "bank": [("east", "west"), ("north", "south")],
    "flow": [("upstream", "downstream")],
    "level": [("above", "below")],
    "time": [("before", "after")],
    "day": [("morning", "evening")],
    "season": [("summer", "winter")],
    "side": [("inside", "outside")],
    "trend": [("increased", "decreased"), ("rose", "fell")],
}
UNITS = {
    "time": ["minutes", "hours", "days"],
    "period": ["a day", "a week", "a month", "a year"],
    "length": ["metres", "kilometres"],
    "weight": ["kilograms", "tonnes"],
    "money": ["euros", "dollars"],
    "area": ["hectares", "square metres"],
    "count": [""],
}
ERRORS = ("number", "unit", "date", "role", "cohyponym", "antonym", "negation", "extra")
_HEDGES = ("I believe ", "According to the documents, ", "It seems that ", "As far as I can tell, ")


@dataclass(frozen=True, slots=True)
class F:
    """One fact of a family: how the sheet states it, how it is asked, how answers put it.

    `kind`: "num" (with `units`, a key of `UNITS`, and `span` = (lo, hi)), "date" (`span`
    of years), "role", "cat" (`cls`, a key of `CLASSES`), "opp" (`cls`, a key of
    `OPPOSITES`) or "pol" (`context` and `answers` hold the positive form, `negative` and
    `negative_answers` the negative one). Templates use {v} (the value), {u} (the unit),
    {T} (the sheet's title), {p} and {q} (two places). A "num" fact with `second` (a span)
    has a second number {w} on another noun of the same sentence; its `number` error swaps
    the two.
    """

    kind: str
    context: str
    question: str
    answers: tuple[str, ...]
    cls: str = ""
    span: tuple[int, int] = (0, 0)
    units: str = "count"
    negative: str = ""
    negative_answers: tuple[str, ...] = ()
    second: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    title: str
    intro: str
    facts: tuple[F, ...]
    extras: tuple[str, ...]
    filler: tuple[str, ...] = ()


def _yes(*answers: str) -> tuple[str, ...]:
    return answers


FAMILIES: tuple[Family, ...] = (
    Family(
        "ferry",
        "{S} Ferries",
        "{T} runs the crossing between {p} and {q}.",
        (
            F("num", "Boats leave {p} every {v} {u}.", "How often do the boats leave?",
              ("A boat leaves {p} every {v} {u}.", "They depart every {v} {u}."),
              span=(20, 90), units="time"),
            F("num", "Each crossing takes {v} {u}.", "How long is the crossing?",
              ("The crossing takes {v} {u}.", "It takes {v} {u} to cross."),
              span=(15, 70), units="time"),
            F("role", "The line was founded by {v}.", "Who founded the line?",
              ("{T} was founded by {v}.", "{v} founded it.")),
            F("role", "The current captain of the flagship is {v}.", "Who captains the flagship?",
              ("The flagship is captained by {v}.", "Its captain is {v}.")),
            F("opp", "The terminal sits on the {v} bank of the river.",
              "Where is the terminal?", ("The terminal is on the {v} bank.",
              "It stands on the {v} bank of the river."), cls="bank"),
            F("pol", "Bicycles are allowed on board.", "Can I bring my bike?",
              ("Yes, bicycles are allowed on board.", "Bikes are allowed on the boats."),
              negative="Bicycles are not allowed on board.",
              negative_answers=("No, bicycles are not allowed on board.",
                                "Bikes are not allowed on the boats.")),
            F("date", "The first boat sailed in {v}.", "When did the service start?",
              ("The first boat sailed in {v}.", "The service began in {v}."), span=(1890, 2010)),
        ),
        ("A café on board serves hot soup.", "The boats are painted with a gull on the bow.",
         "Tickets include free parking at the terminal."),
        ("Timetables change in spring.",),
    ),
    Family(
        "bakery",
        "{S} Bakery",
        "The {T} is a family bakery in {p}.",
        (
            F("num", "It bakes about {v} loaves {u}.", "How much bread does it bake?",
              ("It bakes about {v} loaves {u}.", "Roughly {v} loaves are baked {u}."),
              span=(200, 900), units="period"),
            F("cat", "Its best-known loaf is made from {v} flour.",
              "What flour is the famous loaf made from?",
              ("The best-known loaf uses {v} flour.", "It is made from {v} flour."), cls="grain"),
            F("role", "The head baker is {v}.", "Who is the head baker?",
              ("{v} is the head baker.", "The head baker is {v}.")),
            F("role", "The shop is owned by {v}.", "Who owns the bakery?",
              ("The bakery is owned by {v}.", "{v} owns the shop.")),
            F("pol", "The shop delivers on Sundays.", "Does it deliver on Sundays?",
              ("Yes, it delivers on Sundays.", "The bakery delivers on Sundays."),
              negative="The shop does not deliver on Sundays.",
              negative_answers=("No, it does not deliver on Sundays.",
                                "The bakery does not deliver on Sundays.")),
            F("opp", "The ovens are lit early in the {v}.", "When are the ovens lit?",
              ("The ovens are lit in the {v}.", "They light the ovens early in the {v}."),
              cls="day"),
            F("num", "A loaf costs {v} {u}.", "How much is a loaf?",
              ("A loaf costs {v} {u}.", "It sells a loaf for {v} {u}."),
              span=(2, 9), units="money"),
        ),
        ("It also runs baking classes for children.", "Its rye loaf won a national prize.",
         "The bakery uses only solar power."),
        ("The shop front is painted every few years.",),
    ),
    Family(
        "foundry",
        "{S} Foundry",
        "The {T} casts bells and statues in {p}.",
        (
            F("cat", "Its largest bell is cast in {v}.", "What is the largest bell made of?",
              ("The largest bell is made of {v}.", "It is cast in {v}."), cls="metal"),
            F("num", "The largest bell weighs {v} {u}.", "How heavy is the largest bell?",
              ("The largest bell weighs {v} {u}.", "It weighs {v} {u}."),
              span=(3, 40), units="weight"),
            F("role", "The foundry master is {v}.", "Who runs the foundry?",
              ("The foundry is run by its master, {v}.", "{v} is the foundry master.")),
            F("role", "Its statues are designed by the sculptor {v}.", "Who designs the statues?",
              ("The statues are designed by {v}.", "The sculptor {v} designs them.")),
            F("date", "The foundry was established in {v}.", "When was the foundry established?",
              ("It was established in {v}.", "The foundry dates from {v}."), span=(1700, 1990)),
            F("pol", "The furnaces run at night.", "Do the furnaces run at night?",
              ("Yes, the furnaces run at night.", "Its furnaces run at night."),
              negative="The furnaces never run at night.",
              negative_answers=("No, the furnaces do not run at night.",
                                "Its furnaces never run at night.")),
            F("opp", "The casting pit lies {v} the workshop floor.", "Where is the casting pit?",
              ("The casting pit is {v} the workshop floor.", "It lies {v} the floor."),
              cls="level"),
        ),
        ("Its bells ring in the royal palace.", "The foundry exports statues to Japan.",
         "Every bell carries a hidden inscription."),
        ("Visitors are shown the moulds on request.",),
    ),
    Family(
        "reserve",
        "{S} Reserve",
        "The {T} protects wetland near {p}.",
        (
            F("cat", "The reserve's emblem is the {v}.", "What is the reserve's emblem?",
              ("Its emblem is the {v}.", "The {v} is the emblem of the reserve."), cls="animal"),
            F("num", "It covers {v} {u} of marsh.", "How large is the reserve?",
              ("The reserve covers {v} {u}.", "It spans {v} {u} of marsh."),
              span=(40, 900), units="area"),
            F("role", "The chief ranger is {v}.", "Who is the chief ranger?",
              ("{v} is the chief ranger.", "The rangers are led by {v}.")),
            F("role", "The reserve was set up by the biologist {v}.", "Who set up the reserve?",
              ("It was set up by {v}.", "The biologist {v} set it up.")),
            F("opp", "The hide overlooks the lake from the {v} shore.", "Where is the hide?",
              ("The hide is on the {v} shore.", "It looks over the lake from the {v} shore."),
              cls="bank"),
            F("pol", "Dogs are permitted on the trails.", "Can I bring my dog?",
              ("Yes, dogs are permitted on the trails.", "Dogs may walk the trails."),
              negative="Dogs are not permitted on the trails.",
              negative_answers=("No, dogs are not permitted on the trails.",
                                "Dogs are not allowed on the trails.")),
            F("num", "Guided walks start every {v} {u}.", "How often are guided walks?",
              ("Guided walks start every {v} {u}.", "A walk begins every {v} {u}."),
              span=(2, 5), units="time"),
        ),
        ("Wolves were reintroduced there last year.", "The visitor centre has a glass roof.",
         "Entry is free for students."),
        ("Boardwalks cross the wettest parts.",),
    ),
    Family(
        "observatory",
        "{S} Observatory",
        "The {T} stands on a hill above {p}.",
        (
            F("num", "Its main mirror is {v} {u} wide.", "How wide is the main mirror?",
              ("The main mirror is {v} {u} wide.", "It measures {v} {u} across."),
              span=(2, 12), units="length"),
            F("role", "The director of the observatory is {v}.", "Who directs the observatory?",
              ("The observatory is directed by {v}.", "{v} is its director.")),
            F("role", "The dome was built by the engineer {v}.", "Who built the dome?",
              ("The dome was built by {v}.", "The engineer {v} built it.")),
            F("date", "First light was recorded in {v}.", "When was first light?",
              ("First light came in {v}.", "It recorded first light in {v}."),
              span=(1900, 2020)),
            F("opp", "Public nights are held in {v}.", "When are public nights?",
              ("Public nights are held in {v}.", "They hold public nights in {v}."),
              cls="season"),
            F("pol", "The telescope can be booked by amateurs.", "Can amateurs book the telescope?",
              ("Yes, amateurs can book the telescope.", "The telescope can be booked by amateurs."),
              negative="The telescope cannot be booked by amateurs.",
              negative_answers=("No, amateurs cannot book the telescope.",
                                "The telescope cannot be booked by amateurs.")),
            F("cat", "Its twin observatory is in {v}.", "Where is its twin observatory?",
              ("The twin observatory is in {v}.", "It is twinned with an observatory in {v}."),
              cls="city"),
        ),
        ("A planetarium opened next to it.", "The hill road is closed in snow.",
         "Its archive holds ten thousand photographic plates."),
        ("Light pollution is monitored nightly.",),
    ),
    Family(
        "library",
        "{S} Library",
        "The {T} is the public library of {p}.",
        (
            F("num", "It holds {v} {u} books.", "How many books does it hold?",
              ("It holds {v} books.", "The collection counts {v} books."),
              span=(20000, 400000)),
            F("role", "The head librarian is {v}.", "Who is the head librarian?",
              ("{v} is the head librarian.", "The library is led by {v}.")),
            F("role", "The reading room was designed by the architect {v}.",
              "Who designed the reading room?",
              ("The reading room was designed by {v}.", "The architect {v} designed it.")),
            F("cat", "The reading-room shelves are made of {v}.", "What are the shelves made of?",
              ("The shelves are made of {v}.", "They are built from {v}."), cls="wood"),
            F("pol", "Books can be borrowed without a card.", "Do I need a card to borrow?",
              ("No, books can be borrowed without a card.", "You can borrow without a card."),
              negative="Books cannot be borrowed without a card.",
              negative_answers=("Yes, books cannot be borrowed without a card.",
                                "You cannot borrow without a card.")),
            F("date", "The library opened in {v}.", "When did the library open?",
              ("The library opened in {v}.", "It opened its doors in {v}."), span=(1850, 2000)),
            F("opp", "Rare books are kept {v} the main hall.", "Where are rare books kept?",
              ("Rare books are kept {v} the main hall.", "They are stored {v} the hall."),
              cls="level"),
        ),
        ("It lends musical instruments too.", "The library has a rooftop garden.",
         "A café serves lunch in the atrium."),
        ("Membership is renewed each January.",),
    ),
    Family(
        "railway",
        "{S} Railway",
        "The {T} links {p} with {q}.",
        (
            F("num", "The line is {v} {u} long.", "How long is the line?",
              ("The line is {v} {u} long.", "It runs for {v} {u}."),
              span=(12, 140), units="length"),
            F("num", "Trains run {v} times {u}.", "How often do trains run?",
              ("Trains run {v} times {u}.", "There are {v} trains {u}."),
              span=(3, 20), units="period"),
            F("role", "The railway was engineered by {v}.", "Who engineered the railway?",
              ("The railway was engineered by {v}.", "{v} engineered the line.")),
            F("role", "The chief conductor is {v}.", "Who is the chief conductor?",
              ("The chief conductor is {v}.", "{v} is its chief conductor.")),
            F("opp", "The line follows the river {v} from {p}.", "Which way does the line run?",
              ("From {p} the line runs {v} along the river.", "It follows the river {v}."),
              cls="flow"),
            F("pol", "The trains are powered by steam.", "Are the trains steam powered?",
              ("Yes, the trains are powered by steam.", "Its trains run on steam."),
              negative="The trains are not powered by steam.",
              negative_answers=("No, the trains are not powered by steam.",
                                "Its trains do not run on steam.")),
            F("date", "The line opened in {v}.", "When did the line open?",
              ("The line opened in {v}.", "It has run since {v}."), span=(1840, 1960)),
        ),
        ("A dining car is added on weekends.", "The line crosses the border twice.",
         "Its oldest locomotive is kept in a museum."),
        ("Repairs are made in winter.",),
    ),
    Family(
        "vineyard",
        "{S} Estate",
        "The {T} grows grapes on the slopes near {p}.",
        (
            F("num", "The estate covers {v} {u}.", "How big is the estate?",
              ("The estate covers {v} {u}.", "It spreads over {v} {u}."),
              span=(8, 120), units="area"),
            F("role", "The winemaker is {v}.", "Who makes the wine?",
              ("The wine is made by {v}.", "{v} is the winemaker.")),
            F("role", "The estate belongs to {v}.", "Who owns the estate?",
              ("The estate belongs to {v}.", "It is owned by {v}.")),
            F("cat", "Its barrels are made of {v}.", "What are the barrels made of?",
              ("The barrels are made of {v}.", "It ages wine in {v} barrels."), cls="wood"),
            F("opp", "The vines face {v}.", "Which way do the vines face?",
              ("The vines face {v}.", "They are planted facing {v}."), cls="bank"),
            F("pol", "The estate offers tastings.", "Does the estate offer tastings?",
              ("Yes, the estate offers tastings.", "Tastings are offered at the estate."),
              negative="The estate does not offer tastings.",
              negative_answers=("No, the estate does not offer tastings.",
                                "Tastings are not offered at the estate.")),
            F("num", "A bottle sells for {v} {u}.", "How much is a bottle?",
              ("A bottle sells for {v} {u}.", "It costs {v} {u} a bottle."),
              span=(9, 60), units="money"),
        ),
        ("Its red wine is served on the royal train.", "The harvest is done by hand at night.",
         "Sheep graze between the rows."),
        ("The cellar stays cool all year.",),
    ),
    Family(
        "orchestra",
        "{S} Orchestra",
        "The {T} is the city orchestra of {p}.",
        (
            F("num", "It has {v} {u} players.", "How many players does it have?",
              ("The orchestra has {v} players.", "It counts {v} musicians."),
              span=(30, 110)),
            F("role", "Its chief conductor is {v}.", "Who conducts the orchestra?",
              ("The orchestra is conducted by {v}.", "{v} is the chief conductor.")),
            F("role", "The first violin is {v}.", "Who is the first violin?",
              ("{v} plays first violin.", "The first violin is {v}.")),
            F("cat", "Its soloist this season plays the {v}.", "What does the soloist play?",
              ("The soloist plays the {v}.", "This season's soloist is on {v}."),
              cls="instrument"),
            F("cat", "It tours to {v} every spring.", "Where does it tour?",
              ("It tours to {v} each spring.", "The orchestra travels to {v} in spring."),
              cls="city"),
            F("pol", "Rehearsals are open to the public.", "Can the public attend rehearsals?",
              ("Yes, rehearsals are open to the public.", "The public may attend rehearsals."),
              negative="Rehearsals are not open to the public.",
              negative_answers=("No, rehearsals are not open to the public.",
                                "The public may not attend rehearsals.")),
            F("date", "It gave its first concert in {v}.", "When was the first concert?",
              ("Its first concert was in {v}.", "It first played in {v}."), span=(1870, 1990)),
        ),
        ("It recorded an album with a rock band.", "Its concert hall seats four thousand.",
         "The orchestra plays free concerts in parks."),
        ("Tickets go on sale in August.",),
    ),
    Family(
        "lighthouse",
        "{S} Light",
        "The {T} guards the harbour mouth of {p}.",
        (
            F("num", "The tower is {v} {u} tall.", "How tall is the tower?",
              ("The tower is {v} {u} tall.", "It stands {v} {u} high."),
              span=(18, 70), units="length"),
            F("num", "Its beam reaches {v} {u}.", "How far does the beam reach?",
              ("The beam reaches {v} {u}.", "It can be seen {v} {u} away."),
              span=(10, 40), units="length"),
            F("cat", "The lantern room is painted {v}.", "What colour is the lantern room?",
              ("The lantern room is {v}.", "It is painted {v}."), cls="colour"),
            F("role", "The keeper is {v}.", "Who keeps the light?",
              ("The light is kept by {v}.", "{v} is the keeper.")),
            F("role", "The lens was made by the optician {v}.", "Who made the lens?",
              ("The lens was made by {v}.", "The optician {v} made it.")),
            F("pol", "The tower is open to visitors.", "Can I visit the tower?",
              ("Yes, the tower is open to visitors.", "Visitors can enter the tower."),
              negative="The tower is not open to visitors.",
              negative_answers=("No, the tower is not open to visitors.",
                                "Visitors cannot enter the tower.")),
            F("opp", "The keeper's house stands {v} the wall.", "Where is the keeper's house?",
              ("The keeper's house is {v} the wall.", "It stands {v} the harbour wall."),
              cls="side"),
        ),
        ("A shipwreck lies below the cliff.", "The light was automated by the navy.",
         "Seals rest on the rocks below."),
        ("Fog horns sound in bad weather.",),
    ),
    Family(
        "clinic",
        "{S} Clinic",
        "The {T} is a small hospital serving {p}.",
        (
            F("num", "It has {v} {u} beds.", "How many beds does it have?",
              ("The clinic has {v} beds.", "There are {v} beds."), span=(20, 300)),
            F("num", "Patients wait on average {v} {u}.", "How long is the wait?",
              ("Patients wait {v} {u} on average.", "The average wait is {v} {u}."),
              span=(10, 50), units="time"),
            F("role", "The medical director is {v}.", "Who is the medical director?",
              ("{v} is the medical director.", "The clinic is directed by {v}.")),
            F("role", "The head nurse is {v}.", "Who is the head nurse?",
              ("The head nurse is {v}.", "Nursing is led by {v}.")),
            F("pol", "The clinic accepts walk-in patients.", "Can I walk in without an appointment?",
              ("Yes, the clinic accepts walk-in patients.", "Walk-in patients are accepted."),
              negative="The clinic does not accept walk-in patients.",
              negative_answers=("No, the clinic does not accept walk-in patients.",
                                "Walk-in patients are not accepted.")),
            F("opp", "Visiting hours are in the {v}.", "When are visiting hours?",
              ("Visiting hours are in the {v}.", "You can visit in the {v}."), cls="day"),
            F("date", "The clinic was founded in {v}.", "When was the clinic founded?",
              ("It was founded in {v}.", "The clinic dates from {v}."), span=(1880, 2010)),
        ),
        ("It has a helicopter pad on the roof.", "The clinic runs a night school for nurses.",
         "Its garden grows medicinal herbs."),
        ("Parking is limited.",),
    ),
    Family(
        "club",
        "{S} Rovers",
        "{T} is the football club of {p}.",
        (
            F("num", "Its stadium holds {v} {u} fans.", "How many fans fit in the stadium?",
              ("The stadium holds {v} fans.", "It seats {v} supporters."),
              span=(3000, 40000)),
            F("role", "The club is coached by {v}.", "Who coaches the club?",
              ("{v} coaches the club.", "The coach is {v}.")),
            F("role", "The captain is {v}.", "Who is the captain?",
              ("The team is captained by {v}.", "{v} is the captain.")),
            F("cat", "The team plays in {v} shirts.", "What colour are the shirts?",
              ("The team wears {v} shirts.", "Its shirts are {v}."), cls="colour"),
            F("cat", "Its mascot is a {v}.", "What is the mascot?",
              ("The mascot is a {v}.", "A {v} is its mascot."), cls="animal"),
            F("pol", "The club has won the national cup.", "Has the club won the cup?",
              ("Yes, the club has won the national cup.", "It has won the national cup."),
              negative="The club has never won the national cup.",
              negative_answers=("No, the club has never won the national cup.",
                                "It has not won the national cup.")),
            F("opp", "Attendance {v} last season.", "How did attendance change?",
              ("Attendance {v} last season.", "Last season attendance {v}."), cls="trend"),
        ),
        ("Its youth academy is the largest in the country.", "The club owns a radio station.",
         "Its stadium has a retractable roof."),
        ("Season tickets sell out quickly.",),
    ),
    Family(
        "museum",
        "{S} Museum",
        "The {T} shows the history of {p}.",
        (
            F("num", "It displays {v} {u} objects.", "How many objects are on display?",
              ("It displays {v} objects.", "Some {v} objects are on show."),
              span=(500, 9000)),
            F("role", "The curator is {v}.", "Who is the curator?",
              ("The curator is {v}.", "The collection is curated by {v}.")),
            F("role", "The museum was funded by the merchant {v}.", "Who funded the museum?",
              ("It was funded by {v}.", "The merchant {v} paid for it.")),
            F("cat", "Its prize exhibit is a {v} crown.", "What is the prize exhibit?",
              ("The prize exhibit is a {v} crown.", "Its best piece is a crown of {v}."),
              cls="metal"),
            F("date", "The museum opened in {v}.", "When did the museum open?",
              ("The museum opened in {v}.", "It opened in {v}."), span=(1860, 2015)),
            F("pol", "Photography is allowed in the galleries.", "Can I take photos?",
              ("Yes, photography is allowed in the galleries.", "You may take photos inside."),
              negative="Photography is not allowed in the galleries.",
              negative_answers=("No, photography is not allowed in the galleries.",
                                "You may not take photos inside.")),
            F("opp", "The shop is {v} the entrance hall.", "Where is the shop?",
              ("The shop is {v} the entrance hall.", "You find it {v} the hall."),
              cls="side"),
        ),
        ("The museum has a replica of a Viking ship.", "Its cellar hosts a wine bar.",
         "Children enter free on Fridays."),
        ("The building was once a warehouse.",),
    ),
    Family(
        "dam",
        "{S} Dam",
        "The {T} holds back the river above {p}.",
        (
            F("num", "The wall is {v} {u} high.", "How high is the wall?",
              ("The wall is {v} {u} high.", "It rises {v} {u}."), span=(30, 220),
              units="length"),
            F("num", "It generates {v} {u} megawatts.", "How much power does it make?",
              ("It generates {v} megawatts.", "The plant produces {v} megawatts."),
              span=(40, 900)),
            F("role", "The dam was designed by {v}.", "Who designed the dam?",
              ("The dam was designed by {v}.", "{v} designed it.")),
            F("role", "The plant manager is {v}.", "Who manages the plant?",
              ("{v} manages the plant.", "The plant manager is {v}.")),
            F("opp", "The power station lies {v} of the wall.", "Where is the power station?",
              ("The power station is {v} of the wall.", "It lies {v} of the dam."),
              cls="flow"),
            F("pol", "Cars can drive across the crest.", "Can I drive across the dam?",
              ("Yes, cars can drive across the crest.", "The crest is open to cars."),
              negative="Cars cannot drive across the crest.",
              negative_answers=("No, cars cannot drive across the crest.",
                                "The crest is closed to cars.")),
            F("date", "Construction finished in {v}.", "When was it finished?",
              ("It was finished in {v}.", "Construction ended in {v}."), span=(1920, 2012)),
        ),
        ("The reservoir supplies water to the capital.", "A fish ladder runs beside the wall.",
         "The dam was damaged by an earthquake."),
        ("Inspections happen twice a year.",),
    ),
    # Development families written later, to widen what the rules are developed on: roles
    # worded otherwise than the sheet ("X's conductor is Y", "Y conducts X", "led by Y"), "its
    # main X is Y" frames, durations, two numbers in one sentence (a `number` error there
    # moves one onto the other's noun), yes/no answers to negated statements.
    Family(
        "choir",
        "{S} Singers",
        "The {T} are a chamber choir based in {p}.",
        (
            F("role", "The choir's conductor is {v}.", "Who conducts the choir?",
              ("{v} conducts the choir.", "The choir is led by {v}.",
               "Its conductor is {v}.")),
            F("role", "Its accompanist, {v}, plays at every concert.", "Who is the accompanist?",
              ("The accompanist is {v}.", "{v} accompanies the singers.",
               "They are accompanied by {v}.")),
            F("num", "The singers rehearse for {v} {u} before each concert.",
              "How long do they rehearse?",
              ("They rehearse {v} {u} before a concert.", "Rehearsals last {v} {u}."),
              span=(3, 40), units="time"),
            F("cat", "Its main accompanying instrument is the {v}.",
              "Which instrument accompanies the choir?",
              ("The choir's main instrument is the {v}.", "They sing with a {v}.",
               "It is accompanied mostly by the {v}."), cls="instrument"),
            F("pol", "Singers under sixteen are accepted.", "Can a fifteen-year-old join?",
              ("Yes, singers under sixteen are accepted.", "Members under sixteen may join."),
              negative="Singers under sixteen are not accepted.",
              negative_answers=("No, singers under sixteen are not accepted.",
                                "Members under sixteen may not join.")),
            F("opp", "Concerts begin {v} the evening service.", "When do concerts begin?",
              ("Concerts start {v} the evening service.", "They sing {v} the service."),
              cls="time"),
            F("num", "It has {v} sopranos and {w} basses.", "How big is the choir?",
              ("The choir has {v} sopranos and {w} basses.",
               "There are {v} sopranos and {w} basses in it."),
              span=(8, 30), second=(3, 20)),
        ),
        ("It recorded an album in a salt mine.", "The choir tours Japan every spring.",
         "Its singers wear green robes."),
        ("Auditions are held twice a year.",),
    ),
    Family(
        "brewery",
        "{S} Brewery",
        "The {T} brews ale in an old mill at {p}.",
        (
            F("role", "The brewery was founded by {v}.", "Who founded the brewery?",
              ("{v} founded the brewery.", "It was started by {v}.",
               "The brewery's founder is {v}.")),
            F("role", "Its master brewer is {v}.", "Who is the master brewer?",
              ("The beer is brewed under {v}.", "{v} is in charge of brewing.",
               "The master brewer is {v}.")),
            F("cat", "The fermenting vats are made of {v}.", "What are the vats made of?",
              ("Its vats are {v}.", "The beer ferments in {v} vats."), cls="metal"),
            F("num", "The ale matures for {v} {u}.", "How long does the ale mature?",
              ("The ale is matured for {v} {u}.", "Maturing takes {v} {u}."),
              span=(6, 60), units="time"),
            F("pol", "Tours are offered on weekdays.", "Are there tours on weekdays?",
              ("Yes, there are tours on weekdays.", "Tours run on weekdays."),
              negative="Tours are not offered on weekdays.",
              negative_answers=("No, there are no tours on weekdays.",
                                "Tours do not run on weekdays.")),
            F("opp", "The taproom is {v} the old mill.", "Where is the taproom?",
              ("You will find the taproom {v} the mill.", "The taproom is located {v} it."),
              cls="side"),
            F("num", "It fills {v} barrels a week for {w} pubs.", "How much does it sell?",
              ("It fills {v} barrels a week for {w} pubs.",
               "Every week {v} barrels go to {w} pubs."),
              span=(40, 300), second=(5, 30)),
        ),
        ("The brewery keeps its own hop garden.", "Its labels are drawn by local children.",
         "A wind turbine powers the mill."),
        ("Spent grain is given to farmers.",),
    ),
    Family(
        "harbour",
        "{S} Harbour",
        "{T} is a fishing port at the mouth of a river near {p}.",
        (
            F("role", "The harbour master is {v}.", "Who is the harbour master?",
              ("{v} is the harbour master.", "The harbour is managed by {v}.",
               "The port's master is {v}.")),
            F("role", "The lifeboat crew is commanded by {v}.", "Who commands the lifeboat?",
              ("{v} commands the lifeboat crew.", "The lifeboat's commander is {v}.",
               "The crew is led by {v}.")),
            F("cat", "The harbour lights are painted {v}.", "What colour are the lights?",
              ("Its lights are {v}.", "The lights are painted {v}."), cls="colour"),
            F("num", "The breakwater is {v} {u} long.", "How long is the breakwater?",
              ("The breakwater stretches {v} {u}.", "It is {v} {u} long."),
              span=(120, 900), units="length"),
            F("opp", "The fish market stands on the {v} quay.", "Where is the fish market?",
              ("The fish market is on the {v} quay.", "You find it on the {v} quay."),
              cls="bank"),
            F("pol", "Swimming is allowed in the harbour.", "Can I swim in the harbour?",
              ("Yes, swimming is allowed.", "You may swim in the harbour."),
              negative="Swimming is not allowed in the harbour.",
              negative_answers=("No, swimming is not allowed.",
                                "You may not swim in the harbour.")),
            F("date", "The breakwater was completed in {v}.", "When was the breakwater built?",
              ("It was completed in {v}.", "The breakwater has stood since {v}."),
              span=(1790, 1990)),
        ),
        ("The harbour freezes over in hard winters.", "Seals rest on the breakwater.",
         "A ferry to the islands leaves at noon."),
        ("Nets are mended on the slipway.",),
    ),
    Family(
        "school",
        "{S} School",
        "{T} is a secondary school in {p}.",
        (
            F("role", "The school's headteacher is {v}.", "Who is the headteacher?",
              ("{v} heads the school.", "It is headed by {v}.", "The headteacher is {v}.")),
            F("role", "The music department is run by {v}.", "Who runs music?",
              ("{v} runs the music department.", "Music is taught under {v}.",
               "The head of music is {v}.")),
            F("num", "Each lesson lasts {v} {u}.", "How long are lessons?",
              ("A lesson lasts {v} {u}.", "Lessons are {v} {u} long."),
              span=(35, 60), units="time"),
            F("cat", "The school mascot is the {v}.", "What is the mascot?",
              ("Its mascot is the {v}.", "The pupils' mascot is a {v}."), cls="animal"),
            F("opp", "Enrolment {v} last year.", "How did enrolment change?",
              ("Enrolment {v} last year.", "Last year the number of pupils {v}."),
              cls="trend"),
            F("pol", "Pupils are required to wear uniforms.", "Do pupils wear uniforms?",
              ("Yes, pupils are required to wear uniforms.", "Uniforms are required."),
              negative="Pupils are not required to wear uniforms.",
              negative_answers=("No, pupils are not required to wear uniforms.",
                                "Uniforms are not required.")),
            F("num", "It teaches {v} pupils in {w} classes.", "How many pupils are there?",
              ("It has {v} pupils in {w} classes.", "There are {v} pupils, taught in {w} classes."),
              span=(300, 1200), second=(12, 48)),
        ),
        ("The school has its own observatory.", "Pupils grow vegetables on the roof.",
         "Lessons start at seven."),
        ("The library opens at lunch.",),
    ),
    Family(
        "market",
        "{S} Market",
        "The {T} is a covered market in {p}.",
        (
            F("num", "It has {v} stalls.", "How many stalls are there?",
              ("There are {v} stalls.", "Traders run {v} stalls there.",
               "It houses {v} stalls."), span=(30, 250)),
            F("role", "The market is managed by {v}.", "Who manages the market?",
              ("{v} manages the market.", "The manager is {v}.", "It is run by {v}.")),
            F("role", "The oldest stall belongs to {v}.", "Who has the oldest stall?",
              ("{v} owns the oldest stall.", "The oldest stall is the one of {v}.")),
            F("cat", "The roof is painted {v}.", "What colour is the roof?",
              ("Its roof is {v}.", "The market has a {v} roof."), cls="colour"),
            F("opp", "Trading begins in the {v}.", "When does it open?",
              ("The market opens in the {v}.", "Trading starts in the {v}."), cls="day"),
            F("pol", "Cash is accepted at every stall.", "Can I pay cash?",
              ("Yes, you can pay cash.", "Every stall takes cash."),
              negative="Cash is not accepted at the stalls.",
              negative_answers=("No, you cannot pay cash.", "The stalls do not take cash.")),
            F("date", "The hall was built in {v}.", "How old is the hall?",
              ("It dates from {v}.", "The building went up in {v}."), span=(1850, 1990)),
        ),
        ("The market hosts a jazz night on Fridays.", "Its fish hall was rebuilt after a fire.",
         "Parking is free after six."),
        ("Deliveries arrive before dawn.",),
    ),
    Family(
        "planetarium",
        "{S} Planetarium",
        "The {T} sits at the edge of {p}, away from the city lights.",
        (
            F("num", "Its main telescope has a mirror {v} {u} across.",
              "How big is the telescope's mirror?",
              ("The main mirror measures {v} {u} across.", "Its mirror is {v} {u} wide."),
              span=(2, 9), units="length"),
            F("date", "The dome was completed in {v}.", "When was the dome finished?",
              ("The dome was finished in {v}.", "Work on the dome ended in {v}.",
               "It got its dome in {v}."), span=(1880, 2005)),
            F("role", "The director of the planetarium is {v}.", "Who is the director?",
              ("{v} directs the planetarium.", "It is directed by {v}.",
               "Its director is {v}.")),
            F("role", "Night tours are led by the astronomer {v}.", "Who leads the night tours?",
              ("The night tours are led by {v}.", "{v}, an astronomer, leads the tours.")),
            F("opp", "The visitor centre lies {v} the summit.", "Where is the visitor centre?",
              ("The visitor centre is {v} the summit.",
               "You will find the visitor centre {v} the summit."), cls="level"),
            F("pol", "Visitors may use the telescope on clear nights.",
              "Can visitors look through the telescope?",
              ("Yes, visitors may use it on clear nights.",
               "On clear nights the public can use the telescope."),
              negative="Visitors may not use the telescope.",
              negative_answers=("No, visitors may not use the telescope.",
                                "The public cannot use the telescope.")),
            F("num", "Last year the staff logged {v} meteors over {w} nights.",
              "How many meteors were logged?",
              ("{v} meteors were logged over {w} nights.",
               "Over {w} nights the staff counted {v} meteors."),
              span=(100, 900), second=(3, 30)),
        ),
        ("The planetarium also tracks satellites for the navy.",
         "A café on the summit sells star charts.", "Its telescope was moved there from Chile."),
        ("Clouds cover the hill for much of the year.",),
    ),
    Family(
        "apiary",
        "{S} Apiary",
        "The {T} keeps bees in the meadows around {p}.",
        (
            F("num", "The apiary has {v} hives.", "How many hives are there?",
              ("It keeps {v} hives.", "There are {v} hives.", "{v} hives stand in the meadows."),
              span=(40, 400)),
            F("num", "A jar of honey sells for {v} {u}.", "What does a jar of honey cost?",
              ("Honey costs {v} {u} a jar.", "They sell a jar for {v} {u}."),
              span=(4, 15), units="money"),
            F("cat", "The hives are painted {v}.", "What colour are the hives?",
              ("The hives are {v}.", "Its hives are painted {v}."), cls="colour"),
            F("role", "The beekeeper in charge is {v}.", "Who looks after the bees?",
              ("{v} is in charge of the bees.", "The bees are kept by {v}.")),
            F("role", "The honey is sold at the shop of {v}.", "Where can I buy the honey?",
              ("You can buy it at the shop of {v}.", "The honey is sold by {v}'s shop.")),
            F("opp", "Honey is harvested in late {v}.", "When is the honey harvested?",
              ("The harvest comes in late {v}.", "They harvest the honey in late {v}."),
              cls="season"),
            F("pol", "The honey is heated before bottling.", "Is the honey heated?",
              ("Yes, it is heated before bottling.",
               "The honey gets heated before it is bottled."),
              negative="The honey is not heated before bottling.",
              negative_answers=("No, it is not heated before bottling.",
                                "The honey is bottled without being heated.")),
        ),
        ("The apiary also sells beeswax candles.", "Its honey won a gold medal in Paris.",
         "Bears raided the hives last spring."),
        ("The meadows are mown in July.",),
    ),
    Family(
        "shipyard",
        "{S} Yard",
        "{T} builds fishing boats at the river mouth in {p}.",
        (
            F("num", "The slipway is {v} {u} long.", "How long is the slipway?",
              ("The slipway measures {v} {u}.", "Its slipway runs for {v} {u}."),
              span=(60, 300), units="length"),
            F("num", "The yard employs {v} welders and {w} carpenters.",
              "How many people work there?",
              ("It employs {v} welders and {w} carpenters.",
               "There are {v} welders and {w} carpenters at the yard."),
              span=(20, 90), second=(5, 40)),
            F("role", "The chief designer of the yard is {v}.", "Who designs the boats?",
              ("{v} designs the boats.", "Its boats are designed by {v}.")),
            F("role", "The yard belongs to {v}.", "Who owns the yard?",
              ("It belongs to {v}.", "The owner is {v}.")),
            F("cat", "The hulls are built from {v}.", "What are the hulls made of?",
              ("They build the hulls from {v}.", "The hulls are made of {v}."), cls="wood"),
            F("opp", "The yard sits {v} of the old bridge.", "Where is the yard?",
              ("It is {v} of the old bridge.", "The yard lies {v} from the old bridge."),
              cls="flow"),
            F("pol", "The yard repairs foreign vessels.", "Does it repair foreign boats?",
              ("Yes, it repairs foreign vessels.", "Foreign boats are repaired there too."),
              negative="The yard does not repair foreign vessels.",
              negative_answers=("No, foreign vessels are not repaired there.",
                                "It does not take foreign boats for repair.")),
        ),
        ("The yard also builds racing yachts.", "Its boats are exported to Japan.",
         "A storm destroyed the old shed."),
        ("Gulls nest on the crane.",),
    ),
    Family(
        "cableway",
        "{S} Cableway",
        "The {T} carries visitors from {p} up to {q}.",
        (
            F("num", "A cabin holds {v} passengers.", "How many people fit in a cabin?",
              ("Each cabin takes {v} passengers.", "Up to {v} people fit in a cabin."),
              span=(6, 80)),
            F("num", "The ride to the top lasts {v} {u}.", "How long is the ride?",
              ("It takes {v} {u} to reach the top.", "The trip up lasts {v} {u}."),
              span=(4, 25), units="time"),
            F("date", "The cableway opened in {v}.", "When did it open?",
              ("It has run since {v}.", "The line opened in {v}."), span=(1930, 2015)),
            F("role", "The chief engineer is {v}.", "Who is the engineer?",
              ("{v} is the chief engineer.", "Engineering is led by {v}.")),
            F("role", "The restaurant at the top is run by {v}.", "Who runs the restaurant?",
              ("{v} runs the restaurant at the top.", "The restaurant up there is run by {v}.")),
            F("cat", "The cabins were built in {v}.", "Where were the cabins made?",
              ("The cabins come from {v}.", "They were made in {v}."), cls="city"),
            F("opp", "The lower station is {v} the old town walls.", "Where do I board?",
              ("The lower station lies {v} the old town walls.",
               "You board {v} the walls of the old town."), cls="side"),
            F("pol", "Dogs are allowed in the cabins.", "Can I take my dog?",
              ("Yes, dogs are allowed.", "Dogs may ride in the cabins."),
              negative="Dogs are not allowed in the cabins.",
              negative_answers=("No, dogs are not allowed.", "Dogs may not ride in the cabins.")),
        ),
        ("The top station has a glass floor.", "Skiers ride free on Mondays.",
         "The cableway closes in strong wind."),
        ("Snow closes the upper path in winter.",),
    ),
    Family(
        "firestation",
        "{S} Fire Station",
        "The {T} serves {p} and the villages along the coast road.",
        (
            F("num", "The station has {v} engines and {w} crew members on each shift.",
              "How big is the station?",
              ("It has {v} engines, with {w} crew members on each shift.",
               "Each shift has {w} crew members for its {v} engines."),
              span=(2, 9), second=(10, 40)),
            F("num", "Crews reach the farthest village within {v} {u}.",
              "How fast do crews respond?",
              ("The farthest village is reached within {v} {u}.",
               "Crews get to the farthest village in under {v} {u}."),
              span=(8, 30), units="time"),
            F("role", "The station is commanded by chief officer {v}.", "Who is in command?",
              ("Chief officer {v} commands the station.", "{v} is in command of the station.",
               "The station is under the command of {v}.")),
            F("role", "Training is organised by {v}.", "Who organises training?",
              ("{v} organises the training.", "The training is run by {v}.")),
            F("date", "The station moved to its current building in {v}.",
              "When did the station move?",
              ("It moved into its current building in {v}.",
               "Since {v} it has been in its current building."), span=(1950, 2018)),
            F("opp", "The station stands on the {v} side of the harbour.",
              "Where is the station?",
              ("You will find it on the {v} side of the harbour.",
               "The station is on the harbour's {v} side."), cls="bank"),
            F("pol", "The station accepts volunteers.", "Can I volunteer?",
              ("Yes, the station accepts volunteers.", "Volunteers are welcome at the station."),
              negative="The station does not accept volunteers.",
              negative_answers=("No, the station does not accept volunteers.",
                                "Volunteers are not accepted.")),
        ),
        ("The station also runs a diving team.", "Its oldest engine is kept in a museum.",
         "The crews train with the navy every spring."),
        ("The siren is tested on Mondays.",),
    ),
    Family(
        "skischool",
        "{S} Ski School",
        "The {T} teaches skiing on the slopes above {p}.",
        (
            F("num", "A group lesson costs {v} {u}.", "What does a group lesson cost?",
              ("Group lessons cost {v} {u}.", "You pay {v} {u} for a group lesson."),
              span=(25, 90), units="money"),
            F("num", "The school employs {v} instructors.", "How many instructors are there?",
              ("There are {v} instructors.", "It has a staff of {v} instructors.",
               "{v} instructors teach there."), span=(12, 80)),
            F("role", "The school was set up by {v}.", "Who set up the school?",
              ("It was set up by {v}.", "{v} set up the school.", "{v} started it.")),
            F("role", "Lessons for children are coordinated by {v}.",
              "Who is in charge of children's lessons?",
              ("{v} coordinates the lessons for children.",
               "Children's lessons are coordinated by {v}.")),
            F("cat", "The instructors wear {v} jackets.", "What do the instructors wear?",
              ("Its instructors wear {v} jackets.", "You can spot the instructors by their {v} jackets."),
              cls="colour"),
            F("opp", "The season runs from December until the end of {v}.",
              "How long does the season last?",
              ("The season lasts until the end of {v}.", "It runs until the end of {v}."),
              cls="season"),
            F("pol", "Skis can be hired at the school.", "Can I hire skis there?",
              ("Yes, you can hire skis at the school.", "Skis are available for hire."),
              negative="Skis cannot be hired at the school.",
              negative_answers=("No, skis cannot be hired there.",
                                "Skis are not available for hire.")),
        ),
        ("The school also offers night skiing.", "Its founder once won an Olympic medal.",
         "A shuttle bus runs from the station."),
        ("Fog often covers the lower slopes.",),
    ),
    Family(
        "garden",
        "{S} Botanic Garden",
        "The {T} lies on the edge of {p}.",
        (
            F("num", "The garden covers {v} {u}.", "How big is the garden?",
              ("It covers {v} {u}.", "The garden spreads over {v} {u}."),
              span=(4, 60), units="area"),
            F("num", "Its collection holds about {v} species.", "How many species are there?",
              ("About {v} species grow there.", "The collection has roughly {v} species."),
              span=(800, 9000)),
            F("role", "The curator of the collection is {v}.", "Who curates the collection?",
              ("{v} curates the collection.", "The collection's curator is {v}.")),
            F("role", "The glasshouse was designed by {v}.", "Who designed the glasshouse?",
              ("The glasshouse is the work of {v}.", "{v} designed the glasshouse.")),
            F("cat", "The oldest tree in the garden is a {v}.", "What is the oldest tree?",
              ("Its oldest tree is a {v}.", "The oldest tree there is a {v}."), cls="wood"),
            F("date", "The garden opened to the public in {v}.", "When did it open?",
              ("It has been open to the public since {v}.", "The public was first let in in {v}."),
              span=(1780, 1990)),
            F("pol", "Picnics are allowed on the lawns.", "May I have a picnic there?",
              ("Yes, picnics are allowed on the lawns.", "You may picnic on the lawns."),
              negative="Picnics are not allowed on the lawns.",
              negative_answers=("No, picnics are not allowed.", "You may not picnic on the lawns.")),
        ),
        ("The garden also keeps a seed bank.", "Its pond is home to rare frogs.",
         "Entry is free on Sundays."),
        ("Some paths close after heavy rain.",),
    ),
    Family(
        "dairy",
        "{S} Dairy",
        "The {T} is a farmers' cooperative near {p}.",
        (
            F("num", "Its members own {v} cows.", "How many cows are there?",
              ("The members own {v} cows.", "There are {v} cows on its farms."),
              span=(300, 4000)),
            F("num", "The milk is collected every {v} {u}.", "How often is the milk collected?",
              ("Milk is picked up every {v} {u}.", "They collect it every {v} {u}."),
              span=(6, 48), units="time"),
            F("role", "The cooperative is chaired by {v}.", "Who chairs it?",
              ("{v} chairs the cooperative.", "Its chair is {v}.")),
            F("role", "The cheese is made by {v}.", "Who makes the cheese?",
              ("{v} makes the cheese.", "The cheesemaker is {v}.")),
            F("date", "The cooperative was founded in {v}.", "When was it founded?",
              ("It was founded in {v}.", "It goes back to {v}."), span=(1890, 2000)),
            F("opp", "Its cheese cellar lies {v} the river.", "Where is the cellar?",
              ("The cellar is {v} the river.", "Its cellar lies {v} the river."), cls="level"),
            F("pol", "The cows graze outdoors all year.", "Do the cows stay outdoors?",
              ("Yes, they graze outdoors all year.", "The cows are outdoors all year round."),
              negative="The cows do not graze outdoors all year.",
              negative_answers=("No, they do not graze outdoors all year.",
                                "The cows are not outdoors all year round.")),
        ),
        ("The dairy also makes ice cream.", "Its butter is sold in Paris.",
         "The farms run on wind power."),
        ("The lanes flood in March.",),
    ),
)  # fmt: skip
# Developed on: the first seven and the last thirteen; reported: the seven between (never looked
# at while developing).
DEV_FAMILIES = tuple(f.name for f in (*FAMILIES[:7], *FAMILIES[14:]))
REPORT_FAMILIES = tuple(f.name for f in FAMILIES[7:14])


def _surname(rng: random.Random) -> str:
    return rng.choice(_ONSET) + rng.choice(_CODA)


def _person(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = f"{rng.choice(_FIRST)} {_surname(rng)}"
        if name.split()[1] not in {t.split()[-1] for t in taken}:
            taken.add(name)
            return name


def _place(rng: random.Random) -> str:
    return rng.choice(_ONSET) + rng.choice(_PLACE)


@dataclass(slots=True)
class Value:
    """A fact's value on one sheet, with what each planted error turns it into."""

    fact: F
    value: str
    unit: str = ""
    second: str = ""
    positive: bool = True
    wrong: dict[str, tuple[str, str, bool]] = field(default_factory=dict)


@dataclass(slots=True)
class Sheet:
    family: Family
    title: str
    text: str
    values: list[Value]
    names: dict[str, str]


def _fmt(n: int) -> str:
    return f"{n:,}"


def _shift(rng: random.Random, n: int) -> int:
    factor = rng.choice((0.4, 0.5, 0.6, 0.7, 1.4, 1.5, 2.0, 2.5, 3.0))
    out = int(round(n * factor, -2 if n >= 1000 else (-1 if n >= 100 else 0)))
    return out if out != n else n + rng.randint(2, 9)


def _sheet(family: Family, rng: random.Random, index: int) -> Sheet:
    title = family.title.format(S=_surname(rng))
    names = {"T": title, "p": _place(rng), "q": _place(rng)}
    people: set[str] = set()
    values: list[Value] = []
    for fact in family.facts:
        if fact.kind == "num":
            n = rng.randint(*fact.span)
            units = UNITS[fact.units]
            unit = rng.choice(units)
            v = Value(fact, _fmt(n), unit)
            v.wrong["number"] = (_fmt(_shift(rng, n)), unit, True)
            if fact.second != (0, 0):
                w = rng.choice([k for k in range(*fact.second) if k != n])
                v.second = _fmt(w)
                v.wrong["number"] = (v.second, unit, True)
            if len(units) > 1:
                v.wrong["unit"] = (_fmt(n), rng.choice([u for u in units if u != unit]), True)
        elif fact.kind == "date":
            year = rng.randint(*fact.span)
            v = Value(fact, str(year))
            step = rng.choice((-27, -12, -9, -4, -2, 2, 3, 6, 11, 19))
            v.wrong["date"] = (str(year + step), "", True)
        elif fact.kind == "role":
            v = Value(fact, _person(rng, people))
        elif fact.kind == "cat":
            members = CLASSES[fact.cls]
            value = rng.choice(members)
            v = Value(fact, value)
            v.wrong["cohyponym"] = (rng.choice([m for m in members if m != value]), "", True)
        elif fact.kind == "opp":
            pair = rng.choice(OPPOSITES[fact.cls])
            side = rng.randrange(2)
            v = Value(fact, pair[side])
            v.wrong["antonym"] = (pair[1 - side], "", True)
        else:
            positive = rng.random() < 0.5
            v = Value(fact, "", positive=positive)
            v.wrong["negation"] = ("", "", not positive)
        values.append(v)
    roles = [v for v in values if v.fact.kind == "role"]
    for v in roles:
        others = [o.value for o in roles if o is not v]
        v.wrong["role"] = (rng.choice(others), "", True)
    lines = [family.intro.format(**names)]
    for v in values:
        template = v.fact.context if v.positive else v.fact.negative
        lines.append(template.format(v=v.value, u=v.unit, w=v.second, **names))
    lines.extend(family.filler)
    body = lines[1:]
    rng.shuffle(body)
    text = " ".join([lines[0], *body])
    text = re.sub(r"\s+", " ", text.replace(" ,", ","))
    return Sheet(family, f"{title} #{index}", text[0].upper() + text[1:], values, names)


def _say(sheet: Sheet, v: Value, rng: random.Random, error: str | None) -> str:
    """One answer sentence about `v`: faithful, or with the planted `error`."""
    value, unit, positive, second = v.value, v.unit, v.positive, v.second
    if error is not None:
        value, unit, positive = v.wrong[error]
        if error == "number" and second:
            second = v.value  # moved: each number on the other's noun
    templates = v.fact.answers if positive else v.fact.negative_answers
    if v.fact.kind == "pol" and positive and not v.fact.negative_answers:
        templates = v.fact.answers
    template = rng.choice(templates)
    text = template.format(v=value, u=unit, w=second, **sheet.names)
    text = re.sub(r"\s+", " ", text).replace(" .", ".")
    if rng.random() < 0.2 and not template.startswith("{") and not text.startswith(("Yes", "No")):
        text = rng.choice(_HEDGES) + text[0].lower() + text[1:]
    return text[0].upper() + text[1:]


def _statement(text: str) -> str:
    for lead in ("Yes, ", "No, "):
        if text.startswith(lead):
            rest = text[len(lead) :]
            return rest[0].upper() + rest[1:]
    return text


def _with_extra(answer: str, extra: str) -> str:
    return f"{answer.rstrip('.')}, and {extra[0].lower()}{extra[1:]}"


def _chunks(sheet: Sheet, other: Sheet, rng: random.Random) -> list[dict[str, str]]:
    """What a retriever returns: the sheet in two chunks and half of another sheet, shuffled."""
    own = re.split(r"(?<=\.)\s+(?=[A-Z])", sheet.text)
    theirs = re.split(r"(?<=\.)\s+(?=[A-Z])", other.text)
    cut = rng.randint(2, len(own) - 2)
    chunks = [
        {"content": " ".join(own[:cut]), "doc_uri": f"probe://{sheet.title}#1"},
        {"content": " ".join(own[cut:]), "doc_uri": f"probe://{sheet.title}#2"},
        {"content": " ".join(theirs[len(theirs) // 2 :]), "doc_uri": f"probe://{other.title}#2"},
    ]
    rng.shuffle(chunks)
    return chunks


def label(record: dict[str, object]) -> dict[str, object]:
    """A probe record's `label` (`build` writes one into every record)."""
    found = record["label"]
    assert isinstance(found, dict)
    return found


def build(
    seed: int = SEED, sheets: int = SHEETS, families: tuple[str, ...] | None = None
) -> list[dict[str, object]]:
    """The probe records of `families` (all by default), deterministic for `seed`."""
    # Every sheet draws from its own generator, and its distractor is the same-numbered sheet
    # of the next family of its own split: adding a family changes no other family's records.
    picked = [f for f in FAMILIES if families is None or f.name in families]
    made = [
        _sheet(f, random.Random(f"{seed}:{f.name}:{i}"), i) for f in picked for i in range(sheets)
    ]
    out: list[dict[str, object]] = []

    def distractor(sheet: Sheet) -> Sheet:
        split = DEV_FAMILIES if sheet.family.name in DEV_FAMILIES else REPORT_FAMILIES
        group = [f for f in picked if f.name in split]
        index = made.index(sheet)
        if len(group) == 1:
            return made[index + 1 if index + 1 < len(made) else 0]
        family = group[(group.index(sheet.family) + 1) % len(group)]
        return made[picked.index(family) * sheets + index % sheets]

    def add(sheet: Sheet, question: str, answer: str, kind: str, length: str, **extra: str) -> None:
        other = distractor(sheet)
        out.append(
            {
                "request_id": f"family-probe-{len(out):05d}",
                "request": question,
                "retrieved_context": _chunks(sheet, other, rng),
                "response": answer,
                "label": {
                    "hallucinated": kind != "faithful",
                    "kind": kind,
                    "length": length,
                    "family": sheet.family.name,
                    "split": "dev" if sheet.family.name in DEV_FAMILIES else "report",
                    "sheet": sheet.title,
                    **extra,
                },
            }
        )

    for sheet in made:
        rng = random.Random(f"{seed}:{sheet.title}")
        extras = sheet.family.extras
        # One line: every fact faithful once, and every error it can carry once.
        for v in sheet.values:
            question = v.fact.question.format(**sheet.names)
            add(sheet, question, _say(sheet, v, rng, None), "faithful", "one_line")
            for wrong in v.wrong:
                extra = (
                    {"direction": "added" if v.positive else "removed"}
                    if wrong == "negation"
                    else {}
                )
                add(sheet, question, _say(sheet, v, rng, wrong), wrong, "one_line", **extra)
        for v in rng.sample(sheet.values, 2):
            question = v.fact.question.format(**sheet.names)
            answer = _with_extra(_statement(_say(sheet, v, rng, None)), rng.choice(extras))
            add(sheet, question, answer, "extra", "one_line")
        # Several sentences (prose or a list): faithful, and each error kind once.
        question = f"Tell me about the {sheet.names['T']}."
        for error in (None, None, *ERRORS):
            carriers = [v for v in sheet.values if error is None or error in v.wrong]
            if error == "extra":
                carriers = list(sheet.values)
            if not carriers:
                continue
            planted = rng.choice(carriers)
            rest = rng.sample([v for v in sheet.values if v is not planted], 2)
            chosen = [*rest, planted]
            rng.shuffle(chosen)
            parts = [
                _statement(
                    _say(sheet, v, rng, error if v is planted and error != "extra" else None)
                )
                for v in chosen
            ]
            if error == "extra":
                parts.insert(rng.randint(1, 3), rng.choice(extras))
            if rng.random() < 0.3:
                answer = "Here is what the documents say:\n" + "\n".join(f"- {p}" for p in parts)
            else:
                answer = " ".join(parts)
            extra = {}
            if error == "negation":
                extra = {"direction": "added" if planted.positive else "removed"}
            add(sheet, question, answer, error or "faithful", "multi", **extra)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write JSONL here (default: stdout)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--sheets", type=int, default=SHEETS)
    parser.add_argument("--split", choices=("dev", "report", "all"), default="all")
    args = parser.parse_args(argv)
    families = {"dev": DEV_FAMILIES, "report": REPORT_FAMILIES, "all": None}[args.split]
    lines = "".join(json.dumps(r) + "\n" for r in build(args.seed, args.sheets, families))
    if args.out is None:
        sys.stdout.write(lines)
    else:
        args.out.write_text(lines, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
