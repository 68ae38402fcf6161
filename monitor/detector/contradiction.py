"""Slot contradictions: a specific claim that disagrees with the same slot in the context.

A response sentence's *slots* (`slots.py`) are its quantities with a unit ("900 metres",
"$35 million"), its dates (year, month, day) and its names (runs of capitalised words). When the response
gives a value the context does not contain, and the context sentence that best matches the
rest of the claim (its *frame*: the other content words, with the sentence before it for
"It ..." style references) gives the same slot another value, the response contradicts the
context: "answer says 900 metres; context says 330 metres". That is decisive evidence of a
hallucination, stronger than any count of unsupported words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from monitor.detector.roles import (
    RIVAL_ROLE_WORDS,
    fits_rival,
    frame_of,
    in_claim,
    relation,
    role_words,
    root_overlap,
    same_role,
)
from monitor.detector.slots import (
    Parsed,
    Slot,
    date_parts,
    date_phrase,
    looks_like_name,
    parse_bare,
    parse_sentence,
    same_value,
)
from monitor.detector.text import (
    DISCOURSE,
    REFERENCES,
    fold,
    is_negation,
    root,
    stem,
    token_spans,
    tokens,
)

# Two unit words this similar (word vectors) count as one unit ("employees", "people").
_SAME_UNIT = 0.55
# A value the context gives for another fact counts as moved when the sentence with the
# other value matches the claim's frame by this many content words more, and at least this.
_MOVED_MARGIN = 1.0
_MOVED_MIN = 1.5
# The share of the claim's frame the evidence must match for a contradiction to be decisive,
# and the fewest frame words a claim needs for that (a bare "1932" restates nothing).
_RESTATED = 0.75
_DECISIVE_FRAME = 3
# Words before a name that say which role it fills, and the share of the frame the evidence
# must restate for a name moved into another role to be decisive.
_ROLE_WORDS = 3
# A bare answer has at most this many words.
BARE_ANSWER = 3
# Words before a name that do not give it a role: articles and list joiners ("the Blues",
# "Jackson and Birmingham").
_NOT_GOVERNING = frozenset("the a an this that these those his her its their and or".split())
_MOVED_RESTATED = 0.6
# Less of the frame needs restating when the claim's value holds another role in the context,
# one that fits the claim less (a value moved from another fact).
_OTHER_ROLE_RESTATED = 0.5
_PRONOUNS = frozenset("it its they their he she his her this these those them".split())
# Slots of a claim read (its first ones): each is compared with every context slot of its
# kind, so a "sentence" of thousands of numbers (a table, a list) costs in proportion to
# the context, not to it times the context. A sentence of facts has a few.
MAX_CLAIM_SLOTS = 16


@dataclass(frozen=True, slots=True)
class Contradiction:
    """A response claim and the context evidence it contradicts."""

    # "number", "date", "name", "negation", "opposite" (east/west) or "kind" (a co-hyponym
    # or a unit: copper/zinc, minutes/hours).
    kind: str
    # What the response says ("900 metres") and what the context says ("330 metres").
    said: str
    evidence: str
    # The response sentence, in full.
    claim: str
    # Whether the evidence restates the claim but for the slot (most of the claim's other
    # content words are in the evidence sentence or the one before it).
    decisive: bool = True
    # Whether the claim's own value is nowhere in the context (not moved from another fact).
    invented: bool = True

    def describe(self) -> str:
        return f"answer says {self.said}; context says {self.evidence}"


_Neighbourhood = tuple[frozenset[str], frozenset[str], float]


def _neighbourhood(index: int, context: list[Parsed]) -> _Neighbourhood:
    """A sentence's stems, those of the sentence before, and what the latter's count: half,
    or fully when the sentence starts with a pronoun ("It rises 281 metres ...") that refers
    to it."""
    own = frozenset(context[index].stems)
    before = frozenset(context[index - 1].stems) if index > 0 else frozenset()
    first = context[index].words[:1]
    carried = 1.0 if first and first[0] in _PRONOUNS else 0.5
    return own, before, carried


def _frame_score(frame: set[str], around: _Neighbourhood) -> float:
    """Claim frame words the sentence has, and those of the sentence before it as `around`
    counts them."""
    own, before, carried = around
    # Counted with set operations: the terms are 1.0 and `carried` (1.0 or 0.5), whose sums
    # are exact in any order.
    mine = frame & own
    return len(mine) + carried * len((frame - mine) & before)


UnitSimilarity = Callable[[str, str], float]


def find(
    claim_text: str,
    context: list[Parsed],
    context_words: set[str],
    question: Parsed,
    unit_similarity: UnitSimilarity,
    alone: bool = False,
) -> list[Contradiction]:
    """Contradicted slots of one response sentence (at most one per slot kind).

    A slot is contradicted when the context sentence that best matches the claim's frame
    fills the same slot (same kind; a number's unit the same or a close synonym) with another
    value, and either the claim's value appears nowhere in the context, or it appears only in
    sentences that match the frame clearly worse (a value moved from another fact).
    """
    claim = parse_sentence(claim_text)
    out: list[Contradiction] = []
    seen: set[str] = set()
    group = {"year": "date", "month": "date", "day": "date"}
    pronoun_led = not claim.stems or fold(claim_text.split()[0]) in _PRONOUNS
    asked = set(question.stems)
    # Each context sentence's stems, read once for all the claim's slots.
    neighbourhoods: dict[int, _Neighbourhood] = {}

    def compatible(slot: Slot, other: Slot) -> bool:
        if other.kind != slot.kind:
            return False
        if slot.kind != "number" or other.unit == slot.unit:
            return True
        return bool(other.unit) and unit_similarity(slot.unit, other.unit) >= _SAME_UNIT

    for slot in claim.slots[:MAX_CLAIM_SLOTS]:
        if group.get(slot.kind, slot.kind) in seen or (slot.kind == "number" and not slot.unit):
            continue
        if slot.kind == "name" and not looks_like_name(slot):
            continue
        margin = _MOVED_MARGIN * (2 if slot.kind == "name" else 1)
        frame = frame_of(claim, slot)
        parts = date_parts(claim, slot) if slot.kind in group else {}
        best_with = -1.0
        best: tuple[float, int, Slot, int] | None = None
        role = role_words(claim, slot, _ROLE_WORDS)
        # The roles the claim's own value fills wherever the context has it.
        own_roles: set[str] = set()
        # The most claim words a sentence naming the claim's own value has (by root).
        own_frame = 0
        for index, sentence in enumerate(context):
            same = [o for o in sentence.slots if o.kind == slot.kind and compatible(slot, o)]
            if not same:
                continue
            around = neighbourhoods.get(index)
            if around is None:
                around = neighbourhoods[index] = _neighbourhood(index, context)
            score = _frame_score(frame, around)
            if pronoun_led:
                score += 0.5 * len(asked & around[0])
            mine = [o for o in same if same_value(slot, o)]
            if mine:
                best_with = max(best_with, score)
                for o in mine:
                    own_roles |= role_words(sentence, o, _ROLE_WORDS + 1)
                own_frame = max(own_frame, root_overlap(frame, sentence))
                continue
            rivals = [
                o
                for o in same
                if o.kind != "name"
                or (not in_claim(o, claim) and same_role(claim, slot, sentence, o))
            ]
            if not rivals:
                continue
            rival = min(rivals, key=lambda o: abs(o.start - slot.start))
            if slot.kind == "name" and role & role_words(sentence, rival, RIVAL_ROLE_WORDS):
                # The sentence gives the rival the claim's role: it is the slot's evidence.
                score += 1.0
            agree = 0
            if parts:
                theirs = date_parts(sentence, rival)
                # A date that agrees on its other parts is the same date with one part changed.
                agree = sum(theirs.get(k) == v for k, v in parts.items() if k != slot.kind)
                score += 1.0 if agree else 0.0
            if best is None or score > best[0]:
                best = (score, index, rival, agree)
        if best is None:
            continue
        score, index, rival, agree = best
        words = slot.value if isinstance(slot.value, tuple) else ()
        if slot.kind == "name" and best_with < 0 and words and words[-1] in context_words:
            # The family name is in the context: a shortened or longer form, not a new name
            # (a first name alone is shared by too many people to tell).
            continue
        if slot.kind == "number" and best_with < 0 and _value_unread(slot, context, compatible):
            best_with = 0.0
        # A value moved from another fact: the context gives the claim's role to the rival
        # and another role to the claim's value ("designed by the architect Y" and "the
        # mayor, X" against "designed by X").
        moved = (
            best_with >= 0
            and slot.kind == "name"
            and fits_rival(
                len(role & role_words(context[index], rival, RIVAL_ROLE_WORDS)),
                len(role & own_roles),
                root_overlap(frame, context[index]) - own_frame,
            )
        )
        if best_with >= 0 and not moved:
            # The value is in the context: only a clearly better-matching other value counts.
            if score < _MOVED_MIN or score - best_with < margin:
                continue
        else:
            own = root_overlap(frame, context[index])
            if slot.kind == "name" and not (
                own >= 1
                and (
                    same_role(claim, slot, context[index], rival, strict=True)
                    or role & role_words(context[index], rival, RIVAL_ROLE_WORDS)
                )
            ):
                continue
            if slot.kind in group and not own and score < 2.0 and agree < 2:
                continue
            if score < min(1.0, max(len(frame), 1) * 0.5) and not (pronoun_led and score > 0):
                continue
        seen.add(group.get(slot.kind, slot.kind))
        evidence = context[index]
        if slot.kind in group:
            said, shown, kind = date_phrase(claim, slot), date_phrase(evidence, rival), "date"
        else:
            said, shown, kind = slot.text, rival.text, slot.kind
        decisive = _decisive(slot, frame, score, best_with, agree, evidence, compatible)
        if slot.kind == "number" and best_with == 0 and len(frame) >= _DECISIVE_FRAME:
            # A number of another fact ("each crossing takes 16 hours") put into a claim
            # the evidence restates ("boats leave every 16 hours" against "every 39
            # hours"), while no sentence with the claim's number shares any of the claim.
            decisive = _decisive(slot, frame, score, -1.0, agree, evidence, compatible)
        role_aligned = slot.kind == "name" and bool(
            role & role_words(evidence, rival, RIVAL_ROLE_WORDS)
        )
        if moved or (role_aligned and best_with < 0):
            # A name in the claim's role ("captained by X" against "the captain is Y"):
            # decisive when the evidence restates the claim and names nobody else (a sentence
            # listing several people or places, "designers like those from A and B", gives no
            # clear role).
            restated = _loose_share(relation(claim, slot, frame, context_words), index, context)
            decisive = _one_name(evidence) and (
                restated >= _MOVED_RESTATED
                # The claim's value holds another role the claim's words fit less well.
                or (moved and restated >= _OTHER_ROLE_RESTATED)
            )
        out.append(Contradiction(kind, said, shown, claim_text, decisive, best_with < 0))
    if "name" not in seen:
        out.extend(_one_word_name(claim, context, context_words, question, alone))
    return out


def _one_word_names(parsed: Parsed, bare: bool = False) -> list[Slot]:
    """Single capitalised words of a sentence that name something ("in Lyon", "by Ford"),
    with the word governing each; a bare answer of a few words may start with one."""
    out = []
    for slot in parsed.slots:
        if slot.kind != "name" or not isinstance(slot.value, tuple) or len(slot.value) != 1:
            continue
        word = slot.value[0]
        if len(word) > 1 and word.isalpha() and (slot.start > 0 or bare):
            out.append(slot)
    return out


def _governing(parsed: Parsed, slot: Slot) -> str:
    """The word just before a slot ("in", "by", "from"), or "" at the start."""
    return parsed.words[slot.start - 1] if slot.start > 0 else ""


def _name_words(slot: Slot) -> tuple[str, ...]:
    assert isinstance(slot.value, tuple)
    return slot.value


def _one_word_name(
    claim: Parsed,
    context: list[Parsed],
    context_words: set[str],
    question: Parsed,
    alone: bool,
) -> list[Contradiction]:
    """A one-word name the context does not have ("Lyon"), where the sentence that restates
    the rest of the claim has exactly one one-word name after the same word ("in Paris"):
    decisive, since the claim then gives a fact the context states otherwise. For a bare
    answer ("Lyon.") the question is the frame and any governing word will do."""
    bare = alone and len(tokens(claim.text)) <= BARE_ANSWER
    named = {w for c in context for o in c.slots if o.kind == "name" for w in _name_words(o)}
    for slot in _one_word_names(parse_bare(claim.text) if bare else claim, bare)[:MAX_CLAIM_SLOTS]:
        word = _name_words(slot)[0]
        if word in context_words or word in named or stem(word) in question.stems:
            continue
        if word in DISCOURSE or word in REFERENCES:
            continue
        frame = set(question.stems) if bare else frame_of(claim, slot)
        governing = "" if bare else _governing(claim, slot)
        # "The Nile carries ..." against "The Amazon carries ...": the subject, swapped.
        subject = not bare and slot.start == 1 and governing == "the"
        # However short the frame ("Its office is in X"), the restating sentence must have
        # it and exactly one other name in the claim's place.
        if not frame or (governing in _NOT_GOVERNING and not subject):
            continue
        for index, sentence in enumerate(context):
            rivals = [
                o
                for o in _one_word_names(sentence)
                if _name_words(o)[0] not in frame
                and not same_value(slot, o)
                and (bare or _governing(sentence, o) == governing)
                and (not subject or o.start == 1)
            ]
            if len(rivals) != 1 or _loose_share(frame, index, context, False) < _RESTATED:
                continue
            return [Contradiction("name", slot.text, rivals[0].text, claim.text, decisive=True)]
    return []


def _decisive(
    slot: Slot,
    frame: set[str],
    score: float,
    best_with: float,
    agree: int,
    evidence: Parsed,
    compatible: Callable[[Slot, Slot], bool],
) -> bool:
    """Whether a contradiction is beyond coincidence, so that it decides the verdict alone.

    A full date that differs from the context's in one part only (same day and month,
    another year) is. Otherwise the claim's value must be nowhere in the context (a value
    moved from another fact may be a misreading of the pair, left to the learned model), the
    claim must say enough besides the slot, the evidence sentence must restate it, and must
    hold exactly one value that could fill the slot (a sentence listing several months or
    lengths is about several things). A lone month is never decisive: it is as often the
    subject of a claim ("in July, ...") as its value.
    """
    if agree >= 2:
        return True
    if best_with >= 0 or slot.kind == "month" or len(frame) < _DECISIVE_FRAME:
        return False
    if score / len(frame) < _RESTATED:
        return False
    return sum(1 for o in evidence.slots if compatible(slot, o)) == 1


def _loose_share(frame: set[str], index: int, context: list[Parsed], before: bool = True) -> float:
    """The share of the frame in the sentence (and the one before, when `before` or when a
    leading pronoun refers to it), words compared by their roots (`roles.root`)."""
    near = context[index].roots
    first = context[index].words[:1]
    if index > 0 and (before or (first and first[0] in _PRONOUNS)):
        near = near | context[index - 1].roots
    return sum(1 for w in frame if root(w) in near) / max(len(frame), 1)


def _value_unread(
    slot: Slot, context: list[Parsed], compatible: Callable[[Slot, Slot], bool]
) -> bool:
    """Whether the context has the claim's number with its unit or with none read ("16
    hours" is not "16 pubs", but may be a bare "16" or "1916")."""
    return any(
        o.value == slot.value and (o.kind == "year" or not o.unit or compatible(slot, o))
        for c in context
        for o in c.slots
        if o.kind in ("number", "year")
    )


def _one_name(parsed: Parsed) -> bool:
    return sum(1 for s in parsed.slots if s.kind == "name") == 1


def negation(claim_text: str, evidence_text: str, flipped: frozenset[str]) -> Contradiction:
    """A claim that negates what its evidence states, or states what the evidence negates;
    `flipped` holds the words whose polarity differs."""
    return Contradiction(
        "negation",
        _around(claim_text, flipped),
        _around(evidence_text, flipped),
        claim_text,
    )


def _around(text: str, words: frozenset[str]) -> str:
    """The words of `text` from a negation before the first of `words` to two after it."""
    raw = tokens(text)
    spans = token_spans(text)
    folded = [fold(t) for t in raw]
    roots = {stem(w) for w in words}
    hit = next((i for i, w in enumerate(folded) if w in words or stem(w) in roots), None)
    if hit is None:
        return text
    start = hit
    for k in range(hit - 1, max(-1, hit - 4), -1):
        if is_negation(folded[k]):
            start = k
            break
    end = min(len(raw), hit + 3)
    return f'"{text[spans[start][0] : spans[end - 1][1]]}"'
