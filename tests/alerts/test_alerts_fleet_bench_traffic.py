"""What `bench/alert_fleet.py` sends (`harness.rag_service.fleet_streams`): the fleet and
the single sidecar get streams its rule can compare. The fleet's counters carry no request,
so no request of the single sidecar may be one asked again (a fingerprint it would judge
with the same question's earlier verdicts); and the replicas' answers are hallucinated
independently, not in step, so that the fleet's stream does not reach Prometheus in clumps
the single sidecar's stream lacks; the single sidecar gets the same answers as the fleet,
so that the two differ in how they read them alone."""

from __future__ import annotations

from harness.rag_answers import Answer
from harness.rag_service import PER_REPLICA_S, Service, fleet_streams, send_second

REQUESTS = 400
SHARE = 0.1
SECONDS = 100


def record(service: Service) -> list[Answer]:
    """What `service` sends from now on, recorded instead of traced."""
    out: list[Answer] = []
    service.request = out.append  # type: ignore[method-assign,assignment]
    return out


def sent(service: Service) -> list[Answer]:
    """What `service` sends for `REQUESTS` requests."""
    out = record(service)
    service.send(REQUESTS, SHARE)
    return out


def test_every_request_is_its_own() -> None:
    replicas, single = fleet_streams([1, 2, 3], 4, seed=0)
    for service in [*replicas, single]:
        questions = [answer.question for answer in sent(service)]
        assert len(set(questions)) == len(questions)


def test_the_single_sidecar_gets_the_fleets_answers() -> None:
    replicas, single = fleet_streams([1, 2, 3], 4, seed=0)
    recorded = {id(s): record(s) for s in [*replicas, single]}
    # Second by second as `Traffic` sends: the replicas' requests in the order they went
    # out against the single sidecar's.
    fleet, alone = [], []
    for second in range(SECONDS):
        send_second(replicas, single, SHARE)
        for service in replicas:
            fleet += recorded[id(service)][second * PER_REPLICA_S :]
        alone += recorded[id(single)][second * PER_REPLICA_S * len(replicas) :]
    assert [a.hallucinated for a in fleet] == [a.hallucinated for a in alone]
    # Not in step: the replicas hallucinate on different requests of their own.
    by_replica = [tuple(a.hallucinated for a in recorded[id(s)]) for s in replicas]
    assert len(set(by_replica)) == len(replicas)
    # At random, at the share asked: within about four binomial errors (0.015 at 0.1).
    assert abs(sum(a.hallucinated for a in alone) / len(alone) - SHARE) < 0.06
