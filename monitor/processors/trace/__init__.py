"""The trace stage: assembly → one sampling decision, for every receiver."""

from monitor.processors.trace._stage import TraceStage
from monitor.processors.trace._triage import TraceTriage

__all__ = ["TraceStage", "TraceTriage"]
