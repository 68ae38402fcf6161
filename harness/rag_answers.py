"""A generated set of RAG answers, faithful and hallucinated, for alerting tests.

Each item is a question, two retrieved passages and an answer. Faithful answers restate
facts of the passages in other words; hallucinated ones change a year, a number or a name,
or add a claim the passages do not make, the errors a RAG model makes in practice. Built
deterministically from small tables, so tests need no data file.
"""

from __future__ import annotations

from dataclasses import dataclass

# subject, kind, year, city, founder, number, product
_FACTS = [
    (
        "Norrland Ferries",
        "shipping company",
        1952,
        "Umeå",
        "Astrid Lindqvist",
        2400,
        "night crossings",
    ),
    ("Caldera Labs", "battery maker", 2011, "Tucson", "Miguel Ortega", 850, "sodium-ion cells"),
    (
        "The Harwick Museum",
        "art museum",
        1898,
        "Leeds",
        "Eleanor Harwick",
        120,
        "Pre-Raphaelite paintings",
    ),
    ("Bluegate Bank", "regional bank", 1934, "Omaha", "Walter Brandt", 3100, "farm loans"),
    (
        "Orchid Transit",
        "bus operator",
        1987,
        "Penang",
        "Lim Wei Ming",
        1650,
        "airport express lines",
    ),
    ("Fjellstad Dairy", "dairy cooperative", 1921, "Bergen", "Olav Fjellstad", 540, "brown cheese"),
    (
        "Sunvale Clinic",
        "teaching hospital",
        1966,
        "Adelaide",
        "Margaret Cole",
        2900,
        "burns treatment",
    ),
    ("Kestrel Robotics", "robotics firm", 2015, "Lyon", "Julien Marchal", 310, "warehouse arms"),
    ("Redmoor Brewery", "brewery", 1874, "Cork", "Patrick Doyle", 95, "stout"),
    (
        "Atlas Seed Bank",
        "seed bank",
        1979,
        "Nairobi",
        "Grace Wanjiru",
        60,
        "drought-tolerant sorghum",
    ),
    ("Pinecrest Press", "publisher", 1949, "Portland", "Harold Finch", 210, "field guides"),
    ("Meridian Rail", "rail operator", 1903, "Turin", "Carlo Bassi", 5200, "alpine routes"),
]
_OTHER_CITY = ["Lisbon", "Denver", "Osaka", "Gdańsk", "Quito", "Hamburg"]
_OTHER_NAME = ["Thomas Reed", "Ingrid Holm", "Rafael Soto", "Helen Park", "Ivan Petrov"]


@dataclass(frozen=True)
class Answer:
    question: str
    context: tuple[str, str]
    answer: str
    hallucinated: bool


def answers() -> list[Answer]:
    out = []
    for i, (subject, kind, year, city, founder, number, product) in enumerate(_FACTS):
        context = (
            f"{subject} is a {kind} founded in {year} in {city} by {founder}. "
            f"Today it has about {number} employees.",
            f"{subject} is best known for its {product}, which account for most of its "
            f"revenue. Its headquarters are still in {city}.",
        )
        q_founded = f"When and by whom was {subject} founded?"
        q_known = f"What is {subject} known for and where is it based?"
        q_size = f"How many people work at {subject}?"
        other_city = _OTHER_CITY[i % len(_OTHER_CITY)]
        other_name = _OTHER_NAME[i % len(_OTHER_NAME)]
        out += [
            Answer(
                q_founded,
                context,
                f"{subject} was founded by {founder} in {city} in {year}.",
                False,
            ),
            Answer(
                q_known,
                context,
                f"{subject} is best known for its {product}, and its headquarters are in {city}.",
                False,
            ),
            Answer(q_size, context, f"{subject} has about {number} employees today.", False),
            Answer(
                q_founded,
                context,
                f"{subject} was founded by {other_name} in {year + 17}, after a merger with a rival firm.",
                True,
            ),
            Answer(
                q_known,
                context,
                f"{subject} is best known for its {product}, but it moved its headquarters to {other_city} in 2019.",
                True,
            ),
            Answer(
                q_size,
                context,
                f"{subject} employs roughly {number * 3 + 700} people across nine countries.",
                True,
            ),
        ]
    return out
