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
_NONE: frozenset[str] = frozenset()


def sampling_position(key: str) -> float:
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


class Sampleable(Protocol):
    """What a decision reads: a `RagRecord`, or the trace stage's view of the records a
    trace would yield (it decides before extracting)."""

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
        self._min_rate = min(self._rates.values(), default=0.0)
        self._all = frozenset(self._rates)
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

    def sampled(self, record: Sampleable) -> frozenset[str]:
        """The evaluators that sample `record`. Unsampled traffic, usually most of it,
        costs one hash and no allocation, and no hash when the rates are 0 or all 1."""
        if self.is_priority(record):
            return self._all
        base = self.base_rate(record.service, record.route)
        threshold = base * self._max_rate
        if threshold <= 0.0:
            return _NONE
        if base * self._min_rate >= 1.0:  # positions are in [0, 1): no hash needed
            return self._all
        position = sampling_position(record.sampling_key)
        if position >= threshold:
            return _NONE
        chosen = frozenset(name for name, rate in self._rates.items() if position < base * rate)
        return self._all if len(chosen) == len(self._all) else chosen
