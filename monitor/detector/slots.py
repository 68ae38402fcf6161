"""Slots of a sentence: its quantities with their units, its dates (year, month, day) and its
names, each with its place in the sentence and a value to compare ("900 metres" -> 900.0,
"Joseph Strauss" -> ("joseph", "strauss")), and the content stems that frame them.
`contradiction.py` compares a claim's slots with the context's.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detector.cjk import is_step_unit, numeral_start
from monitor.detector.cjk import measured as chinese_unit
from monitor.detector.text import (
    DISCOURSE,
    REFERENCES,
    STOPWORDS,
    UNIT_NAMES,
    canonical,
    fold,
    fold_all,
    number_value,
    root,
    stem,
    token_spans,
    tokens,
)
from monitor.shared.recurring import recurring_cache

# Each month's names, full and short, with its number.
_MONTH_NUMBER = {
    name: number
    for number, names in enumerate(
        (
            "january jan", "february feb", "march mar", "april apr", "may", "june jun",
            "july jul", "august aug", "september sep sept", "october oct", "november nov",
            "december dec",
        ),
        start=1,
    )
    for name in names.split()
}  # fmt: skip
MONTHS = frozenset(_MONTH_NUMBER)
_SCALES = {
    "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "bn": 1e9, "mn": 1e6,
    "mln": 1e6, "k": 1e3,
}  # fmt: skip
# Words that say a number is approximate: a close value is then not a contradiction.
_HEDGES = frozenset(
    "about around approximately roughly nearly almost some over under estimated estimate "
    "circa approx up".split()
)
_APPROXIMATE = 0.1
# The Chinese hour of the clock (六点, 18点).
_HOUR = "点"

# Units that are nouns of a count, not of a measure; any noun after a number is a unit here,
# these are only excluded because they refer back to the answer's layout.
_NOT_UNITS = REFERENCES | frozenset("times time way ways".split())
# Capitalised words that start sentences or name calendar things rather than entities.
_NOT_NAMES = (
    frozenset("monday tuesday wednesday thursday friday saturday sunday yes no i".split()) | MONTHS
)
_NAME_JOINERS = frozenset("de da di del van von der le la bin al".split())


@dataclass(frozen=True, slots=True)
class Slot:
    # "number", "year", "month", "day" or "name".
    kind: str
    # The unit of a number (canonical stem; "" when none); the slot kind for dates and names.
    unit: str
    # Comparable value: float for numbers and dates, folded words for names.
    value: float | tuple[str, ...]
    # Token positions [start, end) in the sentence and the character span of the phrase.
    start: int
    end: int
    text: str
    hedged: bool = False


@dataclass(slots=True)
class Parsed:
    """A sentence's slots and the content stems that frame them."""

    text: str
    slots: list[Slot]
    stems: list[str]
    # The sentence's tokens folded (`text.fold`), and its stems' roots (`text.root`).
    words: list[str]
    roots: frozenset[str]


def _number(token: str) -> float | None:
    # Past the cache: a question's numbers (ids, amounts) are mostly new, kept they grow it.
    numeric = token[0].isdigit() or token[0] == "$" or numeral_start(token)
    value = number_value.__wrapped__(token) if numeric else None
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def parse(text: str) -> Parsed:
    """Finds the slots of one sentence."""
    raw = tokens(text)
    spans = token_spans(text)
    folded = fold_all(text, raw)
    slots: list[Slot] = []
    used: set[int] = set()
    n = len(raw)

    def phrase(a: int, b: int) -> str:
        return text[spans[a][0] : spans[b - 1][1]]

    def joined(a: int) -> bool:
        """Whether token `a` follows token `a - 1` with only space between them."""
        return a < n and not text[spans[a - 1][1] : spans[a][0]].strip()

    for i, token in enumerate(raw):
        # Only a token that starts with a digit or "$" is a number (`_number`).
        value = _number(token)
        if value is None and token == "一" and joined(i + 1) and is_step_unit(folded[i + 1]):
            # 一 / 小时 cut apart: one of a measure (一小时三十五分), where 一周, 一天 cut as
            # one word are as often "a week", "some day".
            value = 1.0
        if value is None or (i > 0 and folded[i - 1] in REFERENCES):
            continue
        hedged = any(w in _HEDGES for w in folded[max(0, i - 3) : i])
        before = folded[i - 1] if i > 0 else ""
        after = folded[i + 1] if joined(i + 1) else ""
        if before in MONTHS or after in MONTHS:
            if 1 <= value <= 31 and value.is_integer():
                slots.append(Slot("day", "day", value, i, i + 1, token))
                used.add(i)
                continue
        if 1000 <= value <= 2100 and value.is_integer() and token.isdigit():
            measured = after in _SCALES or canonical(after) in UNIT_NAMES
            if not measured and not (after.endswith("s") and len(after) > 3) and after != "people":
                slots.append(Slot("year", "year", value, i, i + 1, token))
                used.add(i)
                continue
        j = i + 1
        scale = 1.0
        while joined(j) and folded[j] in _SCALES:
            scale *= _SCALES[folded[j]]
            j += 1
        unit = ""
        if token.endswith("%") or token.endswith("percent"):
            unit = "percent"
        elif token.startswith("$"):
            unit = "dollar"
        elif joined(j) and folded[j][0] > "\u2fff":
            # A Chinese count's unit: past the measure word 个, in its measure's smaller unit.
            unit, value, taken = chinese_unit(folded[j : j + 2], value)
            j += taken
            if not taken and folded[j].isalpha() and folded[j] not in STOPWORDS:
                if folded[j] not in _NOT_UNITS and folded[j] not in DISCOURSE:
                    unit = stem(canonical(folded[j]))
                    j += 1
        elif joined(j) and folded[j].isalpha() and folded[j] not in STOPWORDS:
            if folded[j] not in _NOT_UNITS and folded[j] not in DISCOURSE:
                unit = stem(canonical(folded[j]))
                j += 1
        elif i >= 2 and before == "of" and folded[i - 2].isalpha():
            # "a crew of 60": the counted noun stands before the number.
            if folded[i - 2] not in STOPWORDS and folded[i - 2] not in _NOT_UNITS:
                unit = stem(canonical(folded[i - 2]))
        if unit in ("dollar", "percent") and joined(j) and canonical(folded[j]) == unit:
            j += 1
        slots.append(Slot("number", unit, value * scale, i, j, phrase(i, j), hedged))
        used.update(range(i, j))
    slots = _compounds(slots, text, spans)
    for i, word in enumerate(folded):
        if word in MONTHS and raw[i][0].isupper():
            near = [s for s in slots if s.kind in ("day", "year") and abs(s.start - i) <= 2]
            if near or word not in ("may", "march"):
                slots.append(Slot("month", "month", float(_MONTH_NUMBER[word]), i, i + 1, raw[i]))
                used.add(i)
    i = 0
    while i < n:
        if not raw[i][0].isupper() or not _capitalised(raw[i], folded[i]):
            i += 1
            continue
        j = i + 1
        # A name is a run of capitalised words with only spaces between them: a comma ends
        # it ("Mississippi, Arkansas" is two names).
        while (
            j < n
            and joined(j)
            and (
                _capitalised(raw[j], folded[j])
                or (
                    folded[j] in _NAME_JOINERS
                    and j + 1 < n
                    and _capitalised(raw[j + 1], folded[j + 1])
                )
            )
        ):
            j += 1
        words = tuple(f.removesuffix("'s") for f in folded[i:j] if f not in _NAME_JOINERS)
        if words and (i > 0 or j - i >= 2):
            slots.append(Slot("name", "name", words, i, j, phrase(i, j).removesuffix("'s")))
            used.update(range(i, j))
        i = j
    # A possessive noun is its noun ("the choir's conductor" frames "choir"); a name's
    # possessive ("Il-hyung's") is left to the name's slot.
    bare = [
        w
        if "'" not in w or raw[k][:1].isupper() or text[spans[k][0] - 1 : spans[k][0]] == "-"
        else w.removesuffix("'s").rstrip("'")
        for k, w in enumerate(folded)
    ]
    stems = [
        stem(w)
        for w in bare
        if w.isalpha() and w not in STOPWORDS and w not in DISCOURSE and w not in MONTHS
    ]
    return Parsed(text, slots, stems, folded, frozenset(map(root, stems)))


# Retrieved chunks recur across requests (the same documents answer many questions), and an
# extractive answer repeats their sentences: parsing a sentence for slots is a third of the
# detector's time on a new context. `Parsed` is never mutated after parsing (`parse_bare`
# changes a fresh parse of its own), so cached values can be shared.
parse_sentence = recurring_cache(4096)(parse)


# Units of one measure an amount is written in at most (days, hours, minutes, seconds).
_COMPOUND_PARTS = 4


def _compounds(slots: list[Slot], text: str, spans: list[tuple[int, int]]) -> list[Slot]:
    """A Chinese amount written in two units of one measure, each read in the smaller
    (1小时35分钟, 两年三个月), is one amount: their sum. Written together is read in the
    two slots' own stretch of the text (`spans`: each token's), not in all of it: a
    sentence of thousands of amounts would be searched once per amount. An amount has at
    most `_COMPOUND_PARTS` (一天两小时三分四秒): "十小时九分钟十小时九分钟…" is not one
    amount growing with each."""
    out: list[Slot] = []
    parts = 1  # of `out[-1]`
    for slot in slots:
        last = out[-1] if out else None
        if (
            last is not None
            and parts < _COMPOUND_PARTS
            and slot.kind == last.kind == "number"
            and slot.start == last.end
            and slot.unit == last.unit != ""
            and is_step_unit(slot.unit)
            and isinstance(last.value, float)
            and isinstance(slot.value, float)
            and last.value > slot.value
            and last.text + slot.text in text[spans[last.start][0] : spans[slot.end - 1][1]]
        ):
            # Written together (一小时三十五分), not two amounts a comma or a word parts.
            joined = last.text + slot.text
            out[-1] = Slot(
                "number",
                slot.unit,
                last.value + slot.value,
                last.start,
                slot.end,
                joined,
                last.hedged or slot.hedged,
            )
            parts += 1
            continue
        out.append(slot)
        parts = 1
    return out


def _capitalised(token: str, word: str) -> bool:
    return token[0].isupper() and word not in STOPWORDS and word not in _NOT_NAMES


def date_group(parsed: Parsed, slot: Slot) -> list[Slot]:
    """The year, month and day slots next to each other that form one date with `slot`."""
    parts = {s.start: s for s in parsed.slots if s.kind in ("year", "month", "day")}
    group = [slot]
    kinds = {slot.kind}
    for step in (-1, 1):
        at = slot.start + step
        while at in parts and parts[at].kind not in kinds:
            group.append(parts[at])
            kinds.add(parts[at].kind)
            at += step
    return sorted(group, key=lambda s: s.start)


def date_phrase(parsed: Parsed, slot: Slot) -> str:
    """The whole date a year, month or day slot belongs to ("August 22, 1905")."""
    group = date_group(parsed, slot)
    spans = token_spans(parsed.text)
    return parsed.text[spans[group[0].start][0] : spans[group[-1].end - 1][1]]


def same_value(a: Slot, b: Slot) -> bool:
    if a.kind == "name":
        assert isinstance(a.value, tuple) and isinstance(b.value, tuple)
        return bool(_name_overlap(a.value, b.value))
    assert isinstance(a.value, float) and isinstance(b.value, float)
    if a.value == b.value:
        return True
    if a.kind == "number" and a.unit == b.unit == _HOUR and abs(a.value - b.value) == 12:
        # An hour of the clock read on twelve hours or on twenty-four (下午六点, 18点).
        return True
    if a.kind == "number" and (a.hedged or b.hedged):
        return abs(a.value - b.value) <= _APPROXIMATE * max(abs(a.value), abs(b.value))
    return False


def _name_overlap(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether two names may denote the same thing: the same last word ("Joseph Strauss",
    "Strauss"), one inside the other, or the initials of the other ("RDJ")."""
    if a[-1] == b[-1] or set(a) <= set(b) or set(b) <= set(a):
        return True
    if len(a) == len(b) == 1 and (
        a[0][:4] == b[0][:4] or a[0].startswith(b[0]) or b[0].startswith(a[0])
    ):
        # A short form or a variant of one name ("Jo" and "Joanne", "Brooke" and "Brookes").
        return True
    initials_a = "".join(w[0] for w in a)
    initials_b = "".join(w[0] for w in b)
    joined_a, joined_b = "".join(a), "".join(b)
    return joined_a in (initials_b, initials_b.lower()) or joined_b == initials_a


def date_parts(parsed: Parsed, slot: Slot) -> dict[str, float]:
    """The year, month and day of the date a date slot belongs to."""
    return {s.kind: s.value for s in date_group(parsed, slot) if isinstance(s.value, float)}


def parse_bare(text: str) -> Parsed:
    """A bare answer's slots, its first word counted as a name when capitalised."""
    parsed = parse(text)
    words = tokens(text)
    if words and words[0][:1].isupper() and not any(s.start == 0 for s in parsed.slots):
        word = fold(words[0])
        if word not in STOPWORDS and word not in _NOT_NAMES:
            parsed.slots.append(Slot("name", "name", (word,), 0, 1, words[0]))
    return parsed


def looks_like_name(slot: Slot) -> bool:
    """A full name of several words: single capitalised words are too often a place, a
    nationality or a product for a swap of one to mean a contradiction."""
    assert isinstance(slot.value, tuple)
    return len(slot.value) >= 2 and all(len(w) > 1 and w.isalpha() for w in slot.value)
