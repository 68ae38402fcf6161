"""A question's topic: which of a fixed set of named topics its words sit closest to, in the
word vectors the detector already uses (`embedding.py`).

A page that says where names the kind of question that carries a regression
(`monitor.alerts.attribution`); a topic is that kind. It is computed where the detector runs
(the worker processes: `monitor.processors.evaluation._task`) and travels with the record as
`metadata.topic`, so the event loop spends nothing on it.

Each topic of `TOPICS` is a name and a few anchor words. A question's content words (not
stopwords, at least three letters, at most `MAX_WORDS`) each score every topic with the
cosine of their vector to the topic's closest anchor; the question's topic is the topic of
the highest mean score, or none (`""`) when that mean is below `FLOOR` (a question whose
words are near no topic: names the vectors do not know, another language). The same
question always gets the same topic, in every process and replica, across restarts: a
topic named in a page means the same thing tomorrow. Topics are fixed, not learned from the
service's traffic; the anchors cover the questions RAG services commonly answer (customer
support, products, documentation, and the encyclopaedic kinds).

Cost (`bench/alert_attribution.py`, docs/quality.md): a question's words are looked
up once per process (a word's scores are cached from its second sighting, `_CACHE_LIMIT`
words), so a question of recurring words costs tens of microseconds.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import numpy as np

from monitor.detector.embedding import shared_embedder
from monitor.detector.text import DISCOURSE, STOPWORDS
from monitor.shared.recurring import RecurringCache

# Topic name -> anchor words. A topic's score for a word is its closest anchor's cosine.
TOPICS: dict[str, str] = {
    "payments": "payment refund price invoice bill charge money card",
    "orders": "order purchase cart checkout cancel",
    "shipping": "delivery shipping parcel package courier tracking",
    "account": "account login password email username profile",
    "warranty": "warranty repair broken defect replacement guarantee",
    "product": "product feature specification size color model",
    "subscription": "subscription plan pricing discount",
    "security": "security privacy data breach",
    "health": "health medicine doctor hospital disease symptom",
    "law": "law legal contract court regulation",
    "finance": "bank loan tax insurance investment",
    "software": "software code error bug install update",
    "hardware": "computer phone device battery screen",
    "travel": "travel flight hotel booking trip",
    "transport": "train bus car ferry transport",
    "food": "food recipe restaurant drink cooking",
    "history": "history founded century war ancient",
    "science": "science research physics chemistry biology",
    "geography": "city country river mountain located",
    "people": "person born died married actor",
    "business": "company business employees market industry",
    "arts": "music film art book painting museum",
    "sports": "sport team game player match",
    "education": "school university student course",
    "weather": "weather climate temperature rain",
    "energy": "energy electricity power fuel",
}
NAMES = tuple(TOPICS)
# The mean score below which a question has no topic.
FLOOR = 0.2
MAX_WORDS = 32
_CACHE_LIMIT = 20_000
_WORD = re.compile(r"[^\W\d_]+")

_lock = threading.Lock()
_anchors: tuple[np.ndarray, np.ndarray] | None = None
# A word's scores, kept from its second sighting: new words come with every request.
_scores: RecurringCache[str, np.ndarray | None] = RecurringCache(_CACHE_LIMIT)
_NOT_KEPT: Any = object()


def anchors() -> tuple[np.ndarray, np.ndarray]:
    """(unit anchor vectors, one row each; the topic index of each row), built once per
    process (the worker pool's fork server builds them for its workers)."""
    global _anchors
    if _anchors is None:
        with _lock:
            if _anchors is None:
                embedder = shared_embedder()
                rows, owners = [], []
                for index, words in enumerate(TOPICS.values()):
                    for word in words.split():
                        rows.append(embedder.vector(word))
                        owners.append(index)
                matrix = np.array(rows, dtype=np.float32)
                matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
                _anchors = (matrix, np.array(owners))
    return _anchors


def _word_scores(word: str) -> np.ndarray | None:
    """Every topic's score for `word` (its closest anchor's cosine); None for a word
    without a vector."""
    kept = _scores.entries.get(word, _NOT_KEPT)
    if kept is not _NOT_KEPT:
        return kept  # type: ignore[no-any-return]
    matrix, owners = anchors()
    vector = shared_embedder().vector(word)
    norm = float(np.linalg.norm(vector))
    scores: np.ndarray | None = None
    if norm > 0:
        cosines = matrix @ (vector / norm)
        scores = np.full(len(NAMES), -1.0, dtype=np.float32)
        np.maximum.at(scores, owners, cosines)
    _scores.offer(word, scores)
    return scores


def question_topic(question: str) -> str:
    """The topic of `question` (a name of `TOPICS`), or `""` when it has none."""
    words = [
        w
        for w in _WORD.findall(question.lower())
        if len(w) > 2 and w not in STOPWORDS and w not in DISCOURSE
    ][:MAX_WORDS]
    rows = [s for s in map(_word_scores, words) if s is not None]
    if not rows:
        return ""
    mean = np.add.reduce(rows) / len(rows) if len(rows) > 1 else rows[0]
    best = int(mean.argmax())
    return NAMES[best] if float(mean[best]) >= FLOOR else ""
