"""Sentence support by a small cross-encoder: P(the evidence supports the claim), per sentence.

Each response sentence is paired with the few context sentences closest to it (word-vector
similarity; a one-line answer is read together with the question, since "Paris." alone says
nothing) and scored by the MiniLM cross-encoder `bench/train_cross_encoder.py` fine-tunes and
exports as an int8 ONNX graph with its WordPiece tokenizer; onnxruntime runs it on one thread.

Used by the training scripts to build the cross-encoder's pairs and to measure it as a second
detector stage (`bench/train_detector.py --support-model`). It does not ship: on the held-out
families it measured below the cheap features (see monitor/detector/README.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from monitor.detector.embedding import Embedder
from monitor.detector.text import sentences, tokens

MODEL_PATH = Path("/tmp/rag-monitor-support/support_model.onnx")
MAX_TOKENS = 96
EVIDENCE_SENTENCES = 3
# A response sentence shorter than this is read together with the question.
SHORT_CLAIM = 6
_MAX_CONTEXT_SENTENCES = 400
_MAX_CLAIMS = 12


def pairs(
    query: str, contexts: Sequence[str], response: str, embedder: Embedder
) -> list[tuple[str, str]]:
    """(claim, evidence) for each response sentence: the evidence is the claim's closest
    context sentences, in context order."""
    claims = [s for s in sentences(response) if tokens(s)][:_MAX_CLAIMS]
    evidence = [s for doc in contexts for s in sentences(doc) if tokens(s)]
    if not claims or not evidence:
        return []
    evidence = evidence[:_MAX_CONTEXT_SENTENCES]
    texts = [
        f"{query.strip()} {c}" if query.strip() and len(tokens(c)) < SHORT_CLAIM else c
        for c in claims
    ]
    sims = (
        embedder.bags([tokens(t) for t in texts]) @ embedder.bags([tokens(s) for s in evidence]).T
    )
    out = []
    for i, text in enumerate(texts):
        top = np.argsort(-sims[i], kind="stable")[:EVIDENCE_SENTENCES]
        out.append((text, " ".join(evidence[j] for j in sorted(top))))
    return out


class SupportModel:
    """The ONNX cross-encoder and its tokenizer."""

    def __init__(self, model: Path = MODEL_PATH) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(tokenizer_path(model)))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS, strategy="longest_first")
        self._tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session: Any = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )

    def encode(self, batch: Sequence[tuple[str, str]]) -> dict[str, np.ndarray]:
        encoded = self._tokenizer.encode_batch(list(batch))
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encoded):
            n = len(e.ids)
            ids[row, :n] = e.ids
            types[row, :n] = e.type_ids
            mask[row, :n] = 1
        return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}

    def support(self, batch: Sequence[tuple[str, str]]) -> np.ndarray:
        """P(supported) for each (claim, evidence) pair."""
        if not batch:
            return np.zeros(0)
        out = []
        # Pairs one at a time: no padding waste, and the cost of one is what a record pays.
        for pair in batch:
            logits = self._session.run(None, self.encode([pair]))[0]
            out.append(float(np.asarray(logits).reshape(-1)[0]))
        z = np.asarray(out, dtype=np.float64)
        supported: np.ndarray = 1.0 / (1.0 + np.exp(-z))
        return supported


def tokenizer_path(model: Path) -> Path:
    """The tokenizer stored beside a model file."""
    return model.with_name(model.stem + "_tokenizer.json")


def support_features(
    model: SupportModel, query: str, contexts: Sequence[str], response: str, embedder: Embedder
) -> np.ndarray:
    """(weakest, mean) cross-encoder support over the response's sentences."""
    found = pairs(query, contexts, response, embedder)
    if not found:
        return np.asarray([1.0, 1.0])
    p = model.support(found)
    return np.asarray([float(p.min()), float(p.mean())])
