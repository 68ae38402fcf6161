"""The arithmetic of `trustworthiness_tlm`: observed consistency, self-reflection and their
combination into one 0..1 confidence (the BSDetector method, Chen & Mueller 2023).

- **Agreement** of one drawn answer (the judge's own answer to the question, drawn at
  `temperature`) with the response: `SEMANTIC_SHARE` of a semantic
  agreement (the embedded detector both ways, or a judge's YES/NO) plus the rest for an
  exact match after normalisation (case, punctuation, articles, spacing).
- **Observed consistency**: the mean agreement over the drawn answers.
- **Self-reflection**: the mean grade of the reflection answers (correct 1, incorrect 0,
  not sure 0.5); where the server returned token log-probabilities, a reflection's grade is
  the probability-weighted grade of the verdict token's alternatives instead.
- **Confidence**: `weights.consistency · consistency + weights.reflection · reflection`,
  the weights normalised to sum to 1 (consistency alone when reflection is off).

Pure functions; the detector is imported on first use (it loads word vectors).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.judge.answers import TokenLogprobs

# BSDetector's α: the share of a drawn answer's agreement that is semantic; the rest is
# exact match.
SEMANTIC_SHARE = 0.8
# Below this a drawn answer counts as disagreeing with the response in the explanation.
DISAGREES_BELOW = 0.5

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = re.compile(r"[^\w\s]")


def normalise(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces."""
    return " ".join(_ARTICLES.sub(" ", _PUNCT.sub(" ", text.lower())).split())


@dataclass(frozen=True, slots=True)
class Agreement:
    """How far one drawn answer agrees with the response."""

    score: float  # 0..1
    exact: bool
    # (what the drawn answer says, what the response says) for each contradicted value.
    conflicts: tuple[tuple[str, str], ...] = ()
    # Specific words, numbers and names of the response the drawn answer does not back.
    missing: tuple[str, ...] = ()


def combine_agreement(semantic: float, exact: bool) -> float:
    return SEMANTIC_SHARE * semantic + (1 - SEMANTIC_SHARE) * (1.0 if exact else 0.0)


def detector_agreement(query: str, response: str, drawn: str) -> Agreement:
    """The embedded detector read both ways: the drawn answer as evidence for the response,
    and the response as evidence for the drawn answer; the semantic part is the mean of the
    two."""
    from monitor.detector import score_groundedness

    forward = score_groundedness(query, [drawn], response)
    backward = score_groundedness(query, [response], drawn)
    conflicts = [(c.evidence, c.said) for c in forward.contradictions]
    conflicts += [(c.said, c.evidence) for c in backward.contradictions]
    exact = normalise(drawn) == normalise(response)
    semantic = 1.0 if exact else (forward.score + backward.score) / 2
    return Agreement(
        score=combine_agreement(semantic, exact),
        exact=exact,
        conflicts=tuple(dict.fromkeys(conflicts)),
        missing=forward.unsupported_terms,
    )


def judged_agreement(response: str, drawn: str, same: bool) -> Agreement:
    """A judge's YES/NO on whether the two answers state the same facts."""
    exact = normalise(drawn) == normalise(response)
    return Agreement(score=combine_agreement(1.0 if same or exact else 0.0, exact), exact=exact)


def confidence(
    consistency: float,
    reflection: float | None,
    weight_consistency: float,
    weight_reflection: float,
) -> float:
    if reflection is None or weight_reflection == 0:
        return consistency
    total = weight_consistency + weight_reflection
    return (weight_consistency * consistency + weight_reflection * reflection) / total


# -- reflection grades from token log-probabilities ----------------------------------------

_TOKEN_GRADES = {
    "a": 1.0,
    "correct": 1.0,
    "b": 0.0,
    "incorrect": 0.0,
    "c": 0.5,
    "not": 0.5,
    "unsure": 0.5,
}


def _token_grade(token: str) -> float | None:
    return _TOKEN_GRADES.get(token.strip().strip("\"'()[]*:.,").lower())


def logprob_grade(tokens: TokenLogprobs | None, text_grade: float) -> float | None:
    """The expected grade at the verdict token: the last answer token that reads as the
    grade the text was parsed to (a letter A/B/C first, else a word), with its
    alternatives' probabilities (those that read as a grade) renormalised. None when no
    such token is found (the text grade stands)."""
    matching = [p for p in tokens or () if _token_grade(p[0][0]) == text_grade]
    # The letter of "(C) Not sure" is where A, B and C compete; "Not" has no rivals.
    letters = [p for p in matching if p[0][0].strip("\"'()[]*:., ").lower() in ("a", "b", "c")]
    for position in reversed(letters or matching):
        mass: dict[float, float] = {}
        for token, logprob in position:
            grade = _token_grade(token)
            if grade is not None:
                mass[grade] = mass.get(grade, 0.0) + math.exp(logprob)
        total = sum(mass.values())
        if total <= 0:
            return None
        return sum(grade * share for grade, share in mass.items()) / total
    return None


# -- the explanation -------------------------------------------------------------------------


def describe_consistency(agreements: Sequence[Agreement]) -> str:
    """What disagreed: "3 of 4 drawn answers give 1967 where the response says 1991"."""
    k = len(agreements)
    disagreeing = [a for a in agreements if a.score < DISAGREES_BELOW]
    consistency = sum(a.score for a in agreements) / k
    parts = [f"consistency {consistency:.2f}: {len(disagreeing)} of {k} drawn answers disagree"]
    conflicts: Counter[tuple[str, str]] = Counter()
    for a in agreements:
        conflicts.update(set(a.conflicts))
    for (drawn_says, response_says), n in conflicts.most_common(2):
        parts.append(
            f"{n} of {k} drawn answers give {drawn_says} where the response says {response_says}"
        )
    if disagreeing and not conflicts:
        missing: Counter[str] = Counter()
        for a in disagreeing:
            missing.update(set(a.missing))
        if missing:
            terms = ", ".join(term for term, _ in missing.most_common(3))
            parts.append(f"the disagreeing drawn answers do not state: {terms}")
    return "; ".join(parts)


def describe_reflection(said: Sequence[float], graded: Sequence[float], reasoning: str) -> str:
    """ "self-reflection 0.25 (incorrect, not sure)", plus the first reflection's reasoning."""
    words = {1.0: "correct", 0.0: "incorrect", 0.5: "not sure"}
    text = f"self-reflection {sum(graded) / len(graded):.2f} ("
    text += ", ".join(words[g] for g in said)
    if list(graded) != list(said):
        text += "; weighted by token probabilities"
    text += ")"
    if reasoning:
        text += f": {reasoning[:160]}"
    return text
