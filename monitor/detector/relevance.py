"""Relevance of a response to its question, and of retrieved documents to the question.

Both blend two signals: the embedding similarity of the question to the text (wordllama
sentence vectors, offline) and the share of the question's content words the text takes up.
A document is judged by its best-matching sentence, so one relevant passage inside a long
document is not diluted by the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detector.embedding import shared_embedder
from monitor.detector.text import (
    DISCOURSE,
    STOPWORDS,
    TOKEN_CACHE,
    fold,
    once_per_record,
    sentences,
    stem,
    tokens,
)
from monitor.shared.recurring import recurring_cache

# Cosine similarities of unrelated texts sit around this floor, near-paraphrases near the top.
_COS_FLOOR = 0.0
_COS_TOP = 0.4
_EMBEDDING_WEIGHT = 0.7


@dataclass(frozen=True, slots=True)
class RetrievalVerdict:
    # Relevance of the best document (0..1).
    score: float
    # Relevance of each document, in retrieval order.
    per_document: tuple[float, ...]
    # 1-based rank of the most relevant document; None without documents.
    best_rank: int | None


@recurring_cache(TOKEN_CACHE)
def _content_stem(token: str) -> str | None:
    """The stem of a token that carries content (never empty); None for stopwords,
    discourse words and single letters."""
    if token[0].isdigit():  # a number: kept out of the word caches (`sentences.normalise`)
        word = fold.__wrapped__(token)
        return stem.__wrapped__(word) if len(word) > 1 else None
    word = fold(token)
    if word in STOPWORDS or word in DISCOURSE or len(word) <= 1:
        return None
    return stem(word)


def _stems(text: str) -> frozenset[str]:
    return once_per_record(
        "stems", text, lambda: frozenset(filter(None, map(_content_stem, tokens(text))))
    )


def _scale(cosine: float) -> float:
    return min(1.0, max(0.0, (cosine - _COS_FLOOR) / (_COS_TOP - _COS_FLOOR)))


def _blend(cosine: float, asked: frozenset[str], text: str) -> float:
    coverage = len(asked & _stems(text)) / len(asked) if asked else 1.0
    return _EMBEDDING_WEIGHT * _scale(cosine) + (1 - _EMBEDDING_WEIGHT) * coverage


def score_relevance(query: str, response: str) -> float:
    """How much the response is about what was asked (1 = on topic)."""
    if not response.strip():
        return 0.0
    if not query.strip():
        return 1.0
    embedder = shared_embedder()
    vectors = embedder.bags([tokens(query), tokens(response)])
    return round(_blend(float(vectors[0] @ vectors[1]), _stems(query), response), 4)


def score_retrieval(query: str, contexts: list[str]) -> RetrievalVerdict:
    """Per-document relevance to the question; the score is the best document's."""
    if not contexts:
        return RetrievalVerdict(score=0.0, per_document=(), best_rank=None)
    embedder = shared_embedder()
    asked = _stems(query)
    question = embedder.bags([tokens(query)])[0]
    split = [sentences(doc) or [doc] for doc in contexts]
    # Every document's sentence vectors in one call (each row is computed alone).
    vectors = embedder.bags([tokens(p) for parts in split for p in parts])
    per_doc = []
    start = 0
    for doc, parts in zip(contexts, split, strict=True):
        cosine = float((vectors[start : start + len(parts)] @ question).max())
        start += len(parts)
        per_doc.append(round(_blend(cosine, asked, doc), 4))
    best = max(range(len(per_doc)), key=per_doc.__getitem__)
    return RetrievalVerdict(score=per_doc[best], per_document=tuple(per_doc), best_rank=best + 1)
