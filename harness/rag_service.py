"""A RAG service driven through the OpenTelemetry SDK for the alerting end-to-end tests:
one trace per request (OpenInference root, retriever and LLM spans) sent over OTLP/HTTP to
a `rag-monitor run` process, answers drawn from harness/rag_answers.py; plus the monitor's
config for those tests and a /metrics reader."""

from __future__ import annotations

import json
import math
import random
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from harness.otlp import asked
from harness.rag_answers import Answer, answers

# Requests a second while traffic is paced: enough that the rule's windows reach their
# default min_samples soon, little enough for a loaded 2-core machine to evaluate.
PER_S = 24


class Service:
    """The RAG service `service`: one trace per request (root, retriever, LLM spans) via
    the SDK, on `route`; with `own_wording`, each request of `send` asks its question in
    words of its own (`harness.otlp.asked`), so that no two are the same request to the
    alert rules; with `rng`, each request of `send` is hallucinated at random, with
    probability `share` (without, `share` of them are, evenly spread)."""

    def __init__(
        self,
        otlp_http_port: int,
        version: str | None = None,
        route: str = "/ask",
        service: str = "shop",
        own_wording: bool = False,
        rng: random.Random | None = None,
    ) -> None:
        attributes = {"service.name": service}
        if version is not None:
            attributes["service.version"] = version
        self.provider = TracerProvider(resource=Resource.create(attributes))
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{otlp_http_port}/v1/traces")
        self.provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=8192))
        self.tracer = self.provider.get_tracer("shop")
        pool = answers()
        self.faithful = [a for a in pool if not a.hallucinated]
        self.hallucinated = [a for a in pool if a.hallucinated]
        self.sent = 0
        self.route = route
        self.own_wording = own_wording
        self.rng = rng

    def request(self, item: Answer) -> None:
        with self.tracer.start_as_current_span(
            "rag.request",
            attributes={
                "openinference.span.kind": "CHAIN",
                "http.route": self.route,
                "input.value": item.question,
            },
        ) as root:
            documents: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
            for i, text in enumerate(item.context):
                documents[f"retrieval.documents.{i}.document.id"] = f"kb/{i}.md"
                documents[f"retrieval.documents.{i}.document.content"] = text
            with self.tracer.start_as_current_span(
                "retrieve", attributes={**documents, "input.value": item.question}
            ):
                pass
            with self.tracer.start_as_current_span(
                "generate",
                attributes={
                    "openinference.span.kind": "LLM",
                    "input.value": item.question,
                    "output.value": item.answer,
                },
            ):
                pass
            root.set_attribute("output.value", item.answer)

    def traffic(self, share: float, until: Any, within_s: float) -> None:
        """Sends `PER_S` requests a second, `share` of them hallucinated (evenly spread),
        until `until()` is true; fails after `within_s` seconds."""
        paced([(self, share)], until, within_s)

    def send(self, n: int, share: float) -> None:
        """`n` requests at once, `share` of them hallucinated (evenly spread, or each at
        random with `rng`)."""
        for _ in range(n):
            i = self.sent
            self.sent += 1
            if self.rng is not None:
                hallucinated = self.rng.random() < share
            else:
                hallucinated = math.floor((i + 1) * share) > math.floor(i * share)
            pool = self.hallucinated if hallucinated else self.faithful
            item = pool[i % len(pool)]
            if self.own_wording:
                item = replace(item, question=asked(item.question, i))
            self.request(item)

    def close(self) -> None:
        self.provider.shutdown()


def paced(
    streams: list[tuple[Service, float]], until: Any, within_s: float, per_s: int = PER_S
) -> None:
    """Each service of `streams` sends `per_s` requests a second, its share of them
    hallucinated, until `until()` is true; fails after `within_s` seconds."""
    start = time.monotonic()
    tick = start
    while not until():
        assert time.monotonic() - start < within_s, f"not within {within_s} s"
        for service, share in streams:
            service.send(max(1, per_s // 2), share)
        tick += 0.5  # pacing the traffic, not waiting for a result
        time.sleep(max(0.0, tick - time.monotonic()))


def metric(port: int, name: str, *needles: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and all(n in line for n in needles):
            return float(line.rsplit(" ", 1)[1])
    return None


def write_config(
    config: Path,
    alerts: dict[str, Any],
    metrics_port: int = 0,
    processes: int | None = None,
    evaluator: dict[str, Any] | None = None,
) -> None:
    """The monitor the alerting tests run: OTLP/HTTP in (on a port it chooses), metrics
    out (on `metrics_port`, 0: one it chooses), `local_groundedness` (`evaluator`: its
    entry, when given), and `alerts` (`processes`: `pipeline.processes`, when given)."""
    settings: dict[str, Any] = {
        "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"endpoint": "127.0.0.1:0"}}},
        "exporters": {"prometheus": {"endpoint": f"127.0.0.1:{metrics_port}"}},
        "evaluators": [evaluator or {"name": "local_groundedness"}],
        "alerts": alerts,
    }
    if processes is not None:
        settings["pipeline"] = {"processes": processes}
    config.write_text(yaml.safe_dump(settings))


# The regression rule the fleet tests and `bench/alert_fleet.py` run: short windows, so a
# fleet of paced test traffic fills its baseline in a minute.
FLEET_RULE: dict[str, Any] = {
    "name": "fleet_regression",
    "evaluator": "local_groundedness",
    "baseline": {"window": "60s", "min_samples": 150},
    "window": "15s",
    "min_samples": 20,
    "min_increase": 0.1,
    "false_page_every": "1h",
}


def scrape_config(ports: list[int]) -> str:
    """A Prometheus config scraping the monitors on `ports` every second, as job
    `rag-monitor`."""
    return yaml.safe_dump(
        {
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "rag-monitor",
                    "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}],
                }
            ],
        }
    )


def scrape_targets_config(targets: Path) -> str:
    """A Prometheus config scraping, every second as job `rag-monitor`, the monitors the
    file `targets` names (`write_targets`): Prometheus follows the file as it changes, so
    it can start before the monitors have bound their ports."""
    return yaml.safe_dump(
        {
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [
                {"job_name": "rag-monitor", "file_sd_configs": [{"files": [str(targets)]}]}
            ],
        }
    )


def write_targets(targets: Path, ports: list[int]) -> None:
    """The monitors on `ports` as `scrape_targets_config`'s file, replaced whole (Prometheus
    never reads half of it)."""
    partial = targets.with_suffix(".partial")
    partial.write_text(json.dumps([{"targets": [f"127.0.0.1:{p}" for p in ports]}]))
    partial.replace(targets)


# The fleet bench's traffic (bench/alert_fleet.py): what it sends is tested on its own.
PER_REPLICA_S = 4  # requests a second to each replica; the single sidecar gets all of them
HEALTHY_SHARE = 0.1


class Traffic:
    """Paced requests in a thread of their own (`bench/alert_fleet.py`): each second
    `PER_REPLICA_S` to every replica and as many as all of them together to the single
    sidecar, `share` hallucinated."""

    def __init__(self, replicas: list[Service], single: Service) -> None:
        self.replicas = replicas
        self.single = single
        self.share = HEALTHY_SHARE
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        tick = time.monotonic()
        while not self._stop.is_set():
            send_second(self.replicas, self.single, self.share)
            for service in [*self.replicas, self.single]:
                service.provider.force_flush()
            tick += 1.0
            self._stop.wait(max(0.0, tick - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def send_second(replicas: list[Service], single: Service, share: float) -> None:
    """One second of `Traffic`: `PER_REPLICA_S` requests to each replica in turn, then as
    many as all of them together to the single sidecar, `share` hallucinated."""
    for service in replicas:
        service.send(PER_REPLICA_S, share)
    single.send(PER_REPLICA_S * len(replicas), share)


def fleet_streams(
    replica_ports: list[int], single_port: int, seed: int
) -> tuple[list[Service], Service]:
    """The services that send to the replicas (on their OTLP/HTTP ports) and to the single
    sidecar. Every request is worded as its own (`harness.otlp.asked`) and hallucinated at
    random: the fleet's counters carry no request, so the single sidecar must not judge the
    pool's few questions as requests asked again, whose verdicts it predicts one by one;
    and answers hallucinated in step across the replicas (or evenly spread, then read a
    scrape early or late) reach the fleet in clumps the single sidecar's stream does not
    have, which the rule measures as dispersion. The replicas draw from one generator, the
    single sidecar from another of the same seed: sent as `send_second` sends, the single
    sidecar's answers are the fleet's."""
    fleet = random.Random(seed)
    replicas = [Service(port, own_wording=True, rng=fleet) for port in replica_ports]
    single = Service(single_port, own_wording=True, rng=random.Random(seed))
    return replicas, single
