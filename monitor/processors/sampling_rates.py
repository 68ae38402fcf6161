"""`rag_monitor_sampling_rate{service,evaluator}`: the rate each evaluator samples each
service at now (the sampler's effective rate: its base rate, or an alert rule's boost).

Nothing is set per record: a service's series are set when it takes a label slot (and for
the allowed services at once), and a service's again whenever a boost of it changes; a
service that loses its slot loses these series with its others (`Telemetry.forget`).
"""

from __future__ import annotations

import threading

from monitor.boosts import SamplingBoosts
from monitor.processors.sampler import Sampler
from monitor.telemetry import Telemetry


class SamplingRateGauge:
    def __init__(
        self, sampler: Sampler, telemetry: Telemetry, boosts: SamplingBoosts | None = None
    ) -> None:
        """`boosts`: the same the sampler follows, watched after it (hooks run in the
        order they were added), so `Sampler.rate` already reads the new boosts."""
        self._sampler = sampler
        self._services = telemetry.service_cap
        self._gauge = telemetry.gauge("sampling_rate")
        # A service may take its slot (a receiver's thread) while the boosts change (the
        # event loop): whichever sets its series last read the newest boosts.
        self._lock = threading.Lock()
        self._services.on_admit(self._admitted)
        for service in sorted(self._services.allowed):
            self._admitted(service)
        if boosts is not None:
            boosts.on_change(self._changed)

    def _admitted(self, service: str) -> None:
        with self._lock:
            for evaluator in self._sampler.evaluators:
                self._set(service, evaluator)

    def _changed(self, evaluator: str, service: str, rate: float | None) -> None:
        with self._lock:
            if evaluator in self._sampler.evaluators and self._services.holds(service):
                self._set(service, evaluator)

    def _set(self, service: str, evaluator: str) -> None:
        self._gauge.labels(service, evaluator).set(self._sampler.rate(service, evaluator))
