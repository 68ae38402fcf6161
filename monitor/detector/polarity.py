"""Polarity: which words a negation applies to, and whether a claim and its evidence say
the same thing with opposite polarity ("Dogs may walk the trails" against "Dogs are not
permitted on the trails")."""

from __future__ import annotations

from monitor.detector.embedding import Embedder
from monitor.detector.sentences import Sentence
from monitor.detector.text import (
    DISCOURSE,
    NEGATIONS,
    NEGATIVE_POLARITY,
    STOPWORDS,
    is_negation,
    stem,
    undouble,
)

# How many words after "not"/"no"/"never" may stand before the word it negates.
_NEGATION_SCOPE = 3
# A negation flip only counts against a claim this close to its evidence sentence.
_SAME_CLAIM = 0.8
_SHARED_WORDS = 0.6
# A word this close to a negated word (word vectors) states the same thing ("permitted").
_SYNONYM = 0.7
# A polarity flip is a contradiction when the claim shares this much with its evidence,
# and says at least this many content words besides the flipped one.
_RESTATES = 0.8
_RESTATED_WORDS = 2


def negation_targets(words: list[str]) -> set[int]:
    """Positions of the words a negation applies to: the first content word within
    `_NEGATION_SCOPE` words after it ("does not *lock*", "no *refund*", "never *sailed*")."""
    out = set()
    for i, word in enumerate(words):
        if is_negation(word):
            for j in range(i + 1, min(len(words), i + 1 + _NEGATION_SCOPE)):
                nxt = words[j]
                if nxt[0] > "\u2fff":
                    # Chinese: a one-character word is a function word, and a coverb's
                    # object stands before the verb (不对读者开放): every content word in
                    # scope is negated.
                    if len(nxt) > 1 and nxt.isalpha():
                        out.add(j)
                    continue
                if nxt not in STOPWORDS and nxt not in DISCOURSE and nxt.isalpha():
                    out.add(j)
                    break
    return out


def negated_words(sentence: Sentence) -> frozenset[str]:
    """The words a negation applies to."""
    words = sentence.folded
    return frozenset(words[j] for j in negation_targets(words))


def contradicts(
    claim: Sentence, negated: frozenset[str], evidence: Sentence, embedder: Embedder
) -> frozenset[str]:
    """Stems one side negates and the other states (itself or a close synonym, "allowed" /
    "permitted") with no negation anywhere in it."""
    # A word a sentence both negates and states ("owed to you ... why it is not owed") is
    # not denied by it.
    denied = negated_words(evidence) - affirmed(evidence)
    negated = negated - affirmed(claim)
    if negated and not denied and not has_negation(evidence):
        return stated(negated, evidence, embedder)
    if denied and not negated and not has_negation(claim):
        return stated(denied, claim, embedder)
    return frozenset()


def affirmed(sentence: Sentence) -> frozenset[str]:
    """Words that occur in the sentence neither as a negation nor negated by one."""
    words = sentence.folded
    negated = negation_targets(words)
    return frozenset(
        word for j, word in enumerate(words) if j not in negated and not is_negation(word)
    )


def loose(word: str) -> str:
    """A stem without a plural "s" or the doubled consonant of an ending ("swimming" and
    "swim" meet)."""
    s = stem(word)
    return undouble(s[:-1] if len(s) > 3 and s.endswith("s") else s)


def stated(negated: frozenset[str], sentence: Sentence, embedder: Embedder) -> frozenset[str]:
    """The negated stems that `sentence` states, and the words of it that state them."""
    words = [w for w in sentence.folded if w.isalpha() and w not in STOPWORDS]
    roots = {loose(w): w for w in words}
    out = {roots[loose(n)] for n in negated if loose(n) in roots}
    if out or not words:
        return frozenset(out | {n for n in negated if loose(n) in roots})
    sims = embedder.word_vectors(sorted(negated)) @ embedder.word_vectors(words).T
    close = sims.max(axis=0) >= _SYNONYM
    hits = {w for w, c in zip(words, close, strict=True) if c}
    if not hits:
        return frozenset()
    return frozenset(hits | negated)


def same_claim(claim: Sentence, evidence: Sentence, similarity: float) -> bool:
    """Whether the evidence sentence states the claim's content (similar, or most words shared)."""
    if similarity >= _SAME_CLAIM:
        return True
    mine = {loose(w) for w in claim.folded if w not in STOPWORDS and w not in DISCOURSE}
    if not mine:
        return False
    theirs = {loose(w) for w in evidence.folded}
    return len(mine & theirs) / len(mine) >= _SHARED_WORDS


def restates(claim: Sentence, evidence: Sentence, flipped: frozenset[str]) -> bool:
    """Whether the claim says what the evidence sentence says but for its polarity: so close
    that a flipped negation is a contradiction rather than a different statement. Judged on
    shared words, not vector similarity, which is high for sentences on one topic."""
    ignore = NEGATIONS | {"yes"} | flipped
    mine = {
        loose(w)
        for w in claim.folded
        if w.isalpha() and w not in STOPWORDS and w not in DISCOURSE and w not in ignore
    }
    theirs = {loose(w) for w in evidence.folded}
    if len(mine) < _RESTATED_WORDS:
        # A two-word claim ("Uniforms are not required") restates its evidence when the
        # evidence has both words as written, the flipped one included.
        return bool(mine) and mine <= theirs and any(loose(w) in theirs for w in flipped)
    return len(mine & theirs) / len(mine) >= _RESTATES


def has_negation(sentence: Sentence) -> bool:
    return any(
        w in NEGATIONS or w in NEGATIVE_POLARITY or w.endswith("n't") for w in sentence.folded
    )
