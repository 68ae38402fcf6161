"""A sentence in the forms the detector's checks compare, what a body of evidence
contains, and the verdict on one response sentence (`SentenceCheck`)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from monitor.detector.cjk import (
    is_chinese,
    names,
    numeral_start,
    pairs,
    word_pairs,
    written_values,
)
from monitor.detector.text import (
    STOPWORDS,
    TOKEN_CACHE,
    canonical,
    canonical_number,
    fold,
    number_value,
    stem,
    strip_list_marker,
    tokens,
)
from monitor.shared.recurring import recurring_cache

PREFIX = 6


@recurring_cache(TOKEN_CACHE)
def normalise(token: str) -> tuple[str, str | None]:
    """(folded and unit-canonical form, numeric value for digit tokens else None)."""
    if token[0].isdigit() or token[0] == "$" or numeral_start(token):
        # Past the cache's hit path: numbers (ids, amounts) are mostly seen once, and kept
        # in the word caches too they would grow them long after the words they hold.
        return canonical(fold.__wrapped__(token)), number_value.__wrapped__(token)
    return canonical(fold(token)), None


@dataclass(slots=True)
class Sentence:
    """A sentence's tokens in the forms the checks compare."""

    text: str
    raw: list[str]
    folded: list[str]
    numbers: list[str | None]

    @classmethod
    def parse(cls, text: str) -> Sentence:
        raw = tokens(strip_list_marker(text))
        forms = list(map(normalise, raw))
        return cls(text, raw, [f for f, _ in forms], [n for _, n in forms])


@dataclass(slots=True)
class Support:
    """What the evidence contains."""

    words: set[str] = field(default_factory=set)
    stems: set[str] = field(default_factory=set)
    prefixes: set[str] = field(default_factory=set)
    numbers: set[str] = field(default_factory=set)
    bigrams: set[tuple[str, str]] = field(default_factory=set)
    originals: dict[str, str] = field(default_factory=dict)
    # Pairs of Han characters next to each other (`cjk.pairs`): a Chinese word is in the
    # evidence when its characters are, however the segmenter cut either side.
    han_pairs: set[str] = field(default_factory=set)
    # The names the segmenter reads in the evidence's Chinese sentences (`cjk.names`).
    han_names: set[str] = field(default_factory=set)

    def add(self, sentence: Sentence, grams: bool) -> None:
        if sentence.text[0] > "\u2fff" or not sentence.text.isascii():
            if is_chinese(sentence.text):
                self.han_pairs.update(pairs(sentence.text))
                self.numbers.update(canonical_number(v) for v in written_values(sentence.text))
                self.han_names.update(names(sentence.text))
        seq: list[str] = []
        # Bound once: this loop runs for every token of every context sentence.
        numbers, words, stems, prefixes = self.numbers, self.words, self.stems, self.prefixes
        originals = self.originals
        for token, word, value in zip(sentence.raw, sentence.folded, sentence.numbers, strict=True):
            if value is not None:
                numbers.add(value)
                seq.append(value)
                continue
            spelled = number_value(word)
            if spelled is not None:
                numbers.add(spelled)
            if word in STOPWORDS:
                continue
            words.add(word)
            originals.setdefault(word, token)
            s = stem(word)
            stems.add(s)
            if len(word) > PREFIX:
                prefixes.add(word[:PREFIX])
            seq.append(s)
        if grams:
            self.bigrams.update(itertools.pairwise(seq))

    def has_name_glued(self, word: str) -> bool:
        """Whether a Chinese word is a name of the evidence with the character next to it
        glued on by the segmenter (温州人, 赵承宗带: a name's characters are rare words to the
        dictionary, so the character after or before one is often cut with it)."""
        return len(word) > 2 and (word[:-1] in self.han_names or word[1:] in self.han_names)

    def has_word(self, word: str) -> bool:
        return (
            word in self.words
            or stem(word) in self.stems
            or (len(word) > PREFIX and word[:PREFIX] in self.prefixes)
            or (
                len(word) > 1
                and word[0] > "\u2fff"
                and bool(self.han_pairs)
                and all(p in self.han_pairs for p in word_pairs(word))
            )
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
    # Those of them that are Chinese words none of whose characters the context writes.
    novel: set[str] = field(default_factory=set)
    # The context sentence closest to this one (what the second stage reads it against).
    evidence: str = ""
    # Its invented clauses (`clauses.find_invented`), each with whether it is thin.
    invented: list[tuple[str, bool]] = field(default_factory=list)

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
