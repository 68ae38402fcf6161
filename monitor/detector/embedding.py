"""Static word and sentence embeddings from the `wordllama` package, loaded offline.

wordllama's model is a table of sub-word vectors; a text's embedding is the average of its
pieces' vectors. Here a word's pieces are looked up once and cached, and a sentence vector is
the sum of its words' piece vectors divided by their count — the same average, without
tokenizing every sentence again.

The table is memory-mapped, read-only, from the package's weights file (float16, widened to
float32 a row at a time: the same numbers as widening the whole table): its pages are the
page cache's, shared by every process that maps them, and only the rows read are resident.
The tokenizer's vocabulary is looked up in the tokenizer itself, not copied into a dict.
Loaded in the worker pool's fork server before it forks workers, the tokenizer is shared too.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import struct
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from monitor.detector import cjk
from monitor.detector.text import once_per_record, shared_results
from monitor.shared.recurring import RecurringCache

_lock = threading.Lock()
_shared: Embedder | None = None
# Sub-word vocabularies are built from frequent strings first, so a word's id ranks how
# common it is: one piece with an id below ~8000 is a common word ("various", "important")
# that carries little of a claim; words split in several pieces are rare.
_FREQUENT_IDS = 1000
_VOCAB_IDS = 32000
_RARE = math.log(8000 / _FREQUENT_IDS) / math.log(_VOCAB_IDS / _FREQUENT_IDS)
_BOUNDARY = "\u2581"
# Words whose vectors a worker keeps (about 1.2 kB each): names and rare words keep coming
# with new requests, so a word is kept on its second sighting (`RecurringCache`) and the
# bound is what a worker's memory for them comes to; a text's own words fit many times
# over. Words with a digit (numbers, ids) are not kept.
_CACHE_LIMIT = 4_096
_DIGIT = re.compile(r"\d")
_BAG_CHUNK_WORDS = 4096
# One float32 -0.0, the padding of a block of word vectors (`Embedder._add_block_sums`).
_NEGATIVE_ZERO = struct.pack("<f", -0.0)


_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
_TENSOR = "embedding.weight"


class Embedder:
    """Cached word vectors and unit-normalised sentence vectors."""

    def __init__(self, table: np.ndarray, tokenizer: Any) -> None:
        """`table`: the sub-word vectors, one row per token id (any float dtype: rows
        are widened to float32 when read)."""
        # A plain array over the same memory: a memory map's rows pass through its Python
        # subclass hooks on every read.
        self._table = table.view(np.ndarray)
        self._tokenizer = tokenizer
        self._words: RecurringCache[str, tuple[bytes, int, float]] = RecurringCache(_CACHE_LIMIT)

    @property
    def dim(self) -> int:
        return int(self._table.shape[1])

    def _word(self, word: str) -> tuple[bytes, int, float]:
        """(sum of the word's piece vectors as float32 bytes, number of pieces,
        specificity 0..1). Bytes: many words' vectors join into one array in one copy."""
        hit = self._words.entries.get(word)
        if hit is not None:
            return hit
        single = self._tokenizer.token_to_id(_BOUNDARY + word)
        if single is not None:
            entry = (self._table[single].astype(np.float32).tobytes(), 1, _specificity(single))
        else:
            enc = self._tokenizer.encode(word, add_special_tokens=False)
            ids = [i for i, t in zip(enc.ids, enc.tokens, strict=True) if t != _BOUNDARY] or [0]
            spec = 1.0 if len(ids) > 1 else _specificity(ids[0])
            vector = self._table[ids].astype(np.float32).sum(axis=0)
            entry = (vector.tobytes(), len(ids), spec)
        if _DIGIT.search(word) is None:
            # Numbers and ids are mostly seen once: not even marked as seen.
            self._words.offer(word, entry)
        return entry

    def vector(self, word: str) -> np.ndarray:
        """The sum of a word's piece vectors (float32, read-only)."""
        return np.frombuffer(self._word(word)[0], dtype=np.float32)

    def _stacked(self, words: Iterable[str]) -> np.ndarray:
        """The words' summed piece vectors, one row each."""
        cached, word = self._words.entries, self._word
        joined = b"".join([(cached.get(w) or word(w))[0] for w in words])
        return np.frombuffer(joined, dtype=np.float32).reshape(-1, self.dim)

    def word_vectors(self, words: Sequence[str]) -> np.ndarray:
        """Unit-normalised vectors of single words. Inside `shared_work`, the vectors of
        the same word list are computed once per record (a copy is handed out)."""
        if not words:
            return np.zeros((0, self.dim), dtype=np.float32)
        return once_per_record(
            "word_vectors", tuple(words), lambda: _unit(self._stacked(words)), np.copy
        )

    def rare(self, word: str) -> bool:
        return self.specificity(word) >= _RARE

    def specificity(self, word: str) -> float:
        """0 for the most frequent words, rising with vocabulary rank; 1 for split words.
        A Chinese word by its frequency in the segmenter's dictionary (`cjk.specificity`):
        the sub-word vocabulary has few Chinese pieces, so it would call every one rare."""
        if word[0] > "\u2fff" and cjk.is_chinese(word):
            return cjk.specificity(word)
        return self._word(word)[2]

    def bags(self, texts: Sequence[Sequence[str]]) -> np.ndarray:
        """Unit-normalised vectors of texts given as word lists (average of piece vectors).
        Inside `shared_work`, a text's vector is computed once per record."""
        shared = shared_results("bags")
        if shared is None:
            return _unit(self._sums(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        keys = [tuple(words) if len(words) <= _BAG_CHUNK_WORDS else None for words in texts]
        rows = []
        for i, key in enumerate(keys):
            hit = shared.get(key) if key is not None else None
            if hit is None:
                rows.append(i)
            else:
                out[i] = hit
        if rows:
            unit = _unit(self._sums([texts[i] for i in rows]))
            out[rows] = unit
            for i, vector in zip(rows, unit, strict=True):
                if keys[i] is not None:
                    shared[keys[i]] = vector
        return out

    def _sums(self, texts: Sequence[Sequence[str]]) -> np.ndarray:
        """Each text's word vectors summed in word order, a chunk of `_BAG_CHUNK_WORDS` at a
        time (each chunk's sum added to the text's): memory stays within two chunks of word
        vectors whatever the texts' length. Short texts share a chunk, summed together
        (`_add_block_sums`)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        batch: list[tuple[int, Sequence[str]]] = []  # (text, its words in this chunk)
        size = 0
        for i, words in enumerate(texts):
            for start in range(0, len(words), _BAG_CHUNK_WORDS):
                chunk = words[start : start + _BAG_CHUNK_WORDS]
                if size + len(chunk) > _BAG_CHUNK_WORDS:
                    self._add_block_sums(out, batch)
                    batch, size = [], 0
                batch.append((i, chunk))
                size += len(chunk)
        if batch:
            self._add_block_sums(out, batch)
        return out

    def _add_block_sums(self, out: np.ndarray, segments: list[tuple[int, Sequence[str]]]) -> None:
        """Adds each segment's word-vector sum to its text's row of `out`. Segments of
        similar length (padding at most doubles a block) are laid out as one block of rows
        per segment, padded to the longest with rows of -0.0 (x + -0.0 is x, bit for bit),
        and a block is summed along its rows in one reduction: the same additions in the
        same order as summing each segment's rows alone. A text's chunks before its last
        fill a batch alone, so the texts of the segments are distinct."""
        lengths = [len(words) for _, words in segments]
        longest = max(lengths)
        if len(segments) * longest <= 2 * sum(lengths):
            sums = self._block(segments, range(len(segments)), lengths, longest)
            first, last = segments[0][0], segments[-1][0]
            if last - first + 1 == len(segments):  # consecutive texts (none empty)
                out[first : last + 1] += sums
            else:
                out[[i for i, _ in segments]] += sums
            return
        order = sorted(range(len(segments)), key=lengths.__getitem__, reverse=True)
        at = 0
        while at < len(order):
            longest = lengths[order[at]]
            words, end = longest, at + 1
            while end < len(order) and (end - at + 1) * longest <= 2 * (
                words + lengths[order[end]]
            ):
                words += lengths[order[end]]
                end += 1
            block = order[at:end]
            out[[segments[k][0] for k in block]] += self._block(segments, block, lengths, longest)
            at = end

    def _block(
        self,
        segments: list[tuple[int, Sequence[str]]],
        block: Sequence[int],
        lengths: list[int],
        longest: int,
    ) -> np.ndarray:
        """The word-vector sums of `segments[k]` for k in `block`, one row each."""
        cached, word, pad = self._words.entries, self._word, _NEGATIVE_ZERO * self.dim
        rows: list[bytes] = []
        for k in block:
            rows += [(cached.get(w) or word(w))[0] for w in segments[k][1]]
            rows += [pad] * (longest - lengths[k])
        vectors = np.frombuffer(b"".join(rows), dtype=np.float32)
        sums: np.ndarray = np.add.reduce(vectors.reshape(len(block), longest, self.dim), axis=1)
        return sums

    def nearest_similarity(self, words: Sequence[str], vocabulary: Sequence[str]) -> np.ndarray:
        """For each word, the cosine similarity of the closest vocabulary word (0 when empty)."""
        if not words or not vocabulary:
            return np.zeros(len(words))
        # Both lists' vectors in one call (each row is computed alone).
        vectors = self.word_vectors([*words, *vocabulary])
        mine, theirs = vectors[: len(words)], vectors[len(words) :].T
        if len(words) <= _SIMILARITY_ROWS:
            closest: np.ndarray = (mine @ theirs).max(axis=1)
            return closest
        # Block by block: the products of every word with every vocabulary word are never
        # held at once (thousands of words against a long context's vocabulary).
        return np.concatenate(
            [
                (mine[start : start + _SIMILARITY_ROWS] @ theirs).max(axis=1)
                for start in range(0, len(words), _SIMILARITY_ROWS)
            ]
        )


# Words `nearest_similarity` compares with the vocabulary in one matrix product.
_SIMILARITY_ROWS = 256


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (rows of zeros stay zero)."""
    # The arithmetic of `np.linalg.norm(vectors, axis=1)`, without its dispatch; the norms
    # computed in place.
    norms = np.add.reduce(vectors * vectors, axis=1, keepdims=True)
    np.sqrt(norms, out=norms)
    np.maximum(norms, 1e-9, out=norms)
    unit: np.ndarray = vectors / norms
    return unit


def _specificity(piece: int) -> float:
    if piece <= _FREQUENT_IDS:
        return 0.0
    return min(1.0, math.log(piece / _FREQUENT_IDS) / math.log(_VOCAB_IDS / _FREQUENT_IDS))


def map_safetensor(path: Path, name: str) -> np.ndarray:
    """Tensor `name` of a safetensors file, memory-mapped read-only (no copy)."""
    with path.open("rb") as file:
        (size,) = struct.unpack("<Q", file.read(8))
        header = json.loads(file.read(size))
    entry = header[name]
    dtype = {"F16": np.float16, "F32": np.float32}.get(entry["dtype"])
    if dtype is None:
        raise ValueError(f"{path.name}: {name} has unsupported dtype {entry['dtype']}")
    start, end = entry["data_offsets"]
    table = np.memmap(
        path, dtype=dtype, mode="r", offset=8 + size + start, shape=tuple(entry["shape"])
    )
    if table.nbytes != end - start:
        raise ValueError(f"{path.name}: {name} does not match its shape")
    return table


def _wordllama_dir() -> Path:
    """The installed wordllama package's folder, found without importing the package:
    only its data files are read (importing it would load its download and training
    dependencies into every process that scores)."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the wordllama package is not installed", name="wordllama")
    return Path(next(iter(spec.submodule_search_locations)))


def shared_embedder() -> Embedder:
    """The process-wide embedder; loads the model once from the installed package's files
    (`wordllama`'s default model, l2_supercat, 256 dimensions)."""
    global _shared
    if _shared is None:
        with _lock:
            if _shared is None:
                from tokenizers import Tokenizer

                package = _wordllama_dir()
                table = map_safetensor(package / _WEIGHTS, _TENSOR)
                tokenizer = Tokenizer.from_file(str(package / _TOKENIZER))
                tokenizer.enable_padding()  # as wordllama's model configures it
                tokenizer.no_truncation()
                _shared = Embedder(table, tokenizer)
    return _shared
