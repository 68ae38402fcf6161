"""Static word and sentence embeddings from the `wordllama` package, loaded offline.

wordllama's model is a table of sub-word vectors; a text's embedding is the average of its
pieces' vectors. Here a word's pieces are looked up once and cached, and a sentence vector is
the sum of its words' piece vectors divided by their count — the same average, without
tokenizing every sentence again.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

_lock = threading.Lock()
_shared: Embedder | None = None
# Sub-word vocabularies are built from frequent strings first, so a word's id ranks how
# common it is: one piece with an id below ~8000 is a common word ("various", "important")
# that carries little of a claim; words split in several pieces are rare.
_FREQUENT_IDS = 1000
_VOCAB_IDS = 32000
_RARE = math.log(8000 / _FREQUENT_IDS) / math.log(_VOCAB_IDS / _FREQUENT_IDS)
_BOUNDARY = "\u2581"
_CACHE_LIMIT = 50_000
_BAG_CHUNK_WORDS = 4096


class Embedder:
    """Cached word vectors and unit-normalised sentence vectors."""

    def __init__(self, model: Any) -> None:
        self._table: np.ndarray = np.ascontiguousarray(model.embedding, dtype=np.float32)
        self._tokenizer = model.tokenizer
        self._vocab: dict[str, int] = self._tokenizer.get_vocab()
        self._words: dict[str, tuple[np.ndarray, int, float]] = {}
        self._cache_lock = threading.Lock()

    @property
    def dim(self) -> int:
        return int(self._table.shape[1])

    def _word(self, word: str) -> tuple[np.ndarray, int, float]:
        """(sum of the word's piece vectors, number of pieces, specificity 0..1)."""
        hit = self._words.get(word)
        if hit is not None:
            return hit
        single = self._vocab.get(_BOUNDARY + word)
        if single is not None:
            entry = (self._table[single], 1, _specificity(single))
        else:
            enc = self._tokenizer.encode(word, add_special_tokens=False)
            ids = [i for i, t in zip(enc.ids, enc.tokens, strict=True) if t != _BOUNDARY] or [0]
            spec = 1.0 if len(ids) > 1 else _specificity(ids[0])
            entry = (self._table[ids].sum(axis=0), len(ids), spec)
        with self._cache_lock:
            if len(self._words) >= _CACHE_LIMIT:
                self._words.clear()
            self._words[word] = entry
        return entry

    def word_vectors(self, words: Sequence[str]) -> np.ndarray:
        """Unit-normalised vectors of single words."""
        if not words:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = np.stack([self._word(w)[0] for w in words])
        unit: np.ndarray = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)
        return unit

    def rare(self, word: str) -> bool:
        return self._word(word)[2] >= _RARE

    def specificity(self, word: str) -> float:
        """0 for the most frequent words, rising with vocabulary rank; 1 for split words."""
        return self._word(word)[2]

    def bags(self, texts: Sequence[Sequence[str]]) -> np.ndarray:
        """Unit-normalised vectors of texts given as word lists (average of piece vectors)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, words in enumerate(texts):
            # Summed a chunk at a time: memory stays one chunk of word vectors, whatever
            # the text's length (one array of them all grew with every word).
            for start in range(0, len(words), _BAG_CHUNK_WORDS):
                chunk = words[start : start + _BAG_CHUNK_WORDS]
                out[i] += np.sum([self._word(w)[0] for w in chunk], axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        unit: np.ndarray = out / np.maximum(norms, 1e-9)
        return unit

    def nearest_similarity(self, words: Sequence[str], vocabulary: Sequence[str]) -> np.ndarray:
        """For each word, the cosine similarity of the closest vocabulary word (0 when empty)."""
        if not words or not vocabulary:
            return np.zeros(len(words))
        closest: np.ndarray = (self.word_vectors(words) @ self.word_vectors(vocabulary).T).max(
            axis=1
        )
        return closest


def _specificity(piece: int) -> float:
    if piece <= _FREQUENT_IDS:
        return 0.0
    return min(1.0, math.log(piece / _FREQUENT_IDS) / math.log(_VOCAB_IDS / _FREQUENT_IDS))


def shared_embedder() -> Embedder:
    """The process-wide embedder; loads the model once from the installed package's files."""
    global _shared
    if _shared is None:
        with _lock:
            if _shared is None:
                import wordllama
                from wordllama import WordLlama

                model = WordLlama.load(
                    cache_dir=Path(wordllama.__file__).parent, disable_download=True
                )
                _shared = Embedder(model)
    return _shared
