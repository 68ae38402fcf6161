"""The sampling decision is part of the contract between versions: replicas of different
versions in one rollout must sample the same traces. These tests pin the hash's output
for known keys, the decisions for known trace ids, and the decision at the exact edge of
a rate, against the definition written out here independently of the sampler's code."""

from __future__ import annotations

import hashlib
import math

import pytest

from monitor.config import Sampling, SamplingOverride
from monitor.processors.sampler import Sampler, sampling_position
from monitor.records import RagRecord, RawRecord

# The definition: the first 8 bytes of BLAKE2b (digest size 8) of the key's UTF-8, as a
# big-endian integer over 2**64, compared with `rate` as a float.
PINNED_POSITIONS = {
    "4bf92f3577b34da6a3ce929d0e0e4736": 0.15039768000230236,
    "0af7651916cd43dd8448eb211c80319c": 0.5604325062551866,
    "00000000000000000000000000000001": 0.8297124029496521,
    "abc": 0.8466046359861451,
    "bench-1": 0.09224988079702158,
    "réponse-ü": 0.03285512381280424,
    "": 0.8931675160897388,
}

# Sampling(rate=0.5) with evaluators wide (1.0), mid (0.6) and narrow (0.1): trace ids
# f"{i:032x}" and the evaluators that sample them.
PINNED_DECISIONS = {
    0: set(),
    1: set(),
    2: {"mid", "wide"},
    6: set(),
    10: {"mid", "narrow", "wide"},
    13: {"wide"},
    16: {"mid", "wide"},
    18: {"mid", "narrow", "wide"},
    27: set(),
    29: {"mid", "narrow", "wide"},
    35: {"mid", "wide"},
    39: {"wide"},
}


def _reference_position(key: str) -> float:
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / float(1 << 64)


def _record(trace_id: str, **kw: object) -> RagRecord:
    return RagRecord.model_validate(
        {"request_id": "r", "trace_id": trace_id, "response": "a", **kw}
    )


@pytest.mark.parametrize(("key", "position"), sorted(PINNED_POSITIONS.items()))
def test_hash_output_is_pinned(key: str, position: float) -> None:
    assert sampling_position(key) == position
    assert _reference_position(key) == position


def test_decisions_for_known_trace_ids_are_pinned() -> None:
    sampler = Sampler(Sampling(rate=0.5), {"wide": None, "mid": 0.6, "narrow": 0.1})
    for i, expected in PINNED_DECISIONS.items():
        assert sampler.sampled(_record(f"{i:032x}")) == expected, i


def test_decisions_match_the_definition_for_many_keys_and_rates() -> None:
    rates: dict[str, float | None] = {"all": None, "half": 0.5, "third": 1 / 3, "tiny": 0.001}
    for base in (1.0, 0.7, 0.01, 1e-9):
        sampler = Sampler(Sampling(rate=base), rates)
        for i in range(3000):
            key = f"{i * 7919:032x}"
            position = _reference_position(key)
            expected = {
                name
                for name, rate in rates.items()
                if position < base * (1.0 if rate is None else rate)
            }
            assert sampler.sampled(_record(key)) == expected, (base, key)


def test_the_edge_of_a_rate_is_exact() -> None:
    """A trace whose position equals the rate is not sampled; one float above, it is."""
    for key in PINNED_POSITIONS:
        position = _reference_position(key)
        at = Sampler(Sampling(rate=1.0), {"e": position})
        above = Sampler(Sampling(rate=1.0), {"e": math.nextafter(position, 1.0)})
        below = Sampler(Sampling(rate=1.0), {"e": math.nextafter(position, 0.0)})
        raw = RawRecord({"request_id": key, "response": "a"})
        assert at.sampled(raw) == frozenset(), key
        assert above.sampled(raw) == {"e"}, key
        assert below.sampled(raw) == frozenset(), key


def test_overrides_and_priority_keep_their_decisions() -> None:
    config = Sampling(
        rate=0.5,
        overrides=[
            SamplingOverride(service="batch", rate=0.0),
            SamplingOverride(route="/x", rate=1),
        ],
    )
    sampler = Sampler(config, {"wide": None, "narrow": 0.1})
    assert sampler.sampled(_record(f"{10:032x}", service="batch")) == frozenset()
    assert sampler.sampled(_record(f"{10:032x}", service="batch", error=True)) == {"wide", "narrow"}
    assert sampler.sampled(_record(f"{0:032x}", route="/x")) == {"wide"}
    assert sampler.sampled(_record(f"{10:032x}", service="web")) == {"wide", "narrow"}
    assert sampler.sampled(_record(f"{13:032x}", service="web")) == {"wide"}
