"""Deterministic sampling: the same trace gets the same decision everywhere.

A record's position `u` in [0, 1) is a hash of its trace id (or request id), so every
replica and every evaluator agrees on it; an evaluator with rate r samples the records
with `u < r`. Lower-rate evaluators therefore see a subset of what higher-rate ones see.

Effective rate = base rate (the first `sampling.overrides` entry matching the record's
service/route, else `sampling.rate`) × the evaluator's `sample_rate` (default 1).
Records with negative feedback or an error status are always sampled when configured.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

from monitor.config import Sampling

_SCALE = float(1 << 64)


def sampling_position(key: str) -> float:
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


class Sampleable(Protocol):
    """What a decision reads: a `RagRecord`, or a receiver's view of the records it would
    build (the OTLP ingest decides before extracting, with this same `Sampler`)."""

    @property
    def sampling_key(self) -> str: ...
    @property
    def service(self) -> str: ...
    @property
    def route(self) -> str: ...
    @property
    def feedback(self) -> str | None: ...
    @property
    def error(self) -> bool: ...


class Sampler:
    def __init__(self, config: Sampling, evaluator_rates: dict[str, float | None]) -> None:
        self._config = config
        self._rates = {
            name: 1.0 if rate is None else rate for name, rate in evaluator_rates.items()
        }
        self._max_rate = max(self._rates.values(), default=0.0)
        self._always_negative = config.always.negative_feedback
        self._always_error = config.always.error

    def base_rate(self, service: str, route: str) -> float:
        for override in self._config.overrides:
            if override.service not in (None, service):
                continue
            if override.route not in (None, route):
                continue
            return override.rate
        return self._config.rate

    def is_priority(self, record: Sampleable) -> bool:
        return (self._always_negative and record.feedback == "negative") or (
            self._always_error and record.error
        )

    def decide(self, record: Sampleable) -> dict[str, bool]:
        """evaluator name → sampled?"""
        if self.is_priority(record):
            return dict.fromkeys(self._rates, True)
        position = sampling_position(record.sampling_key)
        base = self.base_rate(record.service, record.route)
        return {name: position < base * rate for name, rate in self._rates.items()}

    def samples_any(self, record: Sampleable) -> bool:
        """Whether `decide` would sample the record for at least one evaluator (cheaper:
        most traffic is unsampled, and this is asked for every record)."""
        if not self._rates:
            return False
        if self.is_priority(record):
            return True
        threshold = self.base_rate(record.service, record.route) * self._max_rate
        if threshold <= 0.0 or threshold >= 1.0:  # positions are in [0, 1): no hash needed
            return threshold >= 1.0
        return sampling_position(record.sampling_key) < threshold
