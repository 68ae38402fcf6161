"""The pipeline is built from the config as components and what each needs running while
it runs (`monitor/pipeline.py`); the service starts them in an order derived from those
needs and stops them in reverse (`monitor/service.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.component import Component
from monitor.config import Config
from monitor.pipeline import Node, build_pipeline
from monitor.service import start_order


class Idle:
    async def start(self) -> None:
        return None

    async def shutdown(self, deadline_s: float) -> None:
        return None


def _not_ready() -> tuple[bool, str]:
    return False, "not started"


def _config(tmp_path: Path) -> Config:
    return Config.model_validate(
        {
            "pipeline": {"processes": 0},
            "receivers": {
                "otlp": {
                    "grpc": {"endpoint": "127.0.0.1:0"},
                    "http": {"endpoint": "127.0.0.1:0"},
                },
                "kafka": {"enabled": True, "bootstrap_servers": ["127.0.0.1:1"]},
            },
            "exporters": {
                "results_file": str(tmp_path / "results.jsonl"),
                "otlp": {"endpoint": "http://127.0.0.1:1"},
            },
            "alerts": {
                "rules": [{"name": "h", "evaluator": "local_groundedness", "max_defect_rate": 0.5}],
                "webhooks": [{"url": "http://127.0.0.1:1/hook"}],
            },
        }
    )


def test_every_component_starts_after_what_it_needs(tmp_path: Path) -> None:
    pipeline = build_pipeline(_config(tmp_path), _not_ready)
    order = start_order(pipeline.nodes)
    position = {node.name: i for i, node in enumerate(order)}
    assert sorted(position) == sorted(node.name for node in pipeline.nodes)
    for node in order:
        for need in node.needs:
            assert position[need.name] < position[node.name], (need.name, node.name)
    # What the needs give, spelled out: the metrics port first (served while the pipeline
    # drains), the sinks before the evaluation stage, then the trace stage, the receivers.
    names = [node.name for node in order]
    assert names[0] == "metrics port"
    sinks = {"MetricsSink", "ResultsFileSink", "AlertEngine", "OtlpEventsSink"}
    assert sinks <= set(names)
    assert max(position[s] for s in sinks) < position["evaluation stage"]
    assert position["evaluation stage"] < position["trace stage"]
    assert position["trace stage"] < min(position["OTLP receivers"], position["Kafka receiver"])
    assert {type(sink).__name__ for sink in pipeline.sinks} == sinks


def test_without_a_metrics_port_or_receivers_the_order_still_follows_the_needs(
    tmp_path: Path,
) -> None:
    pipeline = build_pipeline(_config(tmp_path), _not_ready, serve_http=False, with_receivers=False)
    names = [node.name for node in start_order(pipeline.nodes)]
    assert "metrics port" not in names and "OTLP receivers" not in names
    assert names[-2:] == ["evaluation stage", "trace stage"]


def test_the_order_is_derived_and_a_cycle_is_refused() -> None:
    def node(name: str, *needs: Node) -> Node:
        component: Component = Idle()
        return Node(name, component, list(needs))

    a = node("a")
    b = node("b", a)
    c = node("c", b, a)
    assert [n.name for n in start_order([c, b, a])] == ["a", "b", "c"]
    a.needs.append(c)
    with pytest.raises(ValueError, match="cycle"):
        start_order([c, b, a])
