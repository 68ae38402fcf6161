"""Alerting on windowed defect rates (see `monitor.alerts.engine`)."""

from monitor.alerts.engine import Alert, AlertEngine, Notifier
from monitor.alerts.stats import wilson_interval
from monitor.alerts.window import SlidingWindow

__all__ = ["Alert", "AlertEngine", "Notifier", "SlidingWindow", "wilson_interval"]
