"""Groundedness: how much of a response the retrieved context supports (1 = fully)."""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detector.text import content_words, sentences


@dataclass(frozen=True, slots=True)
class GroundednessVerdict:
    score: float
    unsupported: tuple[str, ...]


def score_groundedness(query: str, contexts: list[str], response: str) -> GroundednessVerdict:
    """Fraction of the response's content words found in the context or the query.

    Sentences with less than half of their content words supported are reported as
    unsupported, so an operator sees what was not grounded.
    """
    support = set(content_words(query)) | {w for c in contexts for w in content_words(c)}
    total = hit = 0
    unsupported = []
    for sentence in sentences(response):
        tokens = content_words(sentence)
        found = sum(1 for t in tokens if t in support)
        total += len(tokens)
        hit += found
        if tokens and found / len(tokens) < 0.5:
            unsupported.append(sentence)
    score = 1.0 if total == 0 else hit / total
    return GroundednessVerdict(score=score, unsupported=tuple(unsupported))
