"""The evaluation stage: one task per batch of sampled traces and records extracts and
scores them (the CPU scorers), then LLM judges, then the sinks."""

from monitor.processors.evaluation._previous import PreviousScorer
from monitor.processors.evaluation._stage import EvaluationStage
from monitor.processors.evaluation._task import PRELOAD, Settings, worker_initializer

__all__ = ["PRELOAD", "EvaluationStage", "PreviousScorer", "Settings", "worker_initializer"]
