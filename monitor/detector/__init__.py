"""The embedded, offline detectors behind the `local_*` evaluators (pure functions, CPU only)."""

from monitor.detector.groundedness import GroundednessVerdict, score_groundedness
from monitor.detector.relevance import RetrievalVerdict, score_relevance, score_retrieval
from monitor.detector.safety import SafetyVerdict, screen_safety

__all__ = [
    "GroundednessVerdict",
    "RetrievalVerdict",
    "SafetyVerdict",
    "score_groundedness",
    "score_relevance",
    "score_retrieval",
    "screen_safety",
]
