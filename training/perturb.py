"""Rule-based perturbations of faithful responses: training negatives made without a model.

Each function takes a faithful response and returns it with exactly one planted error, or None
when the response offers no place for that kind of error. The perturbed response keeps the
original's length within a few words, so a model trained on it cannot learn length (the
artifact that lets length alone separate HaluEval QA's classes). The kinds follow the FactCC
recipe: a number, a date, an entity or a pronoun swapped, a negation added or removed, and a
sentence inserted from another document.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w.]\d)")
YEAR = re.compile(r"\b(1[5-9]\d\d|20[0-4]\d)\b")
MONTH = re.compile(
    r"\b(January|February|March|April|May|June|July|August|September|October|November|December)\b"
)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)+)")
_AUX = re.compile(
    r"\b(is|are|was|were|can|could|will|would|should|has|have|had|does|do|did|must)\b(?!\s+not)"
)
_NEGATED = re.compile(
    r"\b(is|are|was|were|can|could|will|would|should|has|have|had|does|do|did)"
    r"\s+not\b|\b(isn't|aren't|wasn't|weren't|can't|won't|doesn't|don't|didn't)"
)
_CONTRACTED = {
    "isn't": "is", "aren't": "are", "wasn't": "was", "weren't": "were", "can't": "can",
    "won't": "will", "doesn't": "does", "don't": "do", "didn't": "did",
}  # fmt: skip
_PRONOUNS = {"he": "she", "she": "he", "his": "her", "her": "his", "him": "her"}
MONTHS = (
    "January February March April May June July August September October November December"
).split()
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")

Perturbation = Callable[[str, random.Random, Sequence[str]], str | None]


def _replace_at(text: str, match: re.Match[str], new: str, group: int = 1) -> str:
    return text[: match.start(group)] + new + text[match.end(group) :]


def number(text: str, rng: random.Random, pool: Sequence[str]) -> str | None:
    matches = [m for m in NUMBER.finditer(text) if not YEAR.fullmatch(m.group(1))]
    if not matches:
        return None
    m = rng.choice(matches)
    raw = m.group(1).replace(",", "")
    value = float(raw)
    factor = rng.choice((0.3, 0.5, 0.6, 1.5, 2.0, 3.0, 4.0))
    new_value = value * factor if value > 2 else value + rng.randint(2, 9)
    if "." in raw:
        new = f"{new_value:.{len(raw.split('.')[1])}f}"
    else:
        new_int = round(new_value)
        new_int = new_int if new_int != int(value) else new_int + 1
        new = f"{new_int:,}" if "," in m.group(1) else str(new_int)
    return _replace_at(text, m, new)


def date(text: str, rng: random.Random, pool: Sequence[str]) -> str | None:
    years = list(YEAR.finditer(text))
    months = list(MONTH.finditer(text))
    if not years and not months:
        return None
    if years and (not months or rng.random() < 0.6):
        m = rng.choice(years)
        shift = rng.choice((-30, -12, -7, -3, -1, 1, 2, 5, 9, 21))
        return _replace_at(text, m, str(int(m.group(1)) + shift))
    m = rng.choice(months)
    return _replace_at(text, m, rng.choice([x for x in MONTHS if x != m.group(1)]))


def entity(text: str, rng: random.Random, pool: Sequence[str]) -> str | None:
    """A multi-word name replaced by a name from another document."""
    mine = list(_NAME.finditer(text))
    if not mine or not pool:
        return None
    m = rng.choice(mine)
    for _ in range(20):
        other = rng.choice(pool)
        names = _NAME.findall(other)
        if names:
            new = rng.choice(names)
            if new != m.group(1) and not set(new.split()) & set(m.group(1).split()):
                return _replace_at(text, m, new)
    return None


def negation(text: str, rng: random.Random, pool: Sequence[str]) -> str | None:
    negated = list(_NEGATED.finditer(text))
    if negated and rng.random() < 0.5:
        m = rng.choice(negated)
        if m.group(1):
            return text[: m.start()] + m.group(1) + text[m.end() :]
        word = m.group(2)
        return text[: m.start()] + _CONTRACTED[word.lower()] + text[m.end() :]
    aux = list(_AUX.finditer(text))
    if not aux:
        return None
    m = rng.choice(aux)
    return text[: m.end()] + " not" + text[m.end() :]


def pronoun(text: str, rng: random.Random, pool: Sequence[str]) -> str | None:
    words = list(re.finditer(r"\b(he|she|his|her|him)\b", text, flags=re.IGNORECASE))
    if not words:
        return None
    m = rng.choice(words)
    word = m.group(1)
    new = _PRONOUNS[word.lower()]
    return _replace_at(text, m, new.capitalize() if word[0].isupper() else new)


def extra_sentence(text: str, rng: random.Random, pool: Sequence[str]) -> str | None:
    """A sentence from another document inserted; the response keeps its length by losing
    one of its own sentences when it has several."""
    if not pool:
        return None
    other = _SENTENCE.split(rng.choice(pool))
    inserted = rng.choice(other).strip()
    if len(inserted.split()) < 4:
        return None
    own = _SENTENCE.split(text.strip())
    if len(own) >= 3:
        own.pop(rng.randrange(1, len(own)))
    own.insert(rng.randint(1, len(own)) if len(own) > 1 else 1, inserted)
    return " ".join(own)


KINDS: dict[str, Perturbation] = {
    "number": number,
    "date": date,
    "entity": entity,
    "negation": negation,
    "pronoun": pronoun,
    "extra": extra_sentence,
}


def perturb(text: str, rng: random.Random, pool: Sequence[str]) -> tuple[str, str] | None:
    """One planted error of a kind the response allows (kinds tried in random order)."""
    order = list(KINDS)
    rng.shuffle(order)
    for kind in order:
        out = KINDS[kind](text, rng, pool)
        if out is not None and out != text:
            return kind, out
    return None
