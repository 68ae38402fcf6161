"""Evidence-driven sampling through the real pipeline: OTLP/HTTP in, trace assembly, the
sampler, a judge (litellm against a scripted OpenAI-compatible server, the only double),
the alert engine and the budget, on an injected clock.

A service sends 60 traces a (fake) minute, ten every ten seconds; the `groundedness` judge
samples 10 % of them and a regression rule on it asks for 50 % while its evidence builds.
The budget admits 20 judge evaluations a minute: room for the base sample, not for the
whole boost. Healthy traffic first (the rule learns its baseline; no boost). Then a rise of
unsupported answers, stopped as soon as the boost starts: the boost comes before any page,
and falls back as the evidence fades, with no page and no resolve. Then a rise that lasts:
the boost starts again before the page, the effective-rate gauge moves, the judge sees
more of the service, as much as the budget leaves beside the base sample (which is judged
whole), the refused ones counted as the boost's; then the service recovers, the alert
resolves and the rate falls back.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace

import aiohttp
import pytest
import pytest_asyncio
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from harness.judge_stub import Received, Reply, StubJudge
from harness.otlp import WATER, Case, asked, emit_plain, otlp_bytes
from harness.wait import wait_until_async
from monitor.alerts import AlertEngine
from monitor.component import Evaluated
from monitor.config import Config
from monitor.processors.sampler import sampling_position
from monitor.receivers.otlp import OtlpReceivers
from monitor.service import Service
from tests.alerts.test_alerts import Clock
from tests.judge.test_judge_evaluators import KEY_ENV, MODEL, SECRET

pytestmark = pytest.mark.asyncio

PER_MINUTE, PER_POST = 60, 10
BASE, BOOST, BUDGET = 0.1, 0.5, 20
RULE = "grounded_regression"
UNSUPPORTED = Case(WATER.query, WATER.docs, "Water boils at 40 degrees on Atlantis.")


class _SeededIds(IdGenerator):
    """Trace ids from a seeded generator: the same sampling positions on every run."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


class _Count:
    """A result sink that counts what reached the sinks and which the judge scored."""

    def __init__(self) -> None:
        self.records = 0
        self.judged: list[str] = []

    async def start(self) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> None:
        for evaluated in batch:
            self.records += 1
            if "groundedness" in evaluated.results:
                self.judged.append(evaluated.record.trace_id or "")

    async def shutdown(self, deadline_s: float) -> None:
        return None


def _verdict(got: Received) -> Reply:
    return Reply(content="Score: 1" if "Atlantis" in got.prompt else "Score: 5")


@pytest_asyncio.fixture
async def stub() -> AsyncIterator[StubJudge]:
    async with StubJudge(_verdict) as server:
        yield server


def _config(stub: StubJudge) -> Config:
    return Config.model_validate(
        {
            "judge": stub.judge_section(MODEL, KEY_ENV, cache_size=0),
            "pipeline": {"processes": 0},
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"endpoint": "127.0.0.1:0"}}
            },
            "budget": {"max_evaluations_per_minute": BUDGET},
            "evaluators": [{"name": "groundedness", "sample_rate": BASE}],
            "alerts": {
                # The test judges after each minute itself; the engine's own loop stays idle.
                "evaluation_interval_s": 300,  # the longest: the test takes less
                "rules": [
                    {
                        "name": RULE,
                        "evaluator": "groundedness",
                        "window": "10m",
                        "min_samples": 20,
                        "min_increase": 0.1,
                        # No season: the test's traffic spans minutes, not days.
                        "baseline": {"window": "3h", "min_samples": 40, "season": "none"},
                        "boost": {"sample_rate": BOOST, "while_p_below": 0.05},
                    }
                ],
            },
        }
    )


class _Scenario:
    def __init__(self, service: Service, sink: _Count, clock: Clock) -> None:
        self.service, self.sink, self.clock = service, sink, clock
        self.sent = 0
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider(
            resource=Resource.create({"service.name": "shop"}), id_generator=_SeededIds(49)
        )
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("shop")
        self.rng = random.Random(7)
        self.asked = 0  # requests sent, each a question of its own
        self.engine = next(s for s in service.pipeline.sinks if isinstance(s, AlertEngine))

    @property
    def url(self) -> str:
        (receivers,) = self.service.receivers
        assert isinstance(receivers, OtlpReceivers) and receivers.http is not None
        return f"http://127.0.0.1:{receivers.http.port}/v1/traces"

    def metric(self, name: str, **labels: str) -> float:
        value = self.service.telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels)
        return value or 0.0

    @property
    def rate(self) -> float:
        return self.metric("sampling_rate", service="shop", evaluator="groundedness")

    @property
    def over_budget(self) -> float:
        return self.metric(
            "sampling_decisions_total",
            service="shop",
            evaluator="groundedness",
            decision="over_budget",
        )

    @property
    def boosted(self) -> bool:
        return self.metric("alert_boost_active", service="shop", rule=RULE) == 1

    @property
    def refused(self) -> float:
        return self.metric("sampling_boost_refused_total", service="shop", evaluator="groundedness")

    @property
    def firing(self) -> bool:
        return self.engine.firing() != []

    async def minute(self, session: aiohttp.ClientSession, unsupported: float) -> Minute:
        """One minute of traffic, `unsupported` of it unsupported answers, all through the
        pipeline, ten traces every ten seconds; then the engine judges."""
        judged_before = len(self.sink.judged)
        over_budget, refused = self.over_budget, self.refused
        ids = []
        for _ in range(PER_MINUTE // PER_POST):
            ids += await self._post(session, unsupported)
            self.clock.now += 60 * PER_POST / PER_MINUTE
        self.engine.evaluate()
        return Minute(
            base={t for t in ids if sampling_position(t) < BASE},
            judged=set(self.sink.judged[judged_before:]),
            over_budget=self.over_budget - over_budget,
            refused=self.refused - refused,
        )

    async def _post(self, session: aiohttp.ClientSession, unsupported: float) -> list[str]:
        self.exporter.clear()
        ids = []
        for _ in range(PER_POST):
            case = UNSUPPORTED if self.rng.random() < unsupported else WATER
            self.asked += 1
            case = replace(case, query=asked(case.query, self.asked))
            ids.append(emit_plain(self.tracer, case, lambda: None))
        async with session.post(
            self.url,
            data=otlp_bytes(self.exporter.get_finished_spans()),
            headers={"Content-Type": "application/x-protobuf"},
        ) as response:
            assert response.status == 200, await response.text()
        self.sent += PER_POST

        def finished() -> bool:
            # A record the budget refused its judge reaches no sink (it has no result).
            unsampled = self.metric("traces_unsampled_total", service="shop")
            return self.sink.records + self.over_budget + unsampled >= self.sent

        await wait_until_async(finished, 30, "the traces through the pipeline")
        return ids


@dataclass(frozen=True)
class Minute:
    """A minute's traces the base rate samples, those the judge scored, and the judge
    evaluations the budget refused (all, and those only a boost sampled)."""

    base: set[str]
    judged: set[str]
    over_budget: float
    refused: float


@pytest.mark.e2e
async def test_a_building_regression_boosts_sampling_within_the_budget_and_it_falls_back(
    stub: StubJudge, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    caplog.set_level(logging.INFO, logger="monitor.alerts")
    sink = _Count()
    clock = Clock()
    # One simulated timeline: the engine's time and the budget's advance together.
    service = Service(
        _config(stub), serve_http=False, extra_sinks=[sink], wall_clock=clock, monotonic_clock=clock
    )
    scenario = _Scenario(service, sink, clock)
    await service.start()
    try:
        async with aiohttp.ClientSession() as session:
            await _run(scenario, session, caplog)
    finally:
        await service.shutdown(30)


async def _run(
    s: _Scenario, session: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    # Healthy: the baseline fills, no boost, the judge sees exactly the base sample.
    for _ in range(25):
        minute = await s.minute(session, unsupported=0.1)
        assert not s.boosted and s.rate == BASE
        assert minute.judged == minute.base
    assert s.metric("alert_samples", service="shop", rule=RULE, window="baseline") >= 40

    # A rise, stopped as soon as the rule asks for more: the boost comes before any page,
    # and goes when the evidence fades, with no page and so no resolve.
    await _until_boosted(s, session, caplog)
    for _ in range(20):
        await s.minute(session, unsupported=0.1)
        assert not s.firing
        if not s.boosted:
            break
    assert not s.boosted and s.rate == BASE
    assert _lines(caplog, "back to its rate") == [
        f"alert {RULE}: evidence faded for shop: groundedness back to its rate"
    ]
    assert not _lines(caplog, "resolved")

    # A rise that lasts: the boost starts again before the page; the judge sees more than
    # the base sample, as much as the budget leaves beside it and never more; the budget's
    # refusals are all the boost's, and the base sample is judged whole.
    await _until_boosted(s, session, caplog)
    boosted = [await s.minute(session, unsupported=0.6) for _ in range(4)]
    for minute in boosted:
        assert minute.base <= minute.judged  # the base sample, whole
        assert minute.judged - minute.base  # and more of the service
        assert len(minute.judged) <= BUDGET
        assert minute.over_budget == minute.refused > 0  # refused: only the boost's
    assert s.firing  # paged, after the boost began
    held = [r.message for r in caplog.records if "is held to the base rate" in r.message]
    assert len(held) == 1, held  # once an hour at most
    assert held[0].startswith(
        f"budget max_evaluations_per_minute: {BUDGET}: the boost of groundedness on service "
        "'shop' is held to the base rate"
    )

    # The service recovers: the alert resolves, the evidence fades, the rate falls back.
    for _ in range(40):
        await s.minute(session, unsupported=0.1)
        if not s.boosted:
            break
    assert not s.boosted and not s.firing, "the boost outlived 40 healthy minutes"
    assert s.rate == BASE
    assert _lines(caplog, "resolved for shop")
    minute = await s.minute(session, unsupported=0.1)
    assert minute.judged == minute.base


async def _until_boosted(
    s: _Scenario, session: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    """Rising minutes until the boost starts, which must come before any page."""
    started = len(_lines(caplog, "sampled at"))
    for _ in range(15):
        await s.minute(session, unsupported=0.6)
        if s.boosted:
            break
        assert not s.firing, "paged before the boost"
    assert s.boosted, "no boost within 15 minutes of the rise"
    assert not s.firing, "the boost started with the page, not before it"
    assert s.rate == BOOST
    lines = _lines(caplog, "sampled at")[started:]
    assert len(lines) == 1 and lines[0].startswith(f"alert {RULE}: evidence building (p = ")
    assert lines[0].endswith(f"for shop: groundedness sampled at {BOOST:g}")


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.message for r in caplog.records if r.levelno == logging.INFO and text in r.message]
