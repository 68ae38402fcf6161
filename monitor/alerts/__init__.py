"""Alerting on windowed defect rates (see `monitor.alerts.engine`)."""

from monitor.alerts.engine import AlertEngine
from monitor.alerts.stats import wilson_interval
from monitor.alerts.window import SlidingWindow

__all__ = ["AlertEngine", "SlidingWindow", "wilson_interval"]
