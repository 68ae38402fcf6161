"""Deterministic sampling: the same trace gets the same decision everywhere.

A record's position `u` in [0, 1) is a hash of its trace id (or request id), so every
replica and every evaluator agrees on it; an evaluator with rate r samples the records
with `u < r`. Lower-rate evaluators therefore see a subset of what higher-rate ones see.

Effective rate = base rate (the first `sampling.overrides` entry matching the record's
service/route, else `sampling.rate`) × the evaluator's `sample_rate` (default 1), or the
rate an alert rule's boost asks for that evaluator and service (`monitor.boosts`) when
that is higher. The same position decides under either rate, so a boosted rate samples a
superset of the base rate's records, and the decision depends only on the key and on the
boosts in force (past evidence), never on the record being decided. A decision (`Sampled`)
also names the evaluators that sample the record only because of a boost, as decided then
(a budget admits those only while it keeps room for the base sample). Records with
negative feedback or an error status are always sampled when configured.

The position is the first 8 bytes of BLAKE2b (digest size 8) of the key's UTF-8, read as
a big-endian integer n, over 2**64 as a float. That definition is fixed: replicas of
different versions in one rollout must sample the same traces (`tests/trace/test_sampler_pinned.py`
pins it). Every record or trace pays for one decision, so the sampler computes the same
thing cheaply: the hash state is copied from a prepared one instead of built from keyword
arguments, and `u < r` is decided on the digest's bytes against the integer bound that
gives exactly the same answer, found once per rate (`_level`, cached). The rules of the
base rates are prepared at start; a boosted service's rules are prepared per base rate on
its first decision after a change of its boosts, so a change costs what it changes (one
service), whatever the number of boosted services and override rates, and costs nothing
on the event loop where the alert engine makes it. Deciding takes no lock: what it reads is
replaced whole per service, or read with one dictionary lookup.
"""

from __future__ import annotations

import functools
import hashlib
from binascii import hexlify
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Protocol

from monitor.boosts import Boosts, SamplingBoosts
from monitor.config import Sampling

_SCALE = float(1 << 64)
# Copied per key: building a BLAKE2b object from keyword arguments costs more than the
# hash of a short key.
_PREPARED = hashlib.blake2b(digest_size=8)
_ALL_DIGESTS = b"\xff" * 9  # above every 8-byte digest (a digest is a prefix of it, or less)
_NOTHING = b""  # below every digest


class Sampled(frozenset[str]):
    """The evaluators that sample a record; `beyond_base`: those among them that sample it
    only because a boost raised their rate (none for a record forced by its feedback or
    error). Prepared once per level of a rule, so deciding allocates nothing."""

    __slots__ = ("beyond_base",)
    beyond_base: frozenset[str]

    def __new__(cls, names: Iterable[str] = (), beyond_base: Iterable[str] = ()) -> Sampled:
        decision = super().__new__(cls, names)
        decision.beyond_base = frozenset(beyond_base)
        return decision


_NONE = Sampled()


def _digest(key: str) -> bytes:
    return _digest_bytes(key.encode())


def _digest_bytes(key: bytes) -> bytes:
    state = _PREPARED.copy()
    state.update(key)
    return state.digest()


def sampling_position(key: str) -> float:
    return int.from_bytes(_digest(key), "big") / _SCALE


def _bound(threshold: float) -> bytes:
    """Bytes B such that, for every digest d, `d < B` exactly when the position of d is
    below `threshold`. The position, float(n) / 2**64, never decreases as n grows (float
    rounding is monotonic), so the n below the threshold are [0, N) for one N: found by
    bisection on the very expression `sampling_position` evaluates."""
    low, high = 0, 1 << 64  # every n < low is below the threshold; no n >= high is
    while low < high:
        middle = (low + high) // 2
        if middle / _SCALE < threshold:
            low = middle + 1
        else:
            high = middle
    return _ALL_DIGESTS if low == 1 << 64 else low.to_bytes(8, "big")


@functools.lru_cache(maxsize=4096)
def _level(rate: float) -> bytes:
    """`_bound(rate)`, where a rate of 1 or more samples every digest, as a rule that
    samples everything does without a hash (also the few whose position rounds to 1)."""
    return _ALL_DIGESTS if rate >= 1.0 else _bound(rate)


class _Rule:
    """The decision for one effective rate per evaluator, prepared: nothing sampled,
    everything sampled without a hash, or the levels to compare a digest with. With `base`
    (the rates without boosts) the levels also mark what only a boost samples."""

    __slots__ = ("everything", "levels", "nothing")

    def __init__(
        self,
        rates: Mapping[str, float],
        everyone: Sampled,
        base: Mapping[str, float] | None = None,
    ) -> None:
        base = base or rates
        self.nothing = max(rates.values(), default=0.0) <= 0.0
        # Positions are below 1: at an effective rate of 1 or more no hash is needed, unless
        # a boost took the rate there (the hash tells what the base rate samples).
        self.everything = not self.nothing and min(base.values()) >= 1.0
        bounds = {name: _level(rate) for name, rate in rates.items()}
        below = {name: _level(rate) for name, rate in base.items()}
        # A digest below a level's bound (and not below the previous level's) is sampled by
        # every evaluator whose bound is at least that one, and only by a boost where its
        # base bound is below it; ascending, so the first level the digest is below decides.
        levels = []
        for bound in sorted({*bounds.values(), *below.values()} - {b"\x00" * 8}):
            names = frozenset(name for name, b in bounds.items() if b >= bound)
            beyond = frozenset(name for name in names if below[name] < bound)
            same = names == everyone and not beyond
            levels.append((bound, everyone if same else Sampled(names, beyond)))
        self.levels = tuple(levels)

    def decide(self, digest: bytes) -> Sampled:
        for bound, names in self.levels:
            if digest < bound:
                return names
        return _NONE


class _Boosted:
    """A boosted service: its evaluators' raised rates, and its rules per base rate,
    prepared on the first decision that needs each."""

    __slots__ = ("raised", "rules")

    def __init__(self, raised: dict[str, float]) -> None:
        self.raised = raised
        self.rules: dict[float, _Rule] = {}


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
    def __init__(
        self,
        config: Sampling,
        evaluator_rates: dict[str, float | None],
        boosts: SamplingBoosts | None = None,
    ) -> None:
        """`boosts`: the rates alert rules raise while their evidence builds; the sampler
        follows every change."""
        self._config = config
        self._rates = {
            name: 1.0 if rate is None else rate for name, rate in evaluator_rates.items()
        }
        self._all = Sampled(self._rates)
        self._always_negative = config.always.negative_feedback
        self._always_error = config.always.error
        self._priority = self._always_negative or self._always_error
        self._overrides = tuple(config.overrides)
        self._bases = frozenset({config.rate, *(o.rate for o in config.overrides)})
        self._base = config.rate
        self.rules_built = 0  # rules prepared so far (what a change of the boosts costs)
        self._rules = {base: self._prepare(base, {}) for base in self._bases}
        self._boosted: dict[str, _Boosted] = {}
        # The rates boosts raise evaluators to, with how many (evaluator, service) each.
        self._raised: Counter[float] = Counter()
        self._highest_base = max(self._bases) * max(self._rates.values(), default=0.0)
        self._ceiling = self._ceiling_now()
        self._boosts: Boosts = {}
        if boosts is not None:
            self._boosts = boosts.active()
            boosts.on_change(self._changed)
            for (evaluator, service), rate in list(self._boosts.items()):
                self._changed(evaluator, service, rate)

    def _prepare(self, base: float, raised: Mapping[str, float]) -> _Rule:
        """The rule of base rate `base`, with the evaluators in `raised` sampled at that
        rate at least."""
        self.rules_built += 1
        rates = {name: base * rate for name, rate in self._rates.items()}
        boosted = {name: max(rate, raised.get(name, 0.0)) for name, rate in rates.items()}
        return _Rule(boosted, self._all, rates)

    def _changed(self, evaluator: str, service: str, rate: float | None) -> None:
        """`evaluator`'s boost of `service` is now `rate` (None: none); boosts of
        evaluators this sampler does not know are ignored."""
        if evaluator not in self._rates:
            return
        current = self._boosted.get(service)
        raised = dict(current.raised) if current is not None else {}
        before = raised.pop(evaluator, None)
        if before is not None:
            self._raised[before] -= 1
            if not self._raised[before]:
                del self._raised[before]
        if rate is not None:
            raised[evaluator] = rate
            self._raised[rate] += 1
        # Replaced whole: a decision reads the service's old rules or its new ones.
        if raised:
            self._boosted[service] = _Boosted(raised)
        else:
            self._boosted.pop(service, None)
        self._ceiling = self._ceiling_now()

    def _ceiling_now(self) -> bytes:
        """The digests below which some rule could sample a key: a key at or above it is
        sampled by no evaluator under any base rate or boost, whatever its service and
        route (the level of the highest rate any rule samples at)."""
        highest = max(self._highest_base, max(self._raised, default=0.0))
        return _NOTHING if highest <= 0.0 else _level(highest)

    def _rule(self, service: str, base: float) -> _Rule:
        boosted = self._boosted.get(service)
        if boosted is None:
            return self._rules[base]
        rule = boosted.rules.get(base)
        if rule is None:
            rule = boosted.rules[base] = self._prepare(base, boosted.raised)
        return rule

    @property
    def evaluators(self) -> frozenset[str]:
        return self._all

    @property
    def always_error(self) -> bool:
        return self._always_error

    @property
    def always_negative_feedback(self) -> bool:
        return self._always_negative

    @property
    def samples_every_key(self) -> bool:
        """Whether `may_sample` is True whatever the key (some rule samples everything)."""
        return self._ceiling == _ALL_DIGESTS

    def may_sample(self, key: str) -> bool:
        """False when no evaluator samples a record or trace with this sampling key under
        any base rate (any service, any route) or boost in force unless it is forced
        (`always.error`, `always.negative_feedback`): what can be decided from the key
        alone."""
        ceiling = self._ceiling
        return ceiling == _ALL_DIGESTS or (ceiling != _NOTHING and _digest(key) < ceiling)

    def may_sample_ids(self, trace_ids: Iterable[bytes]) -> set[bytes]:
        """The trace ids (raw bytes) whose sampling key, the id in lowercase hex, passes
        `may_sample`: the same decisions, one loop for a request's traces."""
        ceiling = self._ceiling
        if ceiling == _ALL_DIGESTS:
            return set(trace_ids)
        if ceiling == _NOTHING:
            return set()
        # hexlify(trace_id) == trace_id.hex().encode(), the key `may_sample` digests; the
        # hash inlined (`_digest_bytes`): this loop runs for every trace received.
        kept = set()
        for trace_id in trace_ids:
            state = _PREPARED.copy()
            state.update(hexlify(trace_id))
            if state.digest() < ceiling:
                kept.add(trace_id)
        return kept

    def base_rate(self, service: str, route: str) -> float:
        for override in self._overrides:
            if override.service not in (None, service):
                continue
            if override.route not in (None, route):
                continue
            return override.rate
        return self._base

    def rate(self, service: str, evaluator: str) -> float:
        """The rate `evaluator` samples `service` at now: its base rate for the service
        (routes with an override of their own aside), or the boost in force if higher."""
        base = self.base_rate(service, "") * self._rates[evaluator]
        return max(base, self._boosts.get((evaluator, service), 0.0))

    def sampled(self, record: Sampleable) -> frozenset[str]:
        """The evaluators that sample `record`: a `Sampled`, which also names those that
        sample it only because of a boost. Unsampled traffic, usually most of it, costs one
        hash and no allocation beyond it, and no hash when the rates are 0 or all 1. Service
        and route are read only when an override or a boost could use them."""
        if self._priority and self._forced(record):
            return self._all
        base = self.base_rate(record.service, record.route) if self._overrides else self._base
        rule = self._rule(record.service, base) if self._boosted else self._rules[base]
        if rule.nothing:
            return _NONE
        if rule.everything:
            return self._all
        return rule.decide(_digest(record.sampling_key))

    def _forced(self, record: Sampleable) -> bool:
        """Negative feedback or an error, when configured: always sampled."""
        return (self._always_negative and record.feedback == "negative") or (
            self._always_error and record.error
        )
