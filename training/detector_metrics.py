"""Ranking and threshold metrics of the detector's benchmark and training scripts, and the
rule its explanations keep (not shipped)."""

from __future__ import annotations

import numpy as np

from monitor.detector.groundedness import GroundednessVerdict

# The findings a failing explanation headlines, which a pass never names.
FAILURE_FINDINGS = ("contradicted:", "unsupported:")


def auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (ties count half); `labels` are 1 for the positive class."""
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    positives, negatives = int(y.sum()), int((~y).sum())
    if positives == 0 or negatives == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_scores = s[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[y].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def best_f1(labels: np.ndarray, scores: np.ndarray) -> tuple[float, float]:
    """The best F1 over thresholds "score >= t means positive", and that threshold."""
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    best, at = 0.0, float("nan")
    for t in np.unique(s):
        predicted = s >= t
        tp = int((predicted & y).sum())
        if tp == 0:
            continue
        precision = tp / int(predicted.sum())
        recall = tp / int(y.sum())
        f1 = 2 * precision * recall / (precision + recall)
        if f1 > best:
            best, at = f1, float(t)
    return best, at


def explanation_disagreement(
    passed: bool, explanation: str, verdict: GroundednessVerdict
) -> str | None:
    """How a `local_groundedness` explanation disagrees with its verdict, or None.

    A pass starts with "pass" and never headlines a finding of failure (`FAILURE_FINDINGS`).
    A failure never starts with "pass" and leads with what decided (`verdict.decided_by`): a
    deciding contradiction ("contradicted: " and its description); a one-sentence answer naming
    what the context never mentions ("unsupported: " that sentence, then the terms not in the
    context); or the model ("unsupported: " the least supported sentences, or "fail: " where
    none stands out), never a contradiction that did not decide.
    """
    if passed:
        if not explanation.startswith("pass"):
            return "a pass that does not say so first"
        named = [f for f in FAILURE_FINDINGS if f in explanation]
        return f"a pass that names {named[0]!r}" if named else None
    if explanation.startswith("pass"):
        return "a failure that starts with 'pass'"
    parts = explanation.split(" | ")
    if verdict.decided_by == "contradiction":
        deciding = [c.describe() for c in verdict.contradictions if c.decisive or c.invented]
        if not deciding or not parts[0].startswith(f"contradicted: {deciding[0]}"):
            return "a failure a contradiction decided that does not lead with it"
        return None
    if verdict.decided_by == "unsupported_name":
        if not parts[0].startswith("unsupported: ") or len(parts) < 2:
            return "a failure an unsupported name decided that does not lead with its sentence"
        if not parts[1].startswith("not in the context: "):
            return "a failure an unsupported name decided that does not name what is missing"
        return None
    if not parts[0].startswith(("unsupported: ", "fail: ")):
        return "a failure the model decided that leads with something else"
    return None
