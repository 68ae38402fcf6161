"""Groundedness: the probability that the retrieved context supports a response (1 = fully).

A logistic model over support features (`features.py`): words, numbers and names of the
response missing from the context, how specific they are, word pairs the context never has,
negation flips and slot contradictions. A response that contradicts the context on a restated
number, date, name or polarity scores `CONTRADICTED` whatever the model says. The parameters
ship in `groundedness_model.json`, fitted by `bench/train_detector.py`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from monitor.detector.contradiction import Contradiction
from monitor.detector.embedding import shared_embedder
from monitor.detector.features import FEATURE_NAMES, analyse, unsupported_clauses

MODEL_PATH = Path(__file__).with_name("groundedness_model.json")
# The score of a response that contradicts its context on a number, date, name or polarity:
# decisive, whatever the learned model says.
CONTRADICTED = 0.02
# The factor a clause whose content words the context lacks (an invented claim the
# explanation lists) applies to the score.
UNSUPPORTED_CLAUSE = 0.7


@dataclass(frozen=True, slots=True)
class GroundednessVerdict:
    # Calibrated probability that the response is grounded in the context.
    score: float
    # Response sentences the context does not back, in response order.
    unsupported: tuple[str, ...]
    # The specific words, numbers and names the context does not contain.
    unsupported_terms: tuple[str, ...] = ()
    # Claims whose number, date, name or polarity disagrees with the context's.
    contradictions: tuple[Contradiction, ...] = ()


@dataclass(frozen=True, slots=True)
class Logistic:
    """P(grounded) = 1 - sigmoid(standardised features @ coef + intercept)."""

    columns: tuple[int, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Logistic:
        unknown = set(data["features"]) - set(FEATURE_NAMES)
        if unknown:
            raise RuntimeError(f"{MODEL_PATH.name} uses unknown features {sorted(unknown)}")
        return cls(
            columns=tuple(FEATURE_NAMES.index(n) for n in data["features"]),
            mean=np.asarray(data["mean"]),
            scale=np.asarray(data["scale"]),
            coef=np.asarray(data["coef"]),
            intercept=float(data["intercept"]),
        )

    def grounded(self, features: np.ndarray) -> float:
        x = features[list(self.columns)]
        z = float(((x - self.mean) / self.scale) @ self.coef + self.intercept)
        return 1.0 / (1.0 + math.exp(max(min(z, 700.0), -700.0)))


@lru_cache(maxsize=1)
def _model() -> Logistic:
    return Logistic.from_json(json.loads(MODEL_PATH.read_text(encoding="utf-8")))


def score_groundedness(query: str, contexts: list[str], response: str) -> GroundednessVerdict:
    """Scores how well `contexts` support `response`; lists the sentences they do not."""
    analysis = analyse(query, contexts, response, shared_embedder())
    if not analysis.sentences:
        return GroundednessVerdict(score=1.0, unsupported=())
    grounded = _model().grounded(analysis.features)
    if any(c.decisive for c in analysis.contradictions):
        grounded = min(grounded, CONTRADICTED)
    invented = [c for s in analysis.sentences for c in unsupported_clauses(s)]
    # Each invented clause takes a share of the score: an otherwise well-supported answer
    # keeps a passing score, a doubtful one with an invented claim fails.
    grounded *= UNSUPPORTED_CLAUSE ** len(invented)
    contradicted = {c.claim for c in analysis.contradictions}
    flagged = [s for s in analysis.sentences if s.flagged or s.text in contradicted]
    terms: list[str] = []
    seen: set[str] = set()
    for s in flagged:
        for term in (*s.unsupported_numbers, *s.unsupported_entities, *s.unsupported):
            if term.lower() not in seen:
                seen.add(term.lower())
                terms.append(term)
    return GroundednessVerdict(
        score=grounded,
        unsupported=tuple(s.text for s in flagged),
        unsupported_terms=tuple(terms),
        contradictions=tuple(analysis.contradictions),
    )
