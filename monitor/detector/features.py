"""Support features of a response against its retrieved context.

Every response sentence is checked for content words, numbers and names that the context
(or the question) does not contain, for negation its closest evidence does not share, and for
its embedding similarity to the closest context sentence. The per-sentence findings feed both
the record-level feature vector (scored by the shipped model) and the list of unsupported
sentences shown to operators.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from monitor.detector import contradiction, slots, substitution
from monitor.detector.contradiction import Contradiction
from monitor.detector.embedding import Embedder
from monitor.detector.text import (
    DISCOURSE,
    NEGATIONS,
    NEGATIVE_POLARITY,
    REFERENCES,
    STOPWORDS,
    canonical,
    fold,
    is_negation,
    number_value,
    sentences,
    stem,
    strip_list_marker,
    tokens,
)

FEATURE_NAMES = (
    "unsupported_share_context",
    "unsupported_share",
    "unsupported_count",
    "worst_sentence_unsupported_share",
    "unsupported_numbers",
    "unsupported_number_share",
    "unsupported_entities",
    "novel_bigram_share",
    "min_sentence_similarity",
    "mean_sentence_similarity",
    "soft_unsupported_count",
    "negation_mismatches",
    "abstains",
    "content_length",
    "rare_unsupported_count",
    "specific_unsupported",
    "conflicts",
    "worst_sentence_specific",
    "worst_sentence_soft_share",
    "specific_unsupported_share",
    "min_sentence_similarity_specific",
    "slot_contradictions",
    "strong_contradictions",
    # Contradictions whose claimed value is nowhere in the context.
    "invented_contradictions",
)
# An unsupported word whose closest context word is at least this similar is a paraphrase;
# a name must be far closer ("Paris" and "Lyon" are close as vectors, and still two cities).
# A name is a claim however common the word: it weighs fully, not by its rarity.
_SOFT_MATCH = 0.55
_NAME_MATCH = 0.8
# Answers of at most this many words may start with the name they give.
_SHORT_ANSWER = 4
# A number restating the one before it in another unit is supported by it: an answer may
# add the conversion the context did not give. Rounded conversions are allowed.
_CONVERSION_UNITS = {
    "fahrenheit": "F", "f": "F", "celsius": "C", "c": "C", "mile": "mi", "miles": "mi",
    "km": "km", "kilometer": "km", "kilometers": "km", "kilometre": "km", "kilometres": "km",
    "foot": "ft", "feet": "ft", "ft": "ft", "meter": "m", "meters": "m", "metre": "m",
    "metres": "m", "m": "m", "pound": "lb", "pounds": "lb", "lb": "lb", "lbs": "lb",
    "kilogram": "kg", "kilograms": "kg", "kg": "kg", "inch": "in", "inches": "in",
    "centimeter": "cm", "centimeters": "cm", "centimetre": "cm", "centimetres": "cm", "cm": "cm",
}  # fmt: skip
_CONVERSIONS: dict[tuple[str, str], Callable[[float], float]] = {
    ("F", "C"): lambda x: (x - 32) * 5 / 9,
    ("C", "F"): lambda x: x * 9 / 5 + 32,
    ("mi", "km"): lambda x: x * 1.609344,
    ("km", "mi"): lambda x: x / 1.609344,
    ("ft", "m"): lambda x: x * 0.3048,
    ("m", "ft"): lambda x: x / 0.3048,
    ("lb", "kg"): lambda x: x * 0.45359237,
    ("kg", "lb"): lambda x: x / 0.45359237,
    ("in", "cm"): lambda x: x * 2.54,
    ("cm", "in"): lambda x: x / 2.54,
}
_CONVERSION_REACH = 6
_CONVERSION_TOLERANCE = 0.04
# A negation flip only counts against a claim this close to its evidence sentence.
_SAME_CLAIM = 0.8
_SHARED_WORDS = 0.6
# How many words after "not"/"no"/"never" may stand before the word it negates.
_NEGATION_SCOPE = 3
# A word this close to a negated word (word vectors) states the same thing ("permitted").
_SYNONYM = 0.7
# A polarity flip is a contradiction when the claim shares this much with its evidence,
# and says at least this many content words besides the flipped one.
_RESTATES = 0.8
_RESTATED_WORDS = 2
# A claim this close to its evidence sentence talks about the same thing, so a number there
# that differs from the claim's is a contradiction rather than extra detail.
_SAME_TOPIC = 0.6
_PREFIX = 6
_MAX_CONTEXT_SENTENCES = 400
_ABSTAIN = re.compile(
    r"\b(?:(?:does|do|did) not (?:say|mention|specify|state|provide|include|contain|"
    r"indicate|address|discuss|give|offer|cover|tell|explain)|(?:is|are|was|were) not "
    r"(?:mentioned|provided|specified|stated|given|available|included|addressed|clear|"
    r"discussed|covered)|no (?:information|mention|details?|data|specific information)|"
    r"not enough information|insufficient information|(?:cannot|can't|unable to) (?:be )?"
    r"(?:determine|determined|answer|answered|find|tell|say|confirm|provide)|there is no "
    r"(?:information|mention|indication)|doesn't (?:say|mention|specify|provide|state))\b",
    re.IGNORECASE,
)
_CONTEXT_REFERENCE = re.compile(
    r"\b(?:context|passages?|documents?|sources?|text|articles?|provided|given|information|"
    r"search results?|retrieved)\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=131072)
def _normalise(token: str) -> tuple[str, str | None]:
    """(folded and unit-canonical form, numeric value for digit tokens else None)."""
    numeric = token[0].isdigit() or token[0] == "$"
    return canonical(fold(token)), number_value(token) if numeric else None


@dataclass(slots=True)
class _Sentence:
    """A sentence's tokens in the forms the checks compare."""

    text: str
    raw: list[str]
    folded: list[str]
    numbers: list[str | None]

    @classmethod
    def parse(cls, text: str) -> _Sentence:
        raw = tokens(strip_list_marker(text))
        forms = [_normalise(t) for t in raw]
        return cls(text, raw, [f for f, _ in forms], [n for _, n in forms])


@dataclass(slots=True)
class _Support:
    """What the evidence contains."""

    words: set[str] = field(default_factory=set)
    stems: set[str] = field(default_factory=set)
    prefixes: set[str] = field(default_factory=set)
    numbers: set[str] = field(default_factory=set)
    bigrams: set[tuple[str, str]] = field(default_factory=set)
    originals: dict[str, str] = field(default_factory=dict)

    def add(self, sentence: _Sentence, grams: bool) -> None:
        seq: list[str] = []
        for token, word, value in zip(sentence.raw, sentence.folded, sentence.numbers, strict=True):
            if value is not None:
                self.numbers.add(value)
                seq.append(value)
                continue
            spelled = number_value(word)
            if spelled is not None:
                self.numbers.add(spelled)
            if word in STOPWORDS:
                continue
            self.words.add(word)
            self.originals.setdefault(word, token)
            s = stem(word)
            self.stems.add(s)
            if len(word) > _PREFIX:
                self.prefixes.add(word[:_PREFIX])
            seq.append(s)
        if grams:
            self.bigrams.update(itertools.pairwise(seq))

    def has_word(self, word: str) -> bool:
        return (
            word in self.words
            or stem(word) in self.stems
            or (len(word) > _PREFIX and word[:_PREFIX] in self.prefixes)
        )


@dataclass(slots=True)
class SentenceCheck:
    text: str
    content: int
    unsupported: list[str]
    unsupported_context: int
    numbers: int
    unsupported_numbers: list[str]
    unsupported_entities: list[str]
    negated: frozenset[str]
    abstains: bool
    bigrams: int
    novel_bigrams: int
    similarity: float = 0.0
    negation_mismatch: bool = False
    soft_unsupported: int = 0
    rare_unsupported: int = 0
    specific_unsupported: float = 0.0
    # Claims that contradict their closest evidence: a different number, or a flipped negation.
    conflicts: int = 0
    # Numbers that restate another of the sentence in another unit ("12 miles (19 km)").
    converted: list[str] = field(default_factory=list)
    # Unsupported words with no close context word (not a paraphrase), and numbers.
    far: list[str] = field(default_factory=list)
    # How specific each of those words is (0 for the most common words, 1 for rare ones).
    specific: dict[str, float] = field(default_factory=dict)
    # The context sentence closest to this one (what the second stage reads it against).
    evidence: str = ""

    @property
    def unsupported_share(self) -> float:
        return len(self.unsupported) / self.content if self.content else 0.0

    @property
    def flagged(self) -> bool:
        """Whether an operator should see this sentence as not backed by the context."""
        if self.abstains or self.content == 0:
            return False
        if self.unsupported_numbers or self.negation_mismatch:
            return True
        if self.unsupported_entities and self.soft_unsupported:
            return True
        return self.rare_unsupported >= 2 or (
            self.unsupported_share >= 0.5 and self.soft_unsupported > 0
        )


@dataclass(slots=True)
class Analysis:
    features: np.ndarray
    sentences: list[SentenceCheck]
    # Claims that contradict the same slot (number, date, name) or the polarity of the context.
    contradictions: list[Contradiction] = field(default_factory=list)


def _check(sentence: _Sentence, context: _Support, question: _Support) -> SentenceCheck:
    unsupported: list[str] = []
    unsupported_context = numbers = content = 0
    bad_numbers: list[str] = []
    bad_entities: list[str] = []
    converted: list[str] = []
    seq: list[str] = []
    for i, (token, word, value) in enumerate(
        zip(sentence.raw, sentence.folded, sentence.numbers, strict=True)
    ):
        if value is not None and i > 0 and sentence.folded[i - 1] in REFERENCES:
            continue
        if value is not None:
            numbers += 1
            content += 1
            seq.append(value)
            if value not in context.numbers and _converted(sentence, i, context):
                converted.append(token)
            elif value not in context.numbers:
                unsupported_context += 1
                if value not in question.numbers:
                    bad_numbers.append(token)
                    unsupported.append(token)
            continue
        if word in STOPWORDS or word in DISCOURSE or len(word) < 2:
            continue
        spelled = number_value(word)
        if spelled is not None and (spelled in context.numbers or spelled in question.numbers):
            continue
        content += 1
        seq.append(stem(word))
        if context.has_word(word):
            continue
        unsupported_context += 1
        if question.has_word(word):
            continue
        unsupported.append(word)
        # A capitalised word is a name unless it only starts a sentence; in an answer of a
        # few words ("Scottish.", "Lucy Liu") the first word is the answer itself.
        if token[0].isupper() and (i > 0 or len(sentence.raw) <= _SHORT_ANSWER):
            bad_entities.append(token)
    negated = _negated(sentence)
    pairs = list(itertools.pairwise(seq))
    return SentenceCheck(
        text=sentence.text,
        content=content,
        unsupported=unsupported,
        unsupported_context=unsupported_context,
        numbers=numbers,
        unsupported_numbers=bad_numbers,
        unsupported_entities=bad_entities,
        negated=negated,
        abstains=bool(_ABSTAIN.search(sentence.text) and _CONTEXT_REFERENCE.search(sentence.text)),
        bigrams=len(pairs),
        novel_bigrams=sum(1 for b in pairs if b not in context.bigrams),
        converted=converted,
    )


def _unit_after(sentence: _Sentence, i: int) -> str | None:
    """The unit of conversion written within two words after number `i` ("58 degrees
    Fahrenheit", "400°F", "12 miles")."""
    for word in sentence.folded[i + 1 : i + 3]:
        unit = _CONVERSION_UNITS.get(word)
        if unit is not None:
            return unit
    return None


def _converted(sentence: _Sentence, i: int, context: _Support) -> bool:
    """Whether number `i` restates, in another unit, a number the context has just before
    it in the sentence ("58 degrees Fahrenheit (14 degrees Celsius)", "5 miles (8 km)")."""
    target = _unit_after(sentence, i)
    value = sentence.numbers[i]
    if target is None or value is None:
        return False
    for j in range(max(0, i - _CONVERSION_REACH), i):
        source = sentence.numbers[j]
        if source is None or source not in context.numbers:
            continue
        convert = _CONVERSIONS.get((_unit_after(sentence, j) or "", target))
        if convert is None:
            continue
        expected, actual = convert(float(source)), float(value)
        if abs(expected - actual) <= max(1.0, _CONVERSION_TOLERANCE * abs(expected)):
            return True
    return False


def _negation_targets(words: list[str]) -> set[int]:
    """Positions of the words a negation applies to: the first content word within
    `_NEGATION_SCOPE` words after it ("does not *lock*", "no *refund*")."""
    out = set()
    for i, word in enumerate(words):
        if is_negation(word):
            for j in range(i + 1, min(len(words), i + 1 + _NEGATION_SCOPE)):
                nxt = words[j]
                if nxt not in STOPWORDS and nxt not in DISCOURSE and nxt.isalpha():
                    out.add(j)
                    break
    return out


def _negated(sentence: _Sentence) -> frozenset[str]:
    """The words a negation applies to."""
    words = sentence.folded
    return frozenset(words[j] for j in _negation_targets(words))


def _contradicts(
    claim: _Sentence, negated: frozenset[str], evidence: _Sentence, embedder: Embedder
) -> frozenset[str]:
    """Stems one side negates and the other states (itself or a close synonym, "allowed" /
    "permitted") with no negation anywhere in it."""
    # A word a sentence both negates and states ("owed to you ... why it is not owed") is
    # not denied by it.
    denied = _negated(evidence) - _affirmed(evidence)
    negated = negated - _affirmed(claim)
    if negated and not denied and not _has_negation(evidence):
        return _stated(negated, evidence, embedder)
    if denied and not negated and not _has_negation(claim):
        return _stated(denied, claim, embedder)
    return frozenset()


def _affirmed(sentence: _Sentence) -> frozenset[str]:
    """Words that occur in the sentence neither as a negation nor negated by one."""
    words = sentence.folded
    negated = _negation_targets(words)
    return frozenset(
        word for j, word in enumerate(words) if j not in negated and not is_negation(word)
    )


def _loose(word: str) -> str:
    s = stem(word)
    return s[:-1] if len(s) > 3 and s.endswith("s") else s


def _stated(negated: frozenset[str], sentence: _Sentence, embedder: Embedder) -> frozenset[str]:
    """The negated stems that `sentence` states, and the words of it that state them."""
    words = [w for w in sentence.folded if w.isalpha() and w not in STOPWORDS]
    roots = {_loose(w): w for w in words}
    out = {roots[_loose(n)] for n in negated if _loose(n) in roots}
    if out or not words:
        return frozenset(out | {n for n in negated if _loose(n) in roots})
    sims = embedder.word_vectors(sorted(negated)) @ embedder.word_vectors(words).T
    close = sims.max(axis=0) >= _SYNONYM
    hits = {w for w, c in zip(words, close, strict=True) if c}
    if not hits:
        return frozenset()
    return frozenset(hits | negated)


def _same_claim(claim: _Sentence, evidence: _Sentence, similarity: float) -> bool:
    """Whether the evidence sentence states the claim's content (similar, or most words shared)."""
    if similarity >= _SAME_CLAIM:
        return True
    mine = {stem(w) for w in claim.folded if w not in STOPWORDS and w not in DISCOURSE}
    if not mine:
        return False
    theirs = {stem(w) for w in evidence.folded}
    return len(mine & theirs) / len(mine) >= _SHARED_WORDS


def _restates(claim: _Sentence, evidence: _Sentence, flipped: frozenset[str]) -> bool:
    """Whether the claim says what the evidence sentence says but for its polarity: so close
    that a flipped negation is a contradiction rather than a different statement. Judged on
    shared words, not vector similarity, which is high for sentences on one topic."""
    ignore = NEGATIONS | {"yes"} | flipped
    mine = {
        _loose(w)
        for w in claim.folded
        if w.isalpha() and w not in STOPWORDS and w not in DISCOURSE and w not in ignore
    }
    if len(mine) < _RESTATED_WORDS:
        return False
    theirs = {_loose(w) for w in evidence.folded}
    return len(mine & theirs) / len(mine) >= _RESTATES


def _has_negation(sentence: _Sentence) -> bool:
    return any(
        w in NEGATIONS or w in NEGATIVE_POLARITY or w.endswith("n't") for w in sentence.folded
    )


def _window(parsed: list[_Sentence]) -> list[_Sentence]:
    """Very long contexts: merge neighbouring sentences so at most a fixed number remain."""
    if len(parsed) <= _MAX_CONTEXT_SENTENCES:
        return parsed
    step = len(parsed) / _MAX_CONTEXT_SENTENCES
    merged = []
    for i in range(_MAX_CONTEXT_SENTENCES):
        part = parsed[int(i * step) : int((i + 1) * step)]
        merged.append(
            _Sentence(
                " ".join(p.text for p in part),
                [t for p in part for t in p.raw],
                [w for p in part for w in p.folded],
                [n for p in part for n in p.numbers],
            )
        )
    return merged


def analyse(query: str, contexts: Sequence[str], response: str, embedder: Embedder) -> Analysis:
    """Checks every response sentence against the context and summarises the findings."""
    context = _Support()
    evidence: list[_Sentence] = []
    for doc in contexts:
        for text in sentences(doc):
            parsed = _Sentence.parse(text)
            context.add(parsed, grams=True)
            evidence.append(parsed)
    question = _Support()
    for text in sentences(query):
        question.add(_Sentence.parse(text), grams=False)

    claims = [c for c in (_Sentence.parse(text) for text in sentences(response)) if c.raw]
    checks = [_check(s, context, question) for s in claims]
    contradictions = [
        c
        for c in _slot_contradictions(query, contexts, claims, checks, context, question, embedder)
        if not _is_conversion(c, checks)
    ]
    sentence_texts = [e.text for e in evidence]
    evidence = _window(evidence)

    if checks and evidence:
        sims = embedder.bags([s.raw for s in claims]) @ embedder.bags([s.raw for s in evidence]).T
        best = sims.argmax(axis=1)
        for i, check in enumerate(checks):
            check.similarity = float(sims[i, best[i]])
            flipped = (
                _contradicts(claims[i], check.negated, evidence[best[i]], embedder)
                if not check.abstains
                and _same_claim(claims[i], evidence[best[i]], check.similarity)
                else frozenset()
            )
            check.negation_mismatch = bool(flipped)
            if flipped and _restates(claims[i], evidence[best[i]], flipped):
                contradictions.append(
                    contradiction.negation(claims[i].text, evidence[best[i]].text, flipped)
                )
            closest = evidence[best[i]]
            check.evidence = closest.text
            number_conflict = (
                check.unsupported_numbers
                and check.similarity >= _SAME_TOPIC
                and any(v is not None for v in closest.numbers)
            )
            check.conflicts = int(bool(number_conflict)) + int(check.negation_mismatch)
        missing = sorted({w for c in checks for w in c.unsupported if w.isalpha()})
        if missing:
            vocabulary = sorted({*context.originals.values(), *question.originals.values()})
            closeness = embedder.nearest_similarity(missing, vocabulary)
            names = {fold(t) for c in checks for t in c.unsupported_entities}
            close = {
                w
                for w, s in zip(missing, closeness, strict=True)
                if s >= (_NAME_MATCH if w in names else _SOFT_MATCH)
            }
            for check in checks:
                far = [w for w in check.unsupported if w.isalpha() and w not in close]
                check.far = [*far, *check.unsupported_numbers]
                check.specific = {w: embedder.specificity(w) for w in far}
                extra = len(check.unsupported_numbers) + int(check.negation_mismatch)
                check.soft_unsupported = len(far) + extra
                check.rare_unsupported = sum(1 for w in far if embedder.rare(w)) + extra
                check.specific_unsupported = (
                    sum(1.0 if w in names else embedder.specificity(w) for w in far) + extra
                )
        else:
            for check in checks:
                check.far = list(check.unsupported_numbers)
                extra = len(check.unsupported_numbers) + int(check.negation_mismatch)
                check.soft_unsupported = check.rare_unsupported = extra
                check.specific_unsupported = float(extra)
    else:
        for check in checks:
            check.far = list(check.unsupported)
            check.soft_unsupported = check.rare_unsupported = len(check.unsupported)
            check.specific_unsupported = float(len(check.unsupported))
    contradictions += _substitutions(query, claims, checks, sentence_texts, contradictions)
    strong = [c for c in contradictions if c.decisive]
    invented = [c for c in contradictions if c.invented and c.kind != "negation"]
    summary = np.concatenate(
        [_summarise(checks), [len(contradictions), len(strong), len(invented)]]
    )
    return Analysis(features=summary, sentences=checks, contradictions=contradictions)


# Retrieved chunks recur across requests (the same documents answer many questions), and
# parsing a context sentence for slots is a third of the detector's time on a new context.
# `Parsed` is never mutated after parsing, so cached values can be shared.
_parse_context = lru_cache(maxsize=4096)(slots.parse)


def _substitutions(
    query: str,
    claims: list[_Sentence],
    checks: list[SentenceCheck],
    texts: list[str],
    found: list[Contradiction],
) -> list[Contradiction]:
    """Opposites, co-hyponyms and units swapped, or the polarity flipped in other words, in
    claims that restate a context sentence; a claim whose slots already contradict the
    context is not read twice."""
    done = {c.claim for c in found if c.decisive}
    out = []
    for claim, check in zip(claims, checks, strict=True):
        if check.abstains or claim.text in done:
            continue
        swapped = substitution.find(claim.text, texts, query)
        flipped = None if swapped else substitution.polarity(claim.text, texts)
        out.extend(swapped if flipped is None else [*swapped, flipped])
    return out


def _is_conversion(found: Contradiction, checks: list[SentenceCheck]) -> bool:
    """Whether a contradicted number is one the claim gives as a unit conversion."""
    if found.kind != "number":
        return False
    said = found.said.split()[0] if found.said else ""
    return any(c.text == found.claim and said in c.converted for c in checks)


def _slot_contradictions(
    query: str,
    contexts: Sequence[str],
    claims: list[_Sentence],
    checks: list[SentenceCheck],
    context: _Support,
    question: _Support,
    embedder: Embedder,
) -> list[contradiction.Contradiction]:
    """Number, date and name slots of claims that the context fills with another value."""
    suspects = [
        c.text
        for c, check in zip(claims, checks, strict=True)
        if not check.abstains
        and (
            check.numbers
            or any(t[0].isupper() for t in c.raw[1:])
            # A bare answer ("Lyon.") may be nothing but a name.
            or (len(c.raw) <= contradiction.BARE_ANSWER and c.raw[0][0].isupper())
        )
    ]
    if not suspects:
        return []
    parsed = [_parse_context(text) for doc in contexts for text in sentences(doc)]
    known = context.words | question.words
    asked = slots.parse(query)

    def unit_similarity(a: str, b: str) -> float:
        vectors = embedder.word_vectors([a, b])
        return float(vectors[0] @ vectors[1])

    alone = len(claims) == 1
    return [
        c
        for text in suspects
        for c in contradiction.find(text, parsed, known, asked, unit_similarity, alone)
    ]


# Clause boundaries inside a sentence: punctuation and coordinating words.
_CLAUSE = re.compile(r"[,;:()]\s*|\s+(?:and|but|while|whereas|which|where)\s+", re.IGNORECASE)
# Advice, hedges and attributions ("it may be best to consult a professional", "according
# to ...") are not facts about the context: answers add them freely.
_ADVICE = frozenset(
    "may might could should recommend recommended recommends consult seek advisable suggest "
    "suggested best according important remember note try ensure".split()
)
_CLAUSE_WEIGHT = 1.5
_CLAUSE_SUPPORTED = 1


def unsupported_clauses(check: SentenceCheck) -> list[str]:
    """Clauses of a sentence whose content words (at least `_CLAUSE_WORDS`) the context lacks
    entirely, not even as a close word: an invented claim ("..., and the library has a
    rooftop garden")."""
    if check.abstains or not check.far:
        return []
    far = set(check.far)
    out = []
    for clause in _CLAUSE.split(check.text):
        if _ADVICE & {fold(t) for t in tokens(clause)}:
            continue
        supported = 0
        weight = 0.0
        for token in tokens(clause):
            form, value = _normalise(token)
            if value is None and (
                not form.isalpha() or len(form) < 2 or form in STOPWORDS or form in DISCOURSE
            ):
                continue
            if value is not None and token in far:
                weight += 1.0
            elif form in far:
                weight += check.specific.get(form, 1.0)
            else:
                supported += 1
        if weight >= _CLAUSE_WEIGHT and supported <= _CLAUSE_SUPPORTED:
            out.append(clause.strip())
    return out


def _summarise(checks: list[SentenceCheck]) -> np.ndarray:
    claims = [c for c in checks if not c.abstains]
    content = sum(c.content for c in claims)
    unsupported = sum(len(c.unsupported) for c in claims)
    unsupported_context = sum(c.unsupported_context for c in claims)
    numbers = sum(c.numbers for c in claims)
    bad_numbers = sum(len(c.unsupported_numbers) for c in claims)
    bigrams = sum(c.bigrams for c in claims)
    sims = [c.similarity for c in claims if c.content]
    values = (
        unsupported_context / content if content else 0.0,
        unsupported / content if content else 0.0,
        np.log1p(unsupported),
        max((c.unsupported_share for c in claims), default=0.0),
        np.log1p(bad_numbers),
        bad_numbers / numbers if numbers else 0.0,
        np.log1p(sum(len(c.unsupported_entities) for c in claims)),
        sum(c.novel_bigrams for c in claims) / bigrams if bigrams else 0.0,
        min(sims, default=1.0),
        float(np.mean(sims)) if sims else 1.0,
        np.log1p(sum(c.soft_unsupported for c in claims)),
        float(sum(c.negation_mismatch for c in claims)),
        1.0 if len(claims) < len(checks) else 0.0,
        np.log1p(content),
        np.log1p(sum(c.rare_unsupported for c in claims)),
        np.log1p(sum(c.specific_unsupported for c in claims)),
        float(sum(c.conflicts for c in claims)),
        max((c.specific_unsupported for c in claims), default=0.0),
        max((c.soft_unsupported / c.content for c in claims if c.content), default=0.0),
        sum(c.specific_unsupported for c in claims) / content if content else 0.0,
        min((c.similarity for c in claims if c.specific_unsupported >= 1), default=1.0),
    )
    return np.asarray(values, dtype=np.float64)
