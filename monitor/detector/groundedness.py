"""Groundedness: the probability that the retrieved context supports a response (1 = fully).

The score comes from a small logistic model over support features (`features.py`): words,
numbers and entities of the response missing from the context, negation that disagrees with
the closest evidence, and sentence embedding similarity. Its parameters ship in
`groundedness_model.json`, fitted by `bench/train_detector.py`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from monitor.detector.embedding import shared_embedder
from monitor.detector.features import FEATURE_NAMES, analyse

MODEL_PATH = Path(__file__).with_name("groundedness_model.json")


@dataclass(frozen=True, slots=True)
class GroundednessVerdict:
    # Calibrated probability that the response is grounded in the context.
    score: float
    # Response sentences the context does not back, in response order.
    unsupported: tuple[str, ...]
    # The specific words, numbers and names the context does not contain.
    unsupported_terms: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Model:
    columns: tuple[int, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    # Platt scaling of the logit onto real RAG traffic's odds.
    slope: float
    shift: float


@lru_cache(maxsize=1)
def _model() -> _Model:
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    unknown = set(data["features"]) - set(FEATURE_NAMES)
    if unknown:
        raise RuntimeError(f"{MODEL_PATH.name} uses unknown features {sorted(unknown)}")
    return _Model(
        columns=tuple(FEATURE_NAMES.index(n) for n in data["features"]),
        mean=np.asarray(data["mean"]),
        scale=np.asarray(data["scale"]),
        coef=np.asarray(data["coef"]),
        intercept=float(data["intercept"]),
        slope=float(data["calibration"]["slope"]),
        shift=float(data["calibration"]["shift"]),
    )


def score_groundedness(query: str, contexts: list[str], response: str) -> GroundednessVerdict:
    """Scores how well `contexts` support `response`; lists the sentences they do not."""
    analysis = analyse(query, contexts, response, shared_embedder())
    if not analysis.sentences:
        return GroundednessVerdict(score=1.0, unsupported=())
    model = _model()
    x = analysis.features[list(model.columns)]
    z = float(((x - model.mean) / model.scale) @ model.coef + model.intercept)
    z = model.slope * z + model.shift
    grounded = 1.0 / (1.0 + math.exp(max(min(z, 700.0), -700.0)))
    flagged = [s for s in analysis.sentences if s.flagged]
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
    )
