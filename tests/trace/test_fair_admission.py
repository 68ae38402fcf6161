"""Fair admission (`monitor/processors/trace/_shares.py`): while the evaluation stage is
full of one service's traces (a flood: an app whose GenAI traces wait for log events that
never come, released all at once), another service's traces are still taken, over the real
OTLP/HTTP receiver; the flooding service is refused (503) as before, and at twice the
stage's bound everything is, before decoding."""

from __future__ import annotations

import asyncio

import httpx

from harness.otlp import CONVENTIONS, WATER, capture, otlp_bytes
from harness.pipeline import RecordingStage, started
from monitor.config import Config
from monitor.processors.trace import FairShares
from monitor.telemetry import Telemetry

CAPACITY = 8
PROTO = {"Content-Type": "application/x-protobuf"}


def _config() -> Config:
    # Each trace goes on as soon as whole (no wait for late spans), to fill the stage.
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"endpoint": "127.0.0.1:0"}}
            },
            "trace_assembly": {"late_spans_wait_s": 0},
        }
    )


def _post(port: int, service: str) -> int:
    _, spans = capture(CONVENTIONS["genai"], WATER, service=service)
    response = httpx.post(
        f"http://127.0.0.1:{port}/v1/traces", content=otlp_bytes(spans), headers=PROTO, timeout=10
    )
    return response.status_code


async def test_a_flood_of_one_service_does_not_refuse_another(telemetry: Telemetry) -> None:
    stage = RecordingStage(capacity=CAPACITY)
    stage.hold()  # evaluation is stuck: it holds what it takes
    shares = FairShares(CAPACITY, max_services=50)
    served = await started(_config(), stage, telemetry, shares=shares)
    try:
        assert served.http is not None and served.http.port is not None
        port = served.http.port
        flood = [await asyncio.to_thread(_post, port, "flood") for _ in range(CAPACITY + 4)]
        assert flood[:CAPACITY] == [200] * CAPACITY and set(flood[CAPACITY:]) == {503}
        # The honest service's 24 traces: taken while it holds less than its share (half
        # of the bound, two services holding), then refused like the flood's.
        honest = [await asyncio.to_thread(_post, port, "shop") for _ in range(24)]
        assert honest[: CAPACITY // 2] == [200] * (CAPACITY // 2), honest
        assert set(honest[CAPACITY // 2 :]) == {503}, honest
        assert await asyncio.to_thread(_post, port, "flood") == 503
        # A third service gets its share too; the stage never holds more than twice its
        # bound, and past that everything is refused before it is decoded.
        # Three services holding: a share is 8 / 3 items, so it takes three.
        third = [await asyncio.to_thread(_post, port, "search") for _ in range(5)]
        assert third[:3] == [200] * 3 and set(third[3:]) == {503}, third
        stage.release()
        taken = CAPACITY + CAPACITY // 2 + 3
        await stage.wait_until(lambda: len(stage.records) >= taken)
        assert len(stage.records) == taken <= 2 * CAPACITY
        # Finished items leave their service's count: the flood is taken again.
        assert await asyncio.to_thread(_post, port, "flood") == 200
    finally:
        await served.shutdown(5)


def test_a_spray_of_service_names_counts_as_one_past_the_bound() -> None:
    shares = FairShares(8, max_services=2)
    shares.hold("shop", None)
    shares.hold("search", None)
    for i in range(3):  # invented names, each new: one service between them
        assert shares.admits({f"spray-{i}"})
        shares.hold(f"spray-{i}", None)
    assert not shares.admits({"spray-9"})  # `other` holds its share (8 / 3 services)
    assert shares.admits({"shop"})


def test_past_twice_the_bound_no_service_is_admitted() -> None:
    shares = FairShares(4, max_services=50)
    done = [shares.hold("flood", None) for _ in range(8)]
    assert shares.exhausted and not shares.admits({"shop"})
    done[0](True)
    assert not shares.exhausted and shares.admits({"shop"}) and not shares.admits({"flood"})
