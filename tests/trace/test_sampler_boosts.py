"""Boosted sampling (`monitor.boosts`, raised by alert rules): an evaluator's rate on a
service rises to the boost and falls back; the boosted sample is a superset of the base
sample decided on the same position, nothing else changes, and the effective rate is
shown on `rag_monitor_sampling_rate`."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from monitor.boosts import SamplingBoosts
from monitor.config import Sampling, SamplingOverride
from monitor.processors.sampler import Sampled, Sampler, sampling_position
from monitor.processors.sampling_rates import SamplingRateGauge
from monitor.records import RagRecord
from monitor.telemetry import create_telemetry

KEYS = 4_000


def _record(i: int, service: str = "shop", **kw: object) -> RagRecord:
    return RagRecord.model_validate(
        {
            "request_id": f"r{i}",
            "trace_id": f"{i * 7919:032x}",
            "service": service,
            "response": "a",
            **kw,
        }
    )


def _decisions(sampler: Sampler, service: str = "shop") -> list[frozenset[str]]:
    return [sampler.sampled(_record(i, service)) for i in range(KEYS)]


def test_a_boost_samples_a_superset_decided_on_the_same_position() -> None:
    boosts = SamplingBoosts()
    sampler = Sampler(Sampling(rate=0.5), {"judge": 0.1, "local": None}, boosts)
    base = _decisions(sampler)
    other_base = _decisions(sampler, "search")

    boosts.raise_rate("judge", "shop", "rule", 0.3)
    boosted = _decisions(sampler)
    for i, (before, after) in enumerate(zip(base, boosted, strict=True)):
        position = sampling_position(_record(i).sampling_key)
        assert before <= after  # nothing sampled at the base rate is lost
        assert ("judge" in after) == (position < 0.3)  # the boost is the effective rate
        assert ("local" in after) == ("local" in before)  # other evaluators keep theirs
    gained = sum("judge" in a for a in boosted) - sum("judge" in b for b in base)
    assert gained > KEYS * 0.2 * 0.8  # 5 % → 30 %
    # Other services keep their decisions.
    assert _decisions(sampler, "search") == other_base

    boosts.lower_rate("judge", "shop", "rule")
    assert _decisions(sampler) == base


def test_the_largest_rate_wins_and_a_boost_below_the_base_changes_nothing() -> None:
    boosts = SamplingBoosts()
    sampler = Sampler(Sampling(rate=1.0), {"judge": 0.2}, boosts)
    base = _decisions(sampler)
    boosts.raise_rate("judge", "shop", "low", 0.1)
    assert _decisions(sampler) == base
    assert sampler.rate("shop", "judge") == 0.2
    boosts.raise_rate("judge", "shop", "high", 0.6)
    assert sampler.rate("shop", "judge") == 0.6
    boosts.lower_rate("judge", "shop", "high")
    assert _decisions(sampler) == base
    # A boost of an evaluator the sampler does not run is ignored.
    boosts.raise_rate("nobody", "shop", "r", 1.0)
    assert _decisions(sampler) == base


def test_a_boost_follows_service_overrides() -> None:
    config = Sampling(rate=0.5, overrides=[SamplingOverride(service="shop", rate=0.0)])
    boosts = SamplingBoosts()
    sampler = Sampler(config, {"judge": 0.5}, boosts)
    assert not any(_decisions(sampler))
    boosts.raise_rate("judge", "shop", "rule", 0.2)
    sampled = [bool(d) for d in _decisions(sampler)]
    assert 0.15 * KEYS < sum(sampled) < 0.25 * KEYS
    assert sampler.rate("shop", "judge") == 0.2
    assert sampler.rate("search", "judge") == 0.25


def test_triage_keeps_what_a_boost_may_sample_and_lets_it_go_after() -> None:
    boosts = SamplingBoosts()
    sampler = Sampler(Sampling(rate=0.01), {"judge": None}, boosts)
    ids = [i.to_bytes(16, "big") for i in range(1, KEYS)]
    base = sampler.may_sample_ids(ids)
    boosts.raise_rate("judge", "shop", "rule", 0.5)
    boosted = sampler.may_sample_ids(ids)
    assert base < boosted and len(boosted) > 0.4 * len(ids)
    assert all(sampler.may_sample(t.hex()) == (t in boosted) for t in ids)
    assert not sampler.samples_every_key
    boosts.raise_rate("judge", "shop", "rule", 1.0)
    assert sampler.samples_every_key
    boosts.lower_rate("judge", "shop", "rule")
    assert sampler.may_sample_ids(ids) == base and not sampler.samples_every_key


def _beyond(decision: frozenset[str]) -> frozenset[str]:
    assert isinstance(decision, Sampled)
    return decision.beyond_base


def test_a_decision_names_exactly_what_only_the_boost_sampled() -> None:
    boosts = SamplingBoosts()
    sampler = Sampler(Sampling(rate=1.0), {"judge": 0.1, "local": None}, boosts)
    base = _decisions(sampler)
    assert not any(_beyond(d) for d in base)
    boosts.raise_rate("judge", "shop", "rule", 0.4)
    boosted = _decisions(sampler)
    for before, after in zip(base, boosted, strict=True):
        assert _beyond(after) == after - before
    assert sum(bool(_beyond(d)) for d in boosted) > 0.25 * KEYS
    # A record forced by its error status is no boost's; a boost of 1 still hashes.
    forced = next(i for i, d in enumerate(boosted) if _beyond(d))
    assert _beyond(sampler.sampled(_record(forced, error=True))) == frozenset()
    boosts.raise_rate("judge", "shop", "rule", 1.0)
    assert _beyond(sampler.sampled(_record(forced))) == {"judge"}
    assert all(_beyond(d) == {"judge"} - b for d, b in zip(_decisions(sampler), base, strict=True))
    # What was decided stays decided: a boost that ends after the decision does not
    # turn its evaluations into the base sample's.
    decision = sampler.sampled(_record(forced))
    boosts.lower_rate("judge", "shop", "rule")
    assert _beyond(decision) == {"judge"}
    assert _decisions(sampler) == base


def test_the_rate_gauge_shows_the_effective_rate_as_boosts_come_and_go() -> None:
    telemetry = create_telemetry(CollectorRegistry(), allowed_services=["pinned"], max_services=2)
    boosts = SamplingBoosts()
    sampler = Sampler(Sampling(rate=0.5), {"judge": 0.1, "local": None}, boosts)
    SamplingRateGauge(sampler, telemetry, boosts)

    def rate(service: str, evaluator: str) -> float | None:
        return telemetry.registry.get_sample_value(
            "rag_monitor_sampling_rate", {"service": service, "evaluator": evaluator}
        )

    assert rate("pinned", "judge") == 0.05 and rate("pinned", "local") == 0.5
    assert rate("shop", "judge") is None  # no traffic yet: no series
    telemetry.service_cap("shop")
    assert rate("shop", "judge") == 0.05 and rate("shop", "local") == 0.5
    boosts.raise_rate("judge", "shop", "rule", 0.3)
    assert rate("shop", "judge") == 0.3 and rate("shop", "local") == 0.5
    assert rate("pinned", "judge") == 0.05
    # A boost of a service without a label slot makes no series.
    boosts.raise_rate("judge", "ghost", "rule", 0.3)
    assert rate("ghost", "judge") is None
    boosts.lower_rate("judge", "shop", "rule")
    assert rate("shop", "judge") == 0.05


def test_a_change_of_one_boost_costs_one_service_whatever_else_is_boosted() -> None:
    """Raising or lowering a boost prepares nothing where the alert engine makes it (the
    event loop); the changed service's rule of a base rate is prepared on its first
    decision, once, whatever the number of boosted services and override rates."""
    boosts = SamplingBoosts()
    overrides = [SamplingOverride(service=f"o{i}", rate=i / 1000) for i in range(1, 201)]
    sampler = Sampler(Sampling(rate=0.01, overrides=overrides), {"judge": None}, boosts)
    for i in range(50):
        boosts.raise_rate("judge", f"s{i}", "rule", 0.5)
        sampler.sampled(_record(i, f"s{i}"))
    built = sampler.rules_built
    boosts.raise_rate("judge", "s50", "rule", 0.5)
    boosts.raise_rate("judge", "s0", "other rule", 0.8)
    boosts.lower_rate("judge", "s1", "rule")
    assert sampler.rules_built == built
    for i in range(100):
        sampler.sampled(_record(i, "s50"))
        sampler.sampled(_record(i, "s0"))
        sampler.sampled(_record(i, "s1"))
    # One rule each for the two services still boosted, at the one base rate they use.
    assert sampler.rules_built == built + 2
    assert sampler.rate("s50", "judge") == 0.5 and sampler.rate("s0", "judge") == 0.8
    assert sampler.rate("s1", "judge") == 0.01
