"""Invented clauses: parts of a response sentence whose content words the context lacks
entirely (not even as a close word) and that no context sentence restates in other words.
Each takes a share of the groundedness score (`groundedness.clause_factor`)."""

from __future__ import annotations

import re

import numpy as np

from monitor.detector.cjk import is_chinese
from monitor.detector.embedding import Embedder
from monitor.detector.sentences import Sentence, SentenceCheck, normalise
from monitor.detector.text import DISCOURSE, STOPWORDS, fold, fold_all, is_negation, tokens

# Clause boundaries inside a sentence: punctuation and coordinating words.
# A comma inside a number ("240,148") splits nothing; full-width punctuation splits too.
_CLAUSE = re.compile(
    r"[;:()；：（）]\s*|[,，、](?!\d)\s*|\s+(?:and|but|while|whereas|which|where)\s+",
    re.IGNORECASE,
)
# Advice, hedges and attributions ("it may be best to consult a professional", "according
# to ...") are not facts about the context: answers add them freely.
_ADVICE = frozenset(
    "may might could should recommend recommended recommends consult seek advisable suggest "
    "suggested best according important remember note try ensure".split()
)
# An offer of help to the reader ("let me know if you need anything else") claims nothing.
_COURTESY = re.compile(
    r"\b(?:let me know|feel free|hope (?:this|that|it) helps|(?:happy|glad) to help|"
    r"(?:can|could|may) (?:i )?help you|anything else)\b",
    re.IGNORECASE,
)
_CLAUSE_WEIGHT = 1.5
_CLAUSE_SUPPORTED = 1
# A thinner invented clause: at least two words the context lacks entirely (weight 1.2 by
# specificity), as many as it has backed ones, and at most two backed ("and it also runs
# baking classes for children").
_THIN_WORDS = 2
_THIN_WEIGHT = 1.2
_THIN_SUPPORTED = 2
# A Chinese clause of this many missing words and none the context backs (one more for
# its one backed word) is invented however common its words and whatever characters they
# share with the context: a paraphrase keeps some words of what it restates.
_HAN_UNBACKED = 4
# A candidate clause this close (word-vector bags) to a context sentence restates it.
_RESTATED_CLAUSE = 0.55


def _clauses(check: SentenceCheck) -> list[tuple[str, float, int, int]]:
    """Each claim clause of a sentence with the specificity weight of its content words the
    context lacks entirely (not even as a close word), how many they are, and how many of
    its content words the context backs."""
    if check.abstains or not check.far:
        return []
    far = set(check.far)
    out = []
    for clause in _CLAUSE.split(check.text):
        words = tokens(clause)
        if _ADVICE.intersection(fold_all(clause, words)) or _COURTESY.search(clause):
            continue
        supported = missing = novel = 0
        weight = 0.0
        negated = False
        for token in words:
            form, value = normalise(token)
            negated = negated or is_negation(form)
            if value is None and (
                not form.isalpha() or len(form) < 2 or form in STOPWORDS or form in DISCOURSE
            ):
                continue
            if value is not None and token in far:
                weight += 1.0
                missing += 1
            elif form in far:
                weight += check.specific.get(form, 1.0)
                missing += 1
                novel += form in check.novel
            else:
                supported += 1
        if (
            (missing >= _THIN_WORDS and novel == missing and supported <= _CLAUSE_SUPPORTED)
            or (
                supported <= _CLAUSE_SUPPORTED
                and missing >= _HAN_UNBACKED + supported
                and is_chinese(clause)
            )
        ) and not negated:
            # A Chinese clause none of whose missing words shares a character with the
            # context: a topic of its own, however common its words (主要来自海外市场).
            # Not a negated one: it restates a fact by what no longer holds (不再需要人工看守
            # for 改为自动化运作), and the negation checks read its polarity.
            weight = max(weight, _CLAUSE_WEIGHT)
        out.append((clause.strip(), weight, missing, supported))
    return out


def find_invented(
    checks: list[SentenceCheck], evidence: np.ndarray | None, embedder: Embedder
) -> None:
    """Sets each check's invented clauses: the candidates no context sentence restates in
    other words (their word vectors as close as `_RESTATED_CLAUSE`). A clause whose words
    the context lacks but whose sense one of its sentences carries is a paraphrase; an
    invented one brings a topic of its own."""
    found = [(check, _candidate_clauses(check)) for check in checks]
    clauses = [clause for _, candidates in found for clause, _ in candidates]
    if not clauses:
        return
    close = [False] * len(clauses)
    if evidence is not None and len(evidence):
        vectors = embedder.bags([Sentence.parse(clause).raw for clause in clauses])
        close = ((vectors @ evidence.T).max(axis=1) >= _RESTATED_CLAUSE).tolist()
        # Chinese words' vectors are their characters' byte pieces: no measure of sense.
        close = [c and not is_chinese(clause) for c, clause in zip(close, clauses, strict=True)]
    near = iter(close)
    for check, candidates in found:
        # Other words can restate a sentence; a number or a name the context lacks cannot.
        lacking = {
            fold(w)
            for t in (*check.unsupported_numbers, *check.unsupported_entities)
            for w in tokens(t)
        }
        for clause, thin in candidates:
            restated = next(near) and not lacking & {fold(t) for t in tokens(clause)}
            if not restated:
                check.invented.append((clause, thin))


def _candidate_clauses(check: SentenceCheck) -> list[tuple[str, bool]]:
    """Clauses that may be invented, each with whether it is thin. An invented clause
    has specific content words (weight `_CLAUSE_WEIGHT`) the context lacks entirely, with at
    most one word backed ("..., and the library has a rooftop garden"); a thin one is not
    that, but at least half its content words, two or more, are missing entirely."""
    out = []
    for clause, weight, missing, supported in _clauses(check):
        if weight >= _CLAUSE_WEIGHT and supported <= _CLAUSE_SUPPORTED:
            out.append((clause, False))
        elif (
            missing >= _THIN_WORDS
            and weight >= _THIN_WEIGHT
            and missing >= supported
            and supported <= _THIN_SUPPORTED
        ):
            out.append((clause, True))
    return out
