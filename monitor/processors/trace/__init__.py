"""The trace stage: assembly → one sampling decision, for every receiver."""

from monitor.processors.trace._shares import FairShares
from monitor.processors.trace._stage import TraceStage

__all__ = ["FairShares", "TraceStage"]
