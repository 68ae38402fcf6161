"""The sender-screen tests' service: the default regression rule (`baseline: {}`), its
honest pods (each its own sender) failing at `RATE`, and a forger's sender key."""

from __future__ import annotations

import numpy as np

from monitor.alerts import AlertEngine
from monitor.alerts.rule import Origin
from monitor.config import AlertBaseline, RegressionRule

RULE = RegressionRule(name="regression", evaluator="local_groundedness", baseline=AlertBaseline())
START = 1_767_225_600.0  # a Thursday, 00:00 UTC
RATE = 0.1
PODS = 4
FORGER = "6.6.6.6/forged"


def count_honest(
    engine: AlertEngine, rng: np.random.Generator, mean: float, pods: int, rate: float, now: float
) -> None:
    """Counts a Poisson(`mean`) number of verdicts failing at `rate`, spread over `pods`
    senders (`10.0.0.<pod>/pod-<pod>`), for rule 0 of service `shop`."""
    volume = rng.poisson(mean)
    for pod, n in enumerate(rng.multinomial(volume, [1 / pods] * pods)):
        if n:
            fails = int(rng.binomial(n, rate))
            origin = Origin("shop", sender=f"10.0.0.{pod}/pod-{pod}")
            engine.count(0, origin, [n - fails, fails], None, now)
