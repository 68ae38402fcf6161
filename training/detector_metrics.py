"""Ranking and threshold metrics of the detector's benchmark and training scripts (not shipped)."""

from __future__ import annotations

import numpy as np


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
