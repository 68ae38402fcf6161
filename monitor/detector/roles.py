"""Roles: which role a name fills in a sentence ("designed by X", "the choir's conductor is
X", "X conducts the choir"), and whether a name the claim puts in a role is one the context
gives to another role (`contradiction.py` decides what that contradicts)."""

from __future__ import annotations

from monitor.detector.slots import Parsed, Slot, looks_like_name
from monitor.detector.text import DISCOURSE, STOPWORDS, root, stem

# Words before a rival name read for its role.
RIVAL_ROLE_WORDS = 6


def frame_of(claim: Parsed, slot: Slot) -> set[str]:
    """The claim's content stems other than the slot's own words."""
    own = {stem(w) for w in slot.value} if isinstance(slot.value, tuple) else set()
    return set(claim.stems) - own - ({slot.unit} if slot.kind == "number" else set())


def role_words(parsed: Parsed, slot: Slot, width: int) -> set[str]:
    """The content stems just before a slot: the role it fills ("designed by X",
    "the mayor, X", "captained by X"); for a name that opens the sentence, those just after
    it ("X is the chief ranger", "X engineered the line")."""
    if slot.start == 0 and slot.kind == "name":
        words = parsed.words[slot.end : slot.end + width + 1]
    else:
        words = parsed.words[max(0, slot.start - width) : slot.start]
    # Five letters of the content words' stems: "director" and "directed", "captain" and
    # "captained" are one role word.
    stripped = (w.removesuffix("'s").rstrip("'") for w in words)
    return {
        stem(w)[:5] for w in stripped if w.isalpha() and w not in STOPWORDS and w not in DISCOURSE
    }


def relation(claim: Parsed, slot: Slot, frame: set[str], context_words: set[str]) -> set[str]:
    """The frame without the words of the claim's other names that the context has: in
    "Tordahl Ferries was founded by X" the role is "founded", whoever it is about (the
    context names the line in a sentence of its own)."""
    topic = {
        stem(w)
        for o in claim.slots
        if o is not slot and o.kind == "name" and isinstance(o.value, tuple)
        for w in o.value
        if w in context_words
    }
    return frame - topic or frame


def root_overlap(frame: set[str], sentence: Parsed) -> int:
    """How many of the frame's words the sentence has, compared by root."""
    roots = sentence.roots
    return sum(1 for w in frame if root(w) in roots)


def fits_rival(rival_role: int, own_role: int, frame_lead: int) -> bool:
    """Whether the claim's role words fit the rival's role better than any role the context
    gives the claim's own value; on a tie, whether the rival's sentence has more of the
    claim."""
    return rival_role > own_role or (rival_role == own_role > 0 and frame_lead > 0)


def same_role(
    claim: Parsed, slot: Slot, sentence: Parsed, other: Slot, strict: bool = False
) -> bool:
    """Whether `other` fills the role `slot` has in the claim: a full name too, after the same
    word ("by", "captain") or in a sentence sharing two content words with the claim."""
    if not looks_like_name(other):
        return False
    mine = claim.words[slot.start - 1] if slot.start else ""
    before = {stem(w) for w in sentence.words[max(0, other.start - 3) : other.start]}
    theirs = sentence.roots
    shared = sum(1 for w in frame_of(claim, slot) if root(w) in theirs)
    names = sum(1 for s in sentence.slots if s.kind == "name" and looks_like_name(s))
    if bool(mine) and mine not in STOPWORDS - {"by"} and stem(mine) in before:
        return True
    if strict:
        return bool(mine) and stem(mine) in before
    return shared >= 2 or (shared >= 1 and names == 1)


def in_claim(other: Slot, claim: Parsed) -> bool:
    assert isinstance(other.value, tuple)
    words = {w.removesuffix("'s") for w in claim.words}
    # A shared first name ("Selma Drewick" and "Selma Cormford") is another person.
    return other.value[-1] in words if len(other.value) > 1 else other.value[0] in words
