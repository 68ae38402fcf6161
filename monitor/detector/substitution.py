"""Substitutions: a claim that restates a context sentence with one word swapped for a rival.

The rival words come from small closed lexicons, not from word vectors (which put "east" and
"west", or "copper" and "zinc", close together and so cannot tell a paraphrase from a swap):

- **opposites** — directions, positions, times of day, seasons, trends ("east bank" against
  "west bank", "upstream" against "downstream", "increased" against "decreased");
- **co-hyponyms** — members of one closed class that cannot stand for each other: colours,
  metals, materials, woods, animals, instruments, crops, weekdays, and units of one dimension
  (minutes / hours / days, "a day" / "a week", metres / kilometres, euros / dollars);

A swap is a contradiction only when the context sentence restates the rest of the claim (its
other content words, `_RESTATED` of them, at least `_FRAME` words) and the claim's word is in
no context sentence that shares two of those words: a value the context gives elsewhere in a
similar frame is supported, not swapped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.detector.contradiction import Contradiction
from monitor.detector.embedding import shared_embedder
from monitor.detector.text import (
    DISCOURSE,
    NEGATIVE_POLARITY,
    STOPWORDS,
    TOKEN_CACHE,
    fold,
    fold_all,
    is_negation,
    past_numbers,
    root,
    stem,
    tokens,
)
from monitor.shared.recurring import recurring_cache

# Three fifths of the claim's other content words, and at least two of them (a number the
# claim shares with the sentence counts as one).
_RESTATED = 0.6
_FRAME = 2
# A polarity flip in other words: the share of the claim the sentence restates, and of the
# sentence's own content words the claim restates.
_FLIP_RESTATED = 0.66
_BOTH_WAYS = 0.5
# For a polarity flip, a claim word this close (word vectors) to a word of the sentence is
# restated in other words ("bikes" and "bicycles").
_FLIP_SYNONYM = 0.7
_OPPOSITE_PAIRS = """
east west | north south | northeast southwest | northwest southeast | eastern western |
northern southern | upstream downstream | above below | upper lower | top bottom |
before after | earlier later | morning evening | dawn dusk | summer winter | spring autumn |
inside outside | indoor outdoor | interior exterior | internal external | front back |
increased decreased | increase decrease | increases decreases | rose fell | rise fall |
rises falls | risen fallen | gain loss | gained lost | won lost | win lose | wins loses |
profit loss | import export | imports exports | imported exported | bought sold | buy sell |
entrance exit | arrival departure | arrives departs | first last | oldest newest |
oldest youngest | largest smallest | highest lowest | longest shortest | maximum minimum |
heaviest lightest | cheapest dearest | public private | urban rural | domestic foreign |
permanent temporary | male female | left right | day night | daily nightly |
hot cold | warm cool | wet dry | open closed | opened closed | opens closes |
accepted rejected | accepts rejects | allowed forbidden | permitted prohibited |
included excluded | includes excludes | success failure | succeeded failed |
victory defeat | ascending descending | north-east south-west | eastbound westbound |
northbound southbound | inbound outbound | minimum maximum | positive negative |
lowered raised | raise lower | expanded shrank | grew shrank | grow shrink |
""".replace("\n", " ")
_OPPOSITES: dict[str, frozenset[str]] = {}
for _pair in filter(str.strip, _OPPOSITE_PAIRS.split("|")):
    _a, _b = _pair.split()
    _OPPOSITES[_a] = _OPPOSITES.get(_a, frozenset()) | {_b}
    _OPPOSITES[_b] = _OPPOSITES.get(_b, frozenset()) | {_a}

_CLASSES = {
    "colour": "red blue green yellow white black orange grey gray purple pink brown violet "
    "crimson scarlet turquoise beige maroon navy gold silver",
    "metal": "copper bronze zinc tin iron steel silver gold brass nickel aluminium aluminum "
    "lead titanium platinum chrome chromium cobalt",
    "material": "wood stone glass steel concrete brick plastic marble granite clay timber "
    "sandstone limestone slate cotton wool silk linen leather paper",
    "wood": "oak pine birch cedar walnut maple beech ash elm teak mahogany spruce larch",
    "animal": "otter heron badger lynx beaver falcon salmon tortoise stag owl fox wolf bear "
    "deer eagle hawk swan duck goose crane stork trout pike eel seal whale dolphin horse "
    "cow sheep goat pig dog cat rabbit hare squirrel mouse rat bat frog toad snake lizard "
    "turtle lion tiger leopard elephant giraffe zebra camel monkey bee wasp butterfly moth "
    "crow raven sparrow robin pigeon gull puffin penguin shark cod herring",
    "instrument": "violin cello viola flute oboe clarinet bassoon trumpet trombone horn tuba "
    "harp piano organ guitar drum drums saxophone accordion",
    "crop": "wheat barley rye oats oat maize corn rice millet sorghum spelt buckwheat potato "
    "potatoes soy soybean",
    "fruit": "apple apples pear pears cherry cherries plum plums grape grapes orange lemon "
    "peach apricot strawberry raspberry",
    "weekday": "monday tuesday wednesday thursday friday saturday sunday",
    "time": "second seconds minute minutes hour hours day days week weeks month months year "
    "years decade decades century centuries daily weekly monthly yearly annually hourly",
    "length": "millimetre millimetres millimeter millimeters centimetre centimetres "
    "centimeter centimeters metre metres meter meters kilometre kilometres kilometer "
    "kilometers mile miles foot feet inch inches yard yards",
    "weight": "gram grams kilogram kilograms kilo kilos tonne tonnes ton tons pound pounds "
    "ounce ounces",
    "money": "euro euros dollar dollars yen pound pounds franc francs krone kroner crown "
    "crowns rupee rupees yuan",
    "area": "hectare hectares acre acres square",
    "vehicle": "car cars bus buses train trains tram trams ferry ferries bicycle bicycles "
    "truck trucks plane planes helicopter boat boats ship ships",
}
_PERIOD = {
    "daily": "day", "weekly": "week", "monthly": "month", "yearly": "year", "annually": "year",
    "hourly": "hour", "annual": "year",
}  # fmt: skip
# A word in two classes ("silver", "pound") belongs to both; a swap within either counts.
_CLASS_OF: dict[str, frozenset[str]] = {}
for _name, _members in _CLASSES.items():
    for _word in _members.split():
        _CLASS_OF[_word] = _CLASS_OF.get(_word, frozenset()) | {_name}


@recurring_cache(TOKEN_CACHE)
def _lemma(word: str) -> str:
    """The form a lexicon compares: periods as their unit ("weekly" -> "week"), plurals as
    singulars ("minutes" -> "minute")."""
    word = _PERIOD.get(word, word)
    for suffix, repl in (("ies", "y"), ("es", ""), ("s", "")):
        if word.endswith(suffix) and word[: -len(suffix)] + repl in _CLASS_OF:
            return word[: -len(suffix)] + repl
    return word


@dataclass(frozen=True, slots=True)
class _Words:
    text: str
    # Folded words, their lemmas and the content stems that frame a claim.
    words: tuple[str, ...]
    lemmas: frozenset[str]
    stems: frozenset[str]
    # The stems' roots (`root`: "rehearsals" and "rehearse" meet).
    roots: frozenset[str]


# Context chunks recur across requests; a worker keeps its last sentences read.
@recurring_cache(1024)
def _read(text: str) -> _Words:
    words = tuple(fold_all(text, tokens(text)))
    content = {
        stem(w.removesuffix("'s")) if w.isalpha() or "'" in w else w
        for w in words
        if w not in STOPWORDS and w not in DISCOURSE and (w[0].isdigit() or len(w) > 1)
    }
    return _Words(
        text,
        words,
        frozenset(past_numbers(_lemma, text, words)),
        frozenset(content),
        frozenset(past_numbers(root, text, content)),
    )


def _rivals(word: str, theirs: _Words, mine: _Words) -> list[tuple[str, str]]:
    """(kind, rival word) pairs in `theirs` that `word` may have been swapped from."""
    lemma = _lemma(word)
    out = []
    for other in theirs.lemmas - mine.lemmas:
        if other in _OPPOSITES.get(lemma, ()):
            out.append(("opposite", other))
        elif _CLASS_OF.get(lemma, frozenset()) & _CLASS_OF.get(other, frozenset()):
            out.append(("kind", other))
    return out


def _sole_member(
    word: str, claim: _Words, evidence: list[_Words]
) -> tuple[float, str, str, _Words] | None:
    """For a short claim whose frame no sentence restates ("They are built from birch"): the
    one word of the same class the context has, when the context lacks the claim's word
    entirely and names exactly one member of the class ("The shelves are made of oak")."""
    lemma = _lemma(word)
    if any(lemma in e.lemmas for e in evidence):
        return None
    found = [
        (other, e)
        for e in evidence
        for other in e.lemmas - claim.lemmas
        if _CLASS_OF.get(lemma, frozenset()) & _CLASS_OF.get(other, frozenset())
    ]
    if len({other for other, _ in found}) != 1:
        return None
    other, sentence = found[0]
    return (0.0, "kind", other, sentence)


def _sole_opposite(
    lemma: str, frame: set[str], evidence: list[_Words]
) -> tuple[float, str, str, _Words] | None:
    """For a short claim whose frame no sentence restates ("The taproom is located inside
    it"): the opposite of its word, when the context lacks the word entirely and the only
    opposite it has is in a sentence sharing a word of the claim ("The taproom is outside
    the old mill")."""
    if any(lemma in e.lemmas for e in evidence):
        return None
    roots = {root(w) for w in frame}
    found = [
        (other, e) for e in evidence for other in e.lemmas & _OPPOSITES[lemma] if roots & e.roots
    ]
    if len({other for other, _ in found}) != 1:
        return None
    other, sentence = found[0]
    return (0.0, "opposite", other, sentence)


def _written(text: str, lemma: str, default: str) -> str:
    """The word of `text` whose lemma is `lemma`, as written."""
    return next((t for t in tokens(text) if _lemma(fold(t)) == lemma), default)


def _share(frames: tuple[set[str], ...], sentence: _Words, claim: _Words) -> float:
    return max(_share_of(f, sentence, claim) for f in frames)


def _share_of(frame: set[str], sentence: _Words, claim: _Words) -> float:
    """The share of the frame the sentence restates; nothing unless it restates two words,
    one of them the claim's own (not only the question's)."""
    shared = _restated_words(frame, sentence) if len(frame) <= _ROOTED else frame & sentence.stems
    if len(shared) < _FRAME or not shared & claim.stems:
        return 0.0
    return len(shared) / len(frame)


# A claim of at most this many content words besides an opposite is checked against the
# context's only opposite of it (`_sole_opposite`).
_SOLE_FRAME = 4
# A frame this short is compared by roots too: each of its few words must count, however
# it is inflected; a longer one restates enough words as written.
_ROOTED = 6


def _frame(claim: _Words, question: _Words, own: set[str]) -> tuple[set[str], ...]:
    """The claim's content words other than `own`, alone and with the question's: a claim
    led by a pronoun ("Its emblem is the owl") is about what the question names."""
    frame = set(claim.stems) - own
    return frame, frame | (set(question.stems) - own)


def find(claim_text: str, context: Sequence[str], question: str = "") -> list[Contradiction]:
    """Swapped opposites and co-hyponyms (units included) in one response sentence."""
    claim = _read(claim_text)
    candidates = {w for w in claim.words if _lemma(w) in _OPPOSITES or _lemma(w) in _CLASS_OF}
    if not candidates:
        return []
    asked = _read(question)
    evidence = [_read(t) for t in context]
    out: list[Contradiction] = []
    for word in sorted(candidates):
        lemma = _lemma(word)
        frame = _frame(claim, asked, {stem(word)})
        if len(frame[1]) < _FRAME:
            continue
        # The claim's word in a sentence that shares any of the frame backs it.
        if any(_share(frame, e, claim) > 0 for e in evidence if lemma in e.lemmas):
            continue
        best: tuple[float, str, str, _Words] | None = None
        for sentence in evidence:
            if lemma in sentence.lemmas:
                continue
            share = _share(frame, sentence, claim)
            if share < _RESTATED:
                continue
            for kind, rival in _rivals(word, sentence, claim):
                if best is None or share > best[0]:
                    best = (share, kind, rival, sentence)
        if best is None and lemma in _CLASS_OF and len(frame[0]) <= _SHORT:
            best = _sole_member(word, claim, evidence)
        if best is None and lemma in _OPPOSITES and 0 < len(frame[0]) <= _SOLE_FRAME:
            best = _sole_opposite(lemma, frame[0], evidence)
        if best is not None:
            _, kind, rival, sentence = best
            said = _written(claim_text, lemma, word)
            shown = _written(sentence.text, rival, rival)
            out.append(Contradiction(kind, said, shown, claim_text))
    return out


_AUXILIARIES = frozenset(
    "is are was were be been do does did can could may might will would shall should must "
    "has have had".split()
)
# Short, single-proposition sentences only: in a long one a negation is as often about a
# side remark ("(not paper towels)") as about the claim.
_SHORT = 8


_LEADING_NO = re.compile(r"\s*no\s*[,.!;:]", re.IGNORECASE)


def _negatives(sentence: _Words) -> frozenset[str]:
    """The sentence's negations and negative words ("not", "without", "never"); an answer's
    leading "No," answers the question and negates nothing in the sentence."""
    words = sentence.words
    if _LEADING_NO.match(sentence.text):
        words = words[1:]
    return frozenset(w for w in words if is_negation(w) or w in NEGATIVE_POLARITY)


@recurring_cache(1024)
def _polarity_words(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """A sentence's content stems other than its negations, and its negatives: read once
    per context sentence, not once per claim compared with it."""
    sentence = _read(text)
    affirmed = sentence.stems - {stem(w) for w in sentence.words if is_negation(w)}
    return affirmed, _negatives(sentence)


_CONDITIONS = frozenset("if unless whether although though why".split())


def _both_ways(words: tuple[str, ...]) -> bool:
    """Whether a word the sentence negates also stands in it without a negation ("the amounts
    owed ... why the debt is not owed"): then it does not deny the word as such."""
    for i, w in enumerate(words):
        if not is_negation(w):
            continue
        after = [x for x in words[i + 1 : i + 4] if x.isalpha() and x not in STOPWORDS]
        if after and words.count(after[0]) > 1:
            return True
    return False


def _verbal_negation(sentence: _Words) -> bool:
    """A negated predicate: "cannot", "never", a "n't" contraction, or "not" after an
    auxiliary ("are not allowed", "does not deliver"), in a sentence with no condition
    ("if this doesn't work, ...")."""
    words = sentence.words
    if _both_ways(words):
        return False
    return not _CONDITIONS & set(words) and any(
        w in ("cannot", "never")
        or w.endswith("n't")
        or (w == "not" and i > 0 and words[i - 1] in _AUXILIARIES)
        for i, w in enumerate(words)
    )


def _restated_words(frame: set[str], sentence: _Words) -> set[str]:
    """The frame's words the sentence has as written (or by their roots)."""
    return {w for w in frame if w in sentence.stems or root(w) in sentence.roots}


def _synonym_share(frame: set[str], written: set[str], sentence: _Words, claim: _Words) -> float:
    """`_share_of`, a claim word also counted when a word of the sentence is close to it
    (word vectors): the same proposition in other words. At least two words restated, one
    of them as written (`written`: `_restated_words`)."""
    if not written:
        return 0.0
    rest = sorted({w for w in claim.words if w.isalpha() and stem(w) in frame - written})
    theirs = sorted({w for w in sentence.words if w.isalpha() and w not in STOPWORDS})
    close = 0
    if rest and theirs:
        embedder = shared_embedder()
        sims = embedder.word_vectors(rest) @ embedder.word_vectors(theirs).T
        close = len(
            {stem(w) for w, row in zip(rest, sims, strict=True) if row.max() >= _FLIP_SYNONYM}
        )
    if len(written) + close < _FRAME:
        return 0.0
    return (len(written) + close) / len(frame)


def polarity(claim_text: str, context: Sequence[str]) -> Contradiction | None:
    """A claim that restates a context sentence with the opposite polarity in other words
    ("Dogs may walk the trails" against "Dogs are not permitted on the trails"): one side
    has a negated predicate the other lacks, every other negative word ("without") is on
    both sides, and the sentence restates `_RESTATED` of the claim's content words and the
    claim `_BOTH_WAYS` of the sentence's (the same proposition, not a long sentence that
    happens to contain it). A sentence with the claim's polarity that restates it as well
    backs it instead."""
    claim = _read(claim_text)
    frame = set(claim.stems) - {stem(w) for w in claim.words if is_negation(w)}
    if not _FRAME < len(frame) <= _SHORT or _CONDITIONS & set(claim.words):
        return None
    mine = _negatives(claim)
    best: tuple[float, _Words] | None = None
    same = 0.0
    for sentence in (_read(t) for t in context):
        share = _share_of(frame, sentence, claim)
        written = _restated_words(frame, sentence)
        if not share and not written:
            continue  # a sentence that restates nothing of the claim backs and flips nothing
        # The same proposition both ways: the sentence says little besides the claim.
        theirs, negatives = _polarity_words(sentence.text)
        if share and (len(theirs) > _SHORT or len(frame & theirs) / len(theirs) < _BOTH_WAYS):
            share = 0.0
        if negatives == mine:
            same = max(same, share)
            continue
        # Exactly one side adds negations, and they negate its predicate.
        added, negating = (
            (mine - negatives, claim) if mine > negatives else (negatives - mine, sentence)
        )
        if not (mine > negatives or negatives > mine) or not all(is_negation(w) for w in added):
            continue
        if not _verbal_negation(negating):
            continue
        if share < _FLIP_RESTATED and len(theirs) <= _SHORT:
            share = _synonym_share(frame, written, sentence, claim)
        if share >= _FLIP_RESTATED and (best is None or share > best[0]):
            best = (share, sentence)
    if best is None or same >= best[0]:
        return None
    evidence = best[1].text
    return Contradiction("negation", f'"{claim_text}"', f'"{evidence}"', claim_text)
