"""Polarity: which words a negation applies to, and whether a claim and its evidence say
the same thing with opposite polarity ("Dogs may walk the trails" against "Dogs are not
permitted on the trails")."""

from __future__ import annotations

from monitor.detector.cjk import function_words, segmenter
from monitor.detector.cjk import pairs as han_pairs
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


# One-character Chinese negators (不 "not", 没/沒 "has not", 未 "not yet"), for a word the
# segmenter glued one of them onto.
_HAN_NEGATORS = frozenset("不没沒未")
# Clause ends inside a Chinese sentence: a negator's scope ends there, and a clause is what
# restates a clause of the context.
_HAN_CLAUSE_ENDS = frozenset("，,；;：:、")
# Clauses of a Chinese claim read against the context's (its first ones): each is compared
# with every context clause, so a claim of thousands of commas costs in proportion to the
# context, not to it times the context. A sentence of facts has a few.
MAX_CLAIM_CLAUSES = 16


def _clause_spans(text: str) -> list[tuple[int, int]]:
    """Where a Chinese sentence's clauses lie, cut at its clause punctuation (plain scanning)."""
    out: list[tuple[int, int]] = []
    start = 0
    for i, char in enumerate(text):
        if char in _HAN_CLAUSE_ENDS:
            out.append((start, i))
            start = i + 1
    out.append((start, len(text)))
    return [(a, b) for a, b in out if text[a:b].strip()]


def han_clauses(sentence: Sentence) -> list[Sentence]:
    """A parsed Chinese sentence's clauses, each with the sentence's tokens that lie in it:
    punctuation ends every token, so a clause's tokens are those its own parse would give,
    without cutting its text again."""
    text = sentence.text
    spans = _clause_spans(text)
    parts: list[tuple[list[str], list[str], list[str | None]]] = [([], [], []) for _ in spans]
    at = k = 0
    for token, form, value in zip(sentence.raw, sentence.folded, sentence.numbers, strict=True):
        found = text.find(token, at)
        if found < 0:
            # A token not written as such (a list marker's rest): parse each clause alone.
            return [Sentence.parse(text[a:b]) for a, b in spans]
        at = found + len(token)
        while k + 1 < len(spans) and found >= spans[k][1]:
            k += 1
        raw, folded, numbers = parts[k]
        raw.append(token)
        folded.append(form)
        numbers.append(value)
    return [
        Sentence(text[a:b], raw, folded, numbers)
        for (a, b), (raw, folded, numbers) in zip(spans, parts, strict=True)
    ]


def _han_content(
    sentence: Sentence, grammar: frozenset[str]
) -> tuple[set[str], set[str], set[str]]:
    """A Chinese clause's content words (two characters or more, not of `grammar`, the words
    the segmenter reads as grammar in its sentence), the words a negator in it applies to
    (every content word after it: the verb of a Chinese clause comes last, after its
    coverb's object, 不对读者开放), and its numbers."""
    words: set[str] = set()
    negated: set[str] = set()
    numbers = {n for n in sentence.numbers if n is not None}
    after_negator = False
    bound = -1
    folded = sentence.folded
    for i, (word, value) in enumerate(zip(folded, sentence.numbers, strict=True)):
        if is_negation(word) or word in NEGATIVE_POLARITY or _glued_negator(word):
            following = folded[i + 1] if i + 1 < len(folded) else ""
            if _comparative(following):
                # 不得低于八成: a bound ("at least 80%"), which negates the comparison only,
                # not what is compared (工资 is stated, as 至少 states it).
                bound = i + 1
                continue
            # 没有比它更高: a comparison ("none higher than it") negates no statement.
            after_negator = after_negator or following != "比"
            continue
        if i == bound:
            negated.add(word)
        if (
            value is not None
            or len(word) < 2
            or not word.isalpha()
            or word in STOPWORDS
            or word in grammar
        ):
            continue
        words.add(word)
        # A measure word after a number is the quantity's: 不能超过80公里 bounds the
        # distance, it does not deny kilometres.
        if after_negator and not (i > 0 and sentence.numbers[i - 1] is not None):
            negated.add(word)
    return words, negated, numbers


def _comparative(word: str) -> bool:
    """A comparative verb made with the preposition 于 "than" (低于, 多于, 晚于)."""
    return len(word) == 2 and word[1] == "于" and word[0] > "\u2fff"


def may_negate(sentence: Sentence) -> bool:
    """Whether a sentence holds a word that may negate (a negator, a word of negative
    polarity, one starting with a negating character): where neither the answer nor its
    context has one, no clause of either can negate the other."""
    return any(
        is_negation(w) or w in NEGATIVE_POLARITY or w[:1] in _HAN_NEGATORS for w in sentence.folded
    )


def _glued_negator(word: str) -> bool:
    """A negator the segmenter cut together with the next character into a word its
    dictionary lacks (不派 of 不派发)."""
    return len(word) > 1 and word[0] in _HAN_NEGATORS and not segmenter().has_word(word)


def _states(word: str, words: set[str], pairs: set[str]) -> bool:
    return word in words or all(word[i : i + 2] in pairs for i in range(len(word) - 1))


HanClause = tuple[Sentence, set[str], tuple[set[str], set[str], set[str]]]


def han_evidence(evidence: list[Sentence]) -> list[HanClause]:
    """The clauses of Chinese evidence sentences, each with its character pairs and its
    content (`_han_content`), read once for all the claims."""
    out: list[HanClause] = []
    for sentence in evidence:
        grammar = function_words(sentence.text)
        out.extend(
            (clause, han_pairs(clause.text), _han_content(clause, grammar))
            for clause in han_clauses(sentence)
            if clause.raw
        )
    return out


def han_flip(claim: Sentence, parsed: list[HanClause]) -> tuple[str, frozenset[str]] | None:
    """A Chinese claim clause that negates what the evidence clause restating it states, or
    states what it negates: the evidence clause and the flipped words. The evidence clause is
    the one sharing most of the claim clause's content words and numbers, a number first
    where two share as much (`han_evidence`);
    the flip counts when the flipped words are stated on one side and negated on the other,
    and the clauses share something besides (a number, another word), or the flip is two
    words or more, or one of the clauses has at most two content words."""
    grammar = function_words(claim.text)
    for clause in han_clauses(claim)[:MAX_CLAIM_CLAUSES]:
        if not clause.raw:
            continue
        text = clause.text
        words, negated, numbers = _han_content(clause, grammar)
        if not words:
            continue
        best = None
        best_shared = 0
        best_numbers = 0
        for other, pairs, (o_words, o_negated, o_numbers) in parsed:
            same_numbers = len(numbers & o_numbers)
            shared = sum(_states(w, o_words, pairs) for w in words) + same_numbers
            # Of clauses sharing as much, the one sharing a number: a number (a day, an
            # amount) says which fact the clause restates more than a word does (星期二不营业
            # restates 周二公休, not 营业时间为每日…).
            if shared > best_shared or (shared == best_shared and same_numbers > best_numbers):
                best = (other, pairs, o_words, o_negated, o_numbers)
                best_shared, best_numbers = shared, same_numbers
        if best is None:
            continue
        other, pairs, o_words, o_negated, o_numbers = best
        if negated and not o_negated and not has_negation(other):
            flipped = {w for w in negated if _states(w, o_words, pairs)}
        elif o_negated and not negated and not has_negation(clause):
            clause_pairs = han_pairs(text)
            flipped = {w for w in o_negated if _states(w, words, clause_pairs)}
            best_shared = sum(_states(w, words, clause_pairs) for w in o_words)
            best_shared += len(numbers & o_numbers)
        else:
            continue
        # One flipped word alone counts where the clauses share more, or one of them says
        # little else (儿童半价, 不需要预约).
        short = min(len(words), len(o_words)) <= 2
        if flipped and (best_shared > len(flipped) or len(flipped) > 1 or short):
            return other.text, frozenset(flipped)
    return None
