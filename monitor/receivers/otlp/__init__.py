"""OTLP trace ingest: decode → trace assembly → `RagRecord` extraction."""

from monitor.receivers.otlp.component import OtlpReceivers

__all__ = ["OtlpReceivers"]
