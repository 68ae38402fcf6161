"""Sampling is deterministic by trace id, nested across evaluators, and overridable."""

from __future__ import annotations

import random

import pytest

from monitor.config import AlwaysSample, Sampling, SamplingOverride
from monitor.processors.sampler import Sampler, sampling_position
from monitor.records import RagRecord


def _record(i: int, **kw: object) -> RagRecord:
    return RagRecord.model_validate(
        {"request_id": f"r{i}", "trace_id": f"{i:032x}", "response": "a", **kw}
    )


def test_same_trace_same_decision_across_instances() -> None:
    rates: dict[str, float | None] = {"a": 0.3, "b": 0.3}
    first = Sampler(Sampling(rate=1.0), rates)
    second = Sampler(Sampling(rate=1.0), rates)  # another replica
    for i in range(500):
        decision = first.sampled(_record(i))
        assert decision == second.sampled(_record(i))
        assert ("a" in decision) == ("b" in decision)


def test_rate_is_respected_and_lower_rates_nest() -> None:
    sampler = Sampler(Sampling(rate=1.0), {"wide": 0.5, "narrow": 0.1})
    decisions = [sampler.sampled(_record(i)) for i in range(20_000)]
    wide = sum("wide" in d for d in decisions) / len(decisions)
    narrow = sum("narrow" in d for d in decisions) / len(decisions)
    assert 0.48 < wide < 0.52
    assert 0.09 < narrow < 0.11
    assert all("wide" in d for d in decisions if "narrow" in d)


def test_request_id_used_without_trace_id() -> None:
    record = RagRecord(request_id="abc", response="a")
    assert record.sampling_key == "abc"
    assert 0 <= sampling_position("abc") < 1


def test_overrides_by_service_and_route() -> None:
    config = Sampling(
        rate=1.0,
        overrides=[
            SamplingOverride(service="checkout", route="/health", rate=0.0),
            SamplingOverride(route="/health", rate=0.5),
            SamplingOverride(service="batch", rate=0.0),
        ],
    )
    sampler = Sampler(config, {"e": None})
    assert sampler.base_rate("checkout", "/health") == 0.0
    assert sampler.base_rate("search", "/health") == 0.5
    assert sampler.base_rate("batch", "/ask") == 0.0
    assert sampler.base_rate("search", "/ask") == 1.0
    assert not any(sampler.sampled(_record(i, service="batch")) for i in range(200))


def test_priority_records_always_sampled() -> None:
    sampler = Sampler(Sampling(rate=0.0), {"e": 0.1})
    assert sampler.sampled(_record(1, feedback="negative")) == {"e"}
    assert sampler.sampled(_record(2, error=True)) == {"e"}
    assert sampler.sampled(_record(3)) == frozenset()
    off = Sampler(
        Sampling(rate=0.0, always=AlwaysSample(negative_feedback=False, error=False)), {"e": 1}
    )
    assert off.sampled(_record(1, feedback="negative")) == frozenset()


def test_every_record_is_sampled_at_rate_one_and_a_lower_rate_still_hashes() -> None:
    sampler = Sampler(Sampling(rate=1.0), {"local": None, "judge": 0.1})
    decisions = [sampler.sampled(_record(i)) for i in range(5000)]
    assert all("local" in d for d in decisions)
    assert 0.08 < sum("judge" in d for d in decisions) / len(decisions) < 0.12
    everything = Sampler(Sampling(rate=1.0), {"a": None, "b": 1.0})
    assert all(everything.sampled(_record(i)) == {"a", "b"} for i in range(100))
    nothing = Sampler(Sampling(rate=1.0), {"a": 0.0})
    assert not any(nothing.sampled(_record(i)) for i in range(100))


def test_may_sample_is_false_exactly_when_no_service_or_route_samples_the_key() -> None:
    """What the trace id alone decides (the OTLP receivers' triage): a key `may_sample`
    refuses is sampled by no evaluator under any override, and a key it accepts is
    sampled under the rule with the highest rate."""
    config = Sampling(
        rate=0.05,
        overrides=[
            SamplingOverride(service="checkout", rate=0.2),
            SamplingOverride(route="/health", rate=0.0),
        ],
        always=AlwaysSample(error=False, negative_feedback=False),
    )
    sampler = Sampler(config, {"wide": 1.0, "narrow": 0.5})
    places = [("api", "/ask"), ("checkout", "/ask"), ("api", "/health")]
    for i in range(5_000):
        record = _record(i)
        anywhere = [
            sampler.sampled(record.model_copy(update={"service": service, "route": route}))
            for service, route in places
        ]
        assert sampler.may_sample(record.sampling_key) == any(anywhere)
    assert not sampler.samples_every_key
    assert Sampler(
        Sampling(rate=0.0, overrides=[SamplingOverride(service="a", rate=1.0)]), {"e": 1.0}
    ).samples_every_key
    nothing = Sampler(Sampling(rate=0.0), {"e": 1.0})
    assert not any(nothing.may_sample(f"{i:032x}") for i in range(100))


@pytest.mark.parametrize("rate", [0.0, 0.01, 0.3, 1.0])
def test_may_sample_ids_decides_as_may_sample_on_the_hex_ids(rate: float) -> None:
    rng = random.Random(7)
    trace_ids = {rng.randbytes(16) for _ in range(3_000)}
    sampler = Sampler(Sampling(rate=rate), {"wide": 1.0, "narrow": 0.5})
    expected = {t for t in trace_ids if sampler.may_sample(t.hex())}
    assert sampler.may_sample_ids(trace_ids) == expected
    assert 0 < len(expected) < len(trace_ids) or rate in (0.0, 1.0)
