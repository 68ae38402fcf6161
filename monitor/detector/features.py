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

import numpy as np

from monitor.detector import cjk, contradiction, slots, substitution
from monitor.detector.cjk import is_han
from monitor.detector.clauses import find_invented
from monitor.detector.contradiction import Contradiction
from monitor.detector.embedding import Embedder
from monitor.detector.polarity import (
    HanClause,
    contradicts,
    han_evidence,
    han_flip,
    may_negate,
    negated_words,
    restates,
    same_claim,
)
from monitor.detector.sentences import Sentence, SentenceCheck, Support
from monitor.detector.summary import summarise
from monitor.detector.text import (
    DISCOURSE,
    REFERENCES,
    STOPWORDS,
    canonical_number,
    fold,
    number_value,
    sentences,
    stem,
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
# A claim this close to its evidence sentence talks about the same thing, so a number there
# that differs from the claim's is a contradiction rather than extra detail.
_SAME_TOPIC = 0.6
_MAX_CONTEXT_SENTENCES = 400
# Response sentences compared with every context sentence (slot contradictions,
# substitutions, negation flips, Chinese kinds), and their characters: each such claim costs
# as much as the context, so a response's claims are read in order while they are at most
# this many and their characters add up to at most this; a sentence that does not fit is
# not read by these checks (its words are still checked against the context). An answer of
# sixty sentences, a thousand words or so, fits.
MAX_COMPARED_CLAIMS = 64
MAX_COMPARED_CHARS = 8_000
# The longest evidence sentence a claim's negation is read against: each compared claim
# reads its closest one whole, so a context of one sentence without a stop would cost
# itself once per claim. Longer than the 400 merged windows of a context at its limit.
MAX_EVIDENCE_CHARS = 16_000
# Distinct words missing from the context that may be excused as a paraphrase (the closest
# context or question word, by vector): each is compared with the whole vocabulary of the
# context, so past this many (in sorted order) a missing word counts as missing.
MAX_PARAPHRASED_WORDS = 512
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


@dataclass(slots=True)
class Analysis:
    features: np.ndarray
    sentences: list[SentenceCheck]
    # Claims that contradict the same slot (number, date, name) or the polarity of the context.
    contradictions: list[Contradiction] = field(default_factory=list)


def _check(sentence: Sentence, context: Support, question: Support) -> SentenceCheck:
    unsupported: list[str] = []
    unsupported_context = numbers = content = 0
    bad_numbers: list[str] = []
    bad_entities: list[str] = []
    converted: list[str] = []
    seq: list[str] = []
    # The sentence's Chinese names, tagged once for all its words (a sentence may be long).
    han_names: frozenset[str] | None = None
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
                if cjk.is_pair_word(token) and _counts_backed(
                    sentence.folded[i + 1 : i + 3], context
                ):
                    # A lone 两 counting what the context names is as often "both" as two
                    # (两站 for the two stations it names, 两条车道 for its lanes).
                    continue
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
        if context.has_word(word) or context.has_name_glued(word):
            continue
        day = cjk.weekday(word) if word[0] > "\u2fff" else None
        if day is not None and canonical_number(day) in context.numbers:
            # 星期一 for 週一: the week's words are many, the day is the fact.
            continue
        unsupported_context += 1
        if question.has_word(word):
            continue
        unsupported.append(word)
        # A capitalised word is a name unless it only starts a sentence; in an answer of a
        # few words ("Scottish.", "Lucy Liu") the first word is the answer itself.
        if token[0].isupper() and (i > 0 or len(sentence.raw) <= _SHORT_ANSWER):
            bad_entities.append(token)
        elif token[0] > "\u2fff" and cjk.is_chinese(token):
            if han_names is None:
                han_names = cjk.names(sentence.text)
            if word in han_names:
                # Chinese has no capitals: the segmenter's tag says what is a name.
                bad_entities.append(token)
    negated = negated_words(sentence)
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
        novel_bigrams=sum(
            1 for b in pairs if b not in context.bigrams and not _both_backed(b, context)
        ),
        converted=converted,
    )


def _counts_backed(after: list[str], context: Support) -> bool:
    """Whether the words after a numeral name what the context names: its measure word
    (站) or the noun after it (车道), not a measure (两年 is an amount)."""
    if not after or cjk.is_step_unit(after[0]):
        return False
    first = after[0]
    if len(first) == 1 and is_han(first):
        if any(first in pair for pair in context.han_pairs):
            return True
        return len(after) > 1 and len(after[1]) > 1 and context.has_word(after[1])
    return len(first) > 1 and context.has_word(first)


def _both_backed(bigram: tuple[str, str], context: Support) -> bool:
    """Whether two neighbouring Chinese words (or a number next to one) are both in the
    context: Chinese word order moves freely with topic and comment (这家店的面包七欧元 /
    面包每个售价七欧元), and the segmenter cuts the same characters otherwise by their
    neighbours, so a pair of backed words read as new would count a paraphrase's order."""
    if not context.han_pairs or not any(is_han(w[0]) for w in bigram):
        return False
    return all(
        w in context.numbers if w[0].isdigit() else is_han(w[0]) and context.has_word(w)
        for w in bigram
    )


def _novel(word: str, han_chars: set[str]) -> bool:
    """Whether a Chinese word has no character the context writes: a paraphrase in Chinese
    mostly keeps a character of the word it restates (开封 / 开瓶, 用完 / 喝完), a word of a
    topic the context lacks keeps none, however common it is."""
    return bool(han_chars) and word[0] > "\u2fff" and not any(c in han_chars for c in word)


def _unit_after(sentence: Sentence, i: int) -> str | None:
    """The unit of conversion written within two words after number `i` ("58 degrees
    Fahrenheit", "400°F", "12 miles")."""
    for word in sentence.folded[i + 1 : i + 3]:
        unit = _CONVERSION_UNITS.get(word)
        if unit is not None:
            return unit
    return None


def _converted(sentence: Sentence, i: int, context: Support) -> bool:
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


def _window(parsed: list[Sentence]) -> list[Sentence]:
    """Very long contexts: merge neighbouring sentences so at most a fixed number remain."""
    if len(parsed) <= _MAX_CONTEXT_SENTENCES:
        return parsed
    step = len(parsed) / _MAX_CONTEXT_SENTENCES
    merged = []
    for i in range(_MAX_CONTEXT_SENTENCES):
        part = parsed[int(i * step) : int((i + 1) * step)]
        merged.append(
            Sentence(
                " ".join(p.text for p in part),
                [t for p in part for t in p.raw],
                [w for p in part for w in p.folded],
                [n for p in part for n in p.numbers],
            )
        )
    return merged


def _compared(claims: list[Sentence]) -> set[int]:
    """The claims compared with every context sentence: in order, at most
    `MAX_COMPARED_CLAIMS` while their characters add up to at most `MAX_COMPARED_CHARS`
    (one that does not fit is skipped)."""
    left = MAX_COMPARED_CHARS
    out: set[int] = set()
    for i, claim in enumerate(claims):
        if len(out) == MAX_COMPARED_CLAIMS:
            break
        if len(claim.text) <= left:
            left -= len(claim.text)
            out.add(i)
    return out


def analyse(query: str, contexts: Sequence[str], response: str, embedder: Embedder) -> Analysis:
    """Checks every response sentence against the context and summarises the findings."""
    context = Support()
    evidence: list[Sentence] = []
    for doc in contexts:
        for text in sentences(doc):
            parsed = Sentence.parse(text)
            context.add(parsed, grams=True)
            evidence.append(parsed)
    question = Support()
    for text in sentences(query):
        question.add(Sentence.parse(text), grams=False)

    claims = [c for c in (Sentence.parse(text) for text in sentences(response)) if c.raw]
    checks = [_check(s, context, question) for s in claims]
    compared = _compared(claims)
    claims_read = [claims[i] for i in compared]
    checks_read = [checks[i] for i in compared]
    contradictions = [
        c
        for c in _slot_contradictions(
            query, contexts, claims_read, checks_read, context, question, embedder
        )
        if not _is_conversion(c, checks)
    ]
    sentence_texts = [e.text for e in evidence]
    evidence = _window(evidence)
    evidence_vectors: np.ndarray | None = None

    if checks and evidence:
        # One call for both sides' sentence vectors (each row is computed alone): the
        # numpy calls' overhead is most of its time at these sizes.
        vectors = embedder.bags([s.raw for s in (*claims, *evidence)])
        evidence_vectors = vectors[len(claims) :]
        sims = vectors[: len(claims)] @ evidence_vectors.T
        best = sims.argmax(axis=1).tolist()  # Python ints: cheaper to index with
        for i, check in enumerate(checks):
            check.similarity = float(sims[i, best[i]])
            flipped = (
                contradicts(claims[i], check.negated, evidence[best[i]], embedder)
                if i in compared
                and len(evidence[best[i]].text) <= MAX_EVIDENCE_CHARS
                and not check.abstains
                and same_claim(claims[i], evidence[best[i]], check.similarity)
                else frozenset()
            )
            check.negation_mismatch = bool(flipped)
            if flipped and restates(claims[i], evidence[best[i]], flipped):
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
            paraphrased = missing[:MAX_PARAPHRASED_WORDS]
            closeness = embedder.nearest_similarity(paraphrased, vocabulary)
            names = {fold(t) for c in checks for t in c.unsupported_entities}
            # A Chinese word's vector is mostly its characters' byte pieces (the vocabulary
            # has few Chinese words): its closeness says nothing, so none is a paraphrase.
            han_chars = {c for pair in context.han_pairs for c in pair}
            close = {
                w
                for w, s in zip(paraphrased, closeness, strict=True)
                if s >= (_NAME_MATCH if w in names else _SOFT_MATCH)
                and (w[0] <= "\u2fff" or not cjk.is_chinese(w))
            }
            for check in checks:
                far = [w for w in check.unsupported if w.isalpha() and w not in close]
                check.far = [*far, *check.unsupported_numbers]
                check.specific = {w: embedder.specificity(w) for w in far}
                check.novel = {w for w in far if _novel(w, han_chars)}
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
    contradictions += _han_numbers(claims, checks, contradictions)
    contradictions += _han_flips(claims_read, checks_read, evidence, contradictions)
    contradictions += _han_kinds(claims_read, checks_read, evidence)
    find_invented(checks, evidence_vectors, embedder)
    contradictions += _substitutions(
        query, claims_read, checks_read, sentence_texts, contradictions
    )
    strong = [c for c in contradictions if c.decisive]
    invented = [c for c in contradictions if c.invented and c.kind != "negation"]
    summary = np.concatenate([summarise(checks), [len(contradictions), len(strong), len(invented)]])
    return Analysis(features=summary, sentences=checks, contradictions=contradictions)


def _han_numbers(
    claims: list[Sentence], checks: list[SentenceCheck], found: list[Contradiction]
) -> list[Contradiction]:
    """Chinese claims stating a number (a quantity, a year, a day) that neither the context
    nor the question writes in any form: the numerals are read by their grammar and the
    context's generously (`cjk.written_values`), so what is left is a value of the
    answer's own. Not a lone 两 before a measure word ("both", "a couple": 两站 for the
    two stations a context names)."""
    done = {c.claim for c in found if c.decisive or c.invented}
    out = []
    for claim, check in zip(claims, checks, strict=True):
        if check.abstains or claim.text in done or not cjk.is_chinese(claim.text):
            continue
        invented = [n for n in check.unsupported_numbers if not cjk.is_pair_word(n)]
        if invented:
            out.append(
                Contradiction("number", invented[0], check.evidence, claim.text, decisive=False)
            )
    return out


def _han_flips(
    claims: list[Sentence],
    checks: list[SentenceCheck],
    evidence: list[Sentence],
    found: list[Contradiction],
) -> list[Contradiction]:
    """Chinese claims whose polarity differs from the context clause restating them
    (`polarity.han_flip`): read clause by clause, since a Chinese sentence strings several
    facts with commas and the word vectors cannot tell a restatement from a neighbour."""
    done = {c.claim for c in found if c.decisive}
    chinese = [e for e in evidence if cjk.is_chinese(e.text)]
    out: list[Contradiction] = []
    if not chinese or not any(may_negate(s) for s in (*claims, *chinese)):
        return out
    clauses: list[HanClause] | None = None
    for claim, check in zip(claims, checks, strict=True):
        if check.abstains or claim.text in done or not cjk.is_chinese(claim.text):
            continue
        if clauses is None:
            clauses = han_evidence(chinese)
        flip = han_flip(claim, clauses)
        if flip is not None:
            check.negation_mismatch = True
            out.append(contradiction.negation(claim.text, flip[0], flip[1]))
    return out


def _han_kinds(
    claims: list[Sentence], checks: list[SentenceCheck], evidence: list[Sentence]
) -> list[Contradiction]:
    """Chinese nouns swapped for another of their kind: a claim noun the context lacks,
    standing next to the same word as a context noun of its length that ends in the same
    character (a Chinese compound's head is its last character: 体育馆 and 文化馆 are both
    halls, 南部 and 西部 both parts)."""
    out = []
    chinese = [e for e in evidence if cjk.is_chinese(e.text)]
    for claim, check in zip(claims, checks, strict=True):
        if check.abstains or not chinese or not cjk.is_chinese(claim.text):
            continue
        nouns = cjk.nouns(claim.text)
        far = {w for w in check.far if len(w) > 1 and w[0] > "\u2fff" and w in nouns}
        if not far:
            continue
        found = _han_kind(claim.folded, far, chinese)
        if found is not None:
            out.append(Contradiction("kind", found[0], found[1], claim.text))
    return out


def _han_kind(words: list[str], far: set[str], evidence: list[Sentence]) -> tuple[str, str] | None:
    nouns: dict[int, frozenset[str]] = {}
    for i, word in enumerate(words):
        if word not in far:
            continue
        before = words[i - 1] if i > 0 else None
        after = words[i + 1] if i + 1 < len(words) else None
        for k, sentence in enumerate(evidence):
            theirs = sentence.folded
            for j, other in enumerate(theirs):
                if (
                    len(other) != len(word)
                    or other == word
                    or other[-1] != word[-1]
                    or other in words
                    or cjk.function_morphemes(word, other)
                ):
                    continue
                if k not in nouns:
                    nouns[k] = cjk.nouns(sentence.text)
                if other not in nouns[k]:
                    continue
                if (before is not None and j > 0 and theirs[j - 1] == before) or (
                    after is not None and j + 1 < len(theirs) and theirs[j + 1] == after
                ):
                    return word, other
    return None


def _substitutions(
    query: str,
    claims: list[Sentence],
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
    claims: list[Sentence],
    checks: list[SentenceCheck],
    context: Support,
    question: Support,
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
    parsed = [slots.parse_sentence(text) for doc in contexts for text in sentences(doc)]
    known = context.words | question.words
    asked = slots.parse(query)

    # The claims compare the same few units with every context sentence's: each pair once,
    # from every unit's vector computed in one call when the first pair is asked for (a
    # row is computed alone, so a pair's vectors are those of the pair on its own).
    similarities: dict[tuple[str, str], float] = {}
    vectors: dict[str, np.ndarray] = {}

    def unit_similarity(a: str, b: str) -> float:
        found = similarities.get((a, b))
        if found is None:
            if a not in vectors or b not in vectors:
                named = [*parsed, *map(slots.parse_sentence, suspects)]
                units = sorted(
                    {a, b, *(o.unit for p in named for o in p.slots if o.kind == "number")} - {""}
                )
                vectors.update(zip(units, embedder.word_vectors(units), strict=True))
            found = similarities[(a, b)] = float(vectors[a] @ vectors[b])
        return found

    alone = len(claims) == 1
    return [
        c
        for text in suspects
        for c in contradiction.find(text, parsed, known, asked, unit_similarity, alone)
    ]
