"""Groundedness: the probability that the retrieved context supports a response (1 = fully).

First stage: a logistic model over support features (`features.py`): words, numbers and names
of the response missing from the context, how specific they are, word pairs the context never
has, numbers that conflict with their evidence, negation flips, and contradictions (slots,
substitutions, polarity in other words). A response that contradicts the context on a restated
number, date, name, word of a closed lexicon or polarity scores `CONTRADICTED` whatever the
model says. The parameters ship in `groundedness_model.json`, fitted by
`training/train_detector.py`; a detector scores with a given set of them (`Parameters`: this
release's by default, a previous release's as `monitor.detector.releases` carries them).

Second stage: a score the first stage leaves in the uncertain band (and no decisive
contradiction) is rescored with the sentence-pair model of `pair_model.py` reading the
response's weakest sentences against their closest context sentences.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from monitor.detector.cjk import is_chinese, is_han
from monitor.detector.contradiction import Contradiction
from monitor.detector.embedding import shared_embedder
from monitor.detector.features import FEATURE_NAMES, analyse
from monitor.detector.pair_model import HEAD_PATH, PairHead, load_pair_model
from monitor.detector.sentences import SentenceCheck

MODEL_PATH = Path(__file__).with_name("groundedness_model.json")
# The score of a response that contradicts its context on a number, date, name or polarity:
# decisive, whatever the learned model says.
CONTRADICTED = 0.02
# The score of a one-sentence answer that names a person, organisation or place the context
# never mentions: its one specific claim is unsupported.
UNSUPPORTED_NAME = 0.2
# The factor a clause whose content words the context lacks (an invented claim the
# explanation lists) applies to the score, and a thinner one (half its words missing).
UNSUPPORTED_CLAUSE = 0.7
THIN_CLAUSE = 0.8
# The factor of a clause invented in Chinese: the model's counts, fitted on English, leave a
# faithful Chinese answer nearer the threshold (a paraphrase reorders and recuts its
# words), so the clause takes more (chosen on the Chinese probe's development split).
HAN_UNSUPPORTED_CLAUSE = 0.6
# Response sentences the second stage reads (the least supported ones first).
PAIRS = 2

# What set a score: a decisive contradiction (`CONTRADICTED`), a one-sentence answer naming
# what the context never mentions (`UNSUPPORTED_NAME`), or the model's counts (with the
# invented clauses' factor, and the second stage where it rescored).
Decision = Literal["contradiction", "unsupported_name", "model"]


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
    # Whether the second stage rescored the record (its first-stage score was uncertain).
    rescored: bool = False
    decided_by: Decision = "model"


@dataclass(frozen=True, slots=True)
class FirstStage:
    verdict: GroundednessVerdict
    # (response sentence, closest context sentence), least supported first.
    pairs: tuple[tuple[str, str], ...]
    # A decisive contradiction settled the score.
    decided: bool


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


@dataclass(frozen=True, slots=True)
class Parameters:
    """The fitted parameters a detector scores with: the first stage's model file and the
    second stage's head file (the features and rules are the code's, the same for both)."""

    model: Path = MODEL_PATH
    head: Path = HEAD_PATH


SHIPPED = Parameters()


# A process scores with this release's parameters, and for a day after an upgrade with the
# previous release's too.
@lru_cache(maxsize=2)
def _model(path: Path = MODEL_PATH) -> Logistic:
    return Logistic.from_json(json.loads(path.read_text(encoding="utf-8")))


@lru_cache(maxsize=2)
def _pair_head(path: Path = HEAD_PATH) -> PairHead:
    return PairHead.from_npz(path)


def weakest_pairs(checks: list[SentenceCheck], limit: int = PAIRS) -> tuple[tuple[str, str], ...]:
    """The `limit` least supported claims (most specific unsupported words, then least
    similar to their evidence), each with its closest context sentence."""
    claims = [c for c in checks if c.evidence and not c.abstains and c.content]
    claims.sort(key=lambda c: (-c.specific_unsupported, c.similarity))
    return tuple((c.text, c.evidence) for c in claims[:limit])


def clause_factor(checks: list[SentenceCheck]) -> float:
    """Each invented clause takes a share of the score: an otherwise well-supported answer
    keeps a passing score, a doubtful one with an invented claim fails."""
    kinds = [thin for s in checks for _, thin in s.invented]
    chinese = sum(
        1 for s in checks for clause, thin in s.invented if not thin and is_chinese(clause)
    )
    return float(
        UNSUPPORTED_CLAUSE ** (kinds.count(False) - chinese)
        * THIN_CLAUSE ** kinds.count(True)
        * HAN_UNSUPPORTED_CLAUSE**chinese
    )


def first_stage(
    query: str, contexts: list[str], response: str, parameters: Parameters = SHIPPED
) -> FirstStage:
    """The cheap verdict: lexical and slot checks, the logistic model, decisive rules."""
    analysis = analyse(query, contexts, response, shared_embedder())
    if not analysis.sentences:
        return FirstStage(GroundednessVerdict(score=1.0, unsupported=()), (), True)
    grounded = _model(parameters.model).grounded(analysis.features)
    # A contradiction is decisive where the context restates the claim but for the slot, and
    # also where the answer's value is nowhere in the context: the answer put a name, number
    # or date of its own where the context has another.
    decided = any(c.decisive or c.invented for c in analysis.contradictions)
    decided_by: Decision = "model"
    if decided:
        grounded = min(grounded, CONTRADICTED)
        decided_by = "contradiction"
    elif (len(analysis.sentences) == 1 and analysis.sentences[0].unsupported_entities) or any(
        _han_name(s) for s in analysis.sentences
    ):
        if grounded > UNSUPPORTED_NAME:
            grounded = UNSUPPORTED_NAME
            decided_by = "unsupported_name"
    grounded *= clause_factor(analysis.sentences)
    contradicted = {c.claim for c in analysis.contradictions}
    named = decided_by == "unsupported_name"
    flagged = [s for s in analysis.sentences if s.flagged or s.text in contradicted or named]
    terms: list[str] = []
    seen: set[str] = set()
    for s in flagged:
        for term in (*s.unsupported_numbers, *s.unsupported_entities, *s.unsupported):
            if term.lower() not in seen:
                seen.add(term.lower())
                terms.append(term)
    verdict = GroundednessVerdict(
        score=grounded,
        unsupported=tuple(s.text for s in flagged),
        unsupported_terms=tuple(terms),
        # Decisive contradictions first: they are what decided.
        contradictions=tuple(sorted(analysis.contradictions, key=_not_decisive)),
        decided_by=decided_by,
    )
    return FirstStage(verdict, weakest_pairs(analysis.sentences), decided)


def _han_name(check: SentenceCheck) -> bool:
    """Whether a sentence names, in Chinese, what the context never names: the segmenter's
    tag reads a name in any sentence of an answer, where a capital letter is a name only
    in a one-sentence answer (a later sentence's capitals are as often titles or
    emphasis)."""
    return not check.abstains and any(is_han(e[0]) for e in check.unsupported_entities)


def _not_decisive(found: Contradiction) -> bool:
    return not (found.decisive or found.invented)


def in_band(score: float, parameters: Parameters = SHIPPED) -> bool:
    """Whether a first-stage score is uncertain enough for the second stage."""
    low, high = _pair_head(parameters.head).band
    return low <= score <= high


def score_groundedness(
    query: str,
    contexts: list[str],
    response: str,
    *,
    second_stage: bool = False,
    parameters: Parameters = SHIPPED,
) -> GroundednessVerdict:
    """Scores how well `contexts` support `response` with `parameters`; lists the sentences
    they do not. `second_stage=True` rescores an uncertain first-stage score with the pair
    model."""
    first = first_stage(query, contexts, response, parameters)
    verdict = first.verdict
    if (
        not second_stage
        or first.decided
        or not first.pairs
        or not in_band(verdict.score, parameters)
    ):
        return verdict
    model = load_pair_model()
    head = _pair_head(parameters.head)
    weakest = float(head.supported(model.features(first.pairs)).min())
    return replace(verdict, score=head.combine(verdict.score, weakest), rescored=True)
