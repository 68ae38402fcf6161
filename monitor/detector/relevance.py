"""Relevance of a response to its question, and of retrieved documents to the question."""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detector.text import content_words


@dataclass(frozen=True, slots=True)
class RetrievalVerdict:
    score: float
    per_document: tuple[float, ...]
    best_rank: int | None


def _overlap(question: str, text: str) -> float:
    asked = set(content_words(question))
    if not asked:
        return 1.0
    return len(asked & set(content_words(text))) / len(asked)


def score_relevance(query: str, response: str) -> float:
    """Share of the question's content words the response takes up (1 = on topic)."""
    return _overlap(query, response)


def score_retrieval(query: str, contexts: list[str]) -> RetrievalVerdict:
    """Per-document relevance to the question; the score is the best document's."""
    per_doc = tuple(_overlap(query, c) for c in contexts)
    if not per_doc:
        return RetrievalVerdict(score=0.0, per_document=(), best_rank=None)
    best = max(range(len(per_doc)), key=per_doc.__getitem__)
    return RetrievalVerdict(score=per_doc[best], per_document=per_doc, best_rank=best + 1)
