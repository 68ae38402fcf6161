"""Alerting on windowed defect rates (see `monitor.alerts.engine`)."""

from monitor.alerts.engine import AlertEngine
from monitor.alerts.evidence.stats import wilson_interval
from monitor.alerts.evidence.window import SlidingWindow

__all__ = ["AlertEngine", "SlidingWindow", "wilson_interval"]
