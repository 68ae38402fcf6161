"""The second stage: a sentence-pair model for records the first stage is unsure of.

A response sentence and the context sentence closest to it are read together by
all-MiniLM-L6-v2 (Apache-2.0; frozen, int8 weights, `pair_encoder.onnx` built by
`training/export_pair_encoder.py` and installed by the `second-stage` extra as the
`rag-monitor-pair-encoder` distribution, run by onnxruntime on one thread). From its last hidden states come how well each token of the claim is matched
by some token of the evidence (worst, mean, lower quartile), the two sides' mean vectors
compared (product, difference) and the first token's vector; a logistic head over them,
fitted by `training/train_second_stage.py`, gives P(supported). Its weights, the band it serves
and how it is combined with the first stage's score ship in `pair_head.npz`; the tokenizer in
`pair_tokenizer.json` (the model's own). Nothing is fetched at run time.

The encoder costs tens of megabytes a process, so it is loaded on first use by
`load_pair_model()`, the one function that reads the model files (a process pool may call it
before forking workers so that they share the read-only pages).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

HEAD_PATH = Path(__file__).with_name("pair_head.npz")
TOKENIZER_PATH = Path(__file__).with_name("pair_tokenizer.json")
# Tokens of one claim and its evidence read together; longer pairs lose words from the longer side.
MAX_TOKENS = 128
HIDDEN = 384
# Feature layout: three token-alignment figures, then product, difference and first token.
FEATURES = 3 + 3 * HIDDEN


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


@dataclass(frozen=True, slots=True)
class PairHead:
    """P(supported) of a pair from its features; how it meets the first stage's score."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    # First-stage scores in [low, high] are rescored.
    band: tuple[float, float]
    # Rescored = sigmoid(first * logit(first stage) + pair * logit(weakest pair) + bias).
    first: float
    pair: float
    bias: float

    @classmethod
    def from_npz(cls, path: Path) -> PairHead:
        with np.load(path) as data:
            return cls(
                mean=data["mean"].astype(np.float32),
                scale=data["scale"].astype(np.float32),
                coef=data["coef"].astype(np.float32),
                intercept=float(data["intercept"]),
                band=(float(data["band"][0]), float(data["band"][1])),
                first=float(data["stack"][0]),
                pair=float(data["stack"][1]),
                bias=float(data["stack"][2]),
            )

    def supported(self, features: np.ndarray) -> np.ndarray:
        z = ((features - self.mean) / self.scale) @ self.coef + self.intercept
        supported: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(z, -50.0, 50.0)))
        return supported

    def combine(self, first_stage: float, weakest_pair: float) -> float:
        """The rescored score, kept inside the band: the second stage reorders the records
        the first stage was unsure of, never past one it was sure of."""
        z = self.first * _logit(first_stage) + self.pair * _logit(weakest_pair) + self.bias
        rescored = 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))
        return min(max(rescored, self.band[0]), self.band[1])


class PairModel:
    """The frozen encoder, its tokenizer and the fitted head."""

    def __init__(self, session: Any, tokenizer: Any, head: PairHead | None) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._head = head

    @property
    def head(self) -> PairHead:
        if self._head is None:
            raise RuntimeError("this pair model has no head (an encoder for fitting one)")
        return self._head

    def features(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One row of `FEATURES` per (claim, evidence) pair."""
        if not pairs:
            return np.zeros((0, FEATURES), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(list(pairs))
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(pairs), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for i, e in enumerate(encodings):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = 1
            types[i, : len(e.ids)] = e.type_ids
        (hidden,) = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )
        rows = np.zeros((len(pairs), FEATURES), dtype=np.float32)
        for i, e in enumerate(encodings):
            n = len(e.ids)
            plain = np.asarray(e.special_tokens_mask[:n]) == 0
            side = np.asarray(e.type_ids[:n])
            claim, evidence = hidden[i, :n][plain & (side == 0)], hidden[i, :n][plain & (side == 1)]
            if len(claim) == 0 or len(evidence) == 0:
                continue
            a = claim / np.linalg.norm(claim, axis=1, keepdims=True)
            b = evidence / np.linalg.norm(evidence, axis=1, keepdims=True)
            matched = (a @ b.T).max(axis=1)
            c, v = claim.mean(axis=0), evidence.mean(axis=0)
            rows[i, :3] = (matched.min(), matched.mean(), np.quantile(matched, 0.25))
            rows[i, 3 : 3 + HIDDEN] = c * v
            rows[i, 3 + HIDDEN : 3 + 2 * HIDDEN] = np.abs(c - v)
            rows[i, 3 + 2 * HIDDEN :] = hidden[i, 0]
        return rows

    def supported(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """P(supported) of each (claim, evidence) pair."""
        return self.head.supported(self.features(pairs)) if pairs else np.zeros(0)


def encoder_path() -> Path:
    """The encoder file, where the `second-stage` extra installed it."""
    from rag_monitor_pair_encoder import ENCODER_PATH

    return ENCODER_PATH


@lru_cache(maxsize=1)
def load_pair_model() -> PairModel:
    """Reads the encoder, tokenizer and head once per process (the only loader)."""
    return PairModel(*_load_encoder(), PairHead.from_npz(HEAD_PATH))


def pair_encoder() -> PairModel:
    """The encoder and tokenizer without a head: what `training/train_second_stage.py` fits on."""
    return PairModel(*_load_encoder(), None)


@lru_cache(maxsize=1)
def _load_encoder() -> tuple[Any, Any]:
    import onnxruntime
    from tokenizers import Tokenizer

    options = onnxruntime.SessionOptions()
    # Records are scored one per worker process: more threads would contend, not help.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(encoder_path()), options, providers=["CPUExecutionProvider"]
    )
    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_TOKENS)
    return session, tokenizer
