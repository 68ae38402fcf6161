"""Span → record extraction: a sampled trace's spans become the records of its RAG requests.

It knows no stage: the evaluation stage runs it in its worker task, on the spans the trace
stage assembled and sampled; the trace stage reads only what sampling needs of a trace
(`route_of`, `feedback_of`, `trace_shape`) and, to assemble it, which model calls still
wait for their log events (`awaits_log_events`). Every convention read is an entry of one
table (`SHIPPED_CONVENTIONS`), the user's own (`conventions_from_config`) read before the
shipped ones. What the rule reads: `README.md`.
"""

from monitor.conventions import SHIPPED as SHIPPED_CONVENTIONS
from monitor.conventions import Convention
from monitor.extraction._asks_nothing import ASKS_NOTHING
from monitor.extraction._diagnosis import CAUSES, EXPLAIN, Cause, SpanTaken, causes, spans_taken
from monitor.extraction._doubt import DOUBTS as CONTEXT_DOUBTS
from monitor.extraction._doubt import context_doubts
from monitor.extraction._extract import (
    Extraction,
    TraceRecords,
    Unreadable,
    extract_trace,
    extract_within,
)
from monitor.extraction._extraction_rule import extract_records
from monitor.extraction._log_events import awaits_log_events
from monitor.extraction._suspect import INSTRUMENTATION
from monitor.extraction._suspect import REASONS as SUSPECT_REASONS
from monitor.extraction._suspect import guidance as suspect_guidance
from monitor.extraction._table import from_config as conventions_from_config
from monitor.extraction._table import log_events_taken
from monitor.extraction._trace_tree import feedback_of, route_of, trace_shape
from monitor.extraction._verdicts import OUTCOME_OF_SEVERITY as GUARDRAIL_OUTCOME_OF
from monitor.extraction._verdicts import TraceVerdicts, read_verdicts
from monitor.extraction._verdicts import from_config as vocabularies_from_config

__all__ = [
    "ASKS_NOTHING",
    "CAUSES",
    "CONTEXT_DOUBTS",
    "EXPLAIN",
    "GUARDRAIL_OUTCOME_OF",
    "INSTRUMENTATION",
    "SHIPPED_CONVENTIONS",
    "SUSPECT_REASONS",
    "Cause",
    "Convention",
    "Extraction",
    "SpanTaken",
    "TraceRecords",
    "TraceVerdicts",
    "Unreadable",
    "awaits_log_events",
    "causes",
    "context_doubts",
    "conventions_from_config",
    "extract_records",
    "extract_trace",
    "extract_within",
    "feedback_of",
    "log_events_taken",
    "read_verdicts",
    "route_of",
    "spans_taken",
    "suspect_guidance",
    "trace_shape",
    "vocabularies_from_config",
]
