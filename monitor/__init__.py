"""rag-monitor: a sidecar that scores production RAG traces and exports metrics and alerts."""

from monitor.config import Config, ConfigError, load_config
from monitor.records import RagRecord, RecordError, parse_record
from monitor.results import EvalResult
from monitor.shared.version import __version__

__all__ = [
    "Config",
    "ConfigError",
    "EvalResult",
    "RagRecord",
    "RecordError",
    "__version__",
    "load_config",
    "parse_record",
]
