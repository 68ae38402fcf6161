"""Alerting on windowed defect rates (see `monitor.alerts.engine`)."""

from monitor.alerts.engine import AlertEngine
from monitor.evidence import SlidingWindow, wilson_interval

__all__ = ["AlertEngine", "SlidingWindow", "wilson_interval"]
