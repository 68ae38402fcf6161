"""The trace stage: assembly → one sampling decision → extraction, for every receiver."""

from monitor.processors.trace._extract import (
    Extraction,
    Extractor,
    InProcess,
    Unreadable,
    extract_traces,
)
from monitor.processors.trace._stage import TraceStage
from monitor.processors.trace._triage import TraceTriage

__all__ = [
    "Extraction",
    "Extractor",
    "InProcess",
    "TraceStage",
    "TraceTriage",
    "Unreadable",
    "extract_traces",
]
