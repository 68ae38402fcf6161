"""End to end: a page that says where, through real OTLP traffic and a real Alertmanager.

A real `rag-monitor run` (the embedded `local_groundedness` at its default threshold, a
regression rule with the windows shortened to 30 s current and 3 min baseline, their
min_samples to 50 and 200, judged every second, every other setting at its default, `alerts.trace_url` and
`exporters.results_file` set) takes RAG traces from the OpenTelemetry SDK over OTLP/HTTP on
two routes, `/ask` and `/chat`, at the same hallucinated share; then every `/chat` answer is
hallucinated. The page
that reaches the webhook through Alertmanager names `route=/chat`, lists failing trace ids
that are in the results file with their links, and `GET /alerts` on the metrics port says
the same. The slice reaches the pager as the page's `Where` alert, a notification of its
own (named with the page, or later when the page came before the routes were told
apart). Every check waits on a condition; the traffic is paced in real time (a separate
process cannot take an injected clock).

This test is wiring: a rise that large is told apart at once. How often and how soon a
page names the right slice of a smaller rise, and names none of an even one, is
`bench/alert_attribution.py`'s, on simulated time.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.rag_service import PER_S, Service, metric
from harness.servers import alertmanager, need, rag_monitor, webhook
from harness.wait import wait_until

pytestmark = pytest.mark.e2e

RULE = "hallucination_regression"
HEALTHY_SHARE = 0.2
TRACE_URL = "http://tempo.example:3200/trace/{trace_id}"


def test_a_page_names_the_route_that_carries_the_rise_with_its_traces(tmp_path: Path) -> None:
    need("prometheus-alertmanager")
    config = tmp_path / "monitor.yaml"
    results = tmp_path / "results.jsonl"
    with webhook() as hook, alertmanager(tmp_path, hook.url) as am:
        config.write_text(
            yaml.safe_dump(
                {
                    "receivers": {
                        "otlp": {"grpc": {"enabled": False}, "http": {"endpoint": "127.0.0.1:0"}}
                    },
                    "exporters": {
                        "prometheus": {"endpoint": "127.0.0.1:0"},
                        "results_file": str(results),
                    },
                    "evaluators": [{"name": "local_groundedness"}],
                    "alerts": {
                        "alertmanager": {"url": am},
                        "evaluation_interval_s": 1,
                        "trace_url": TRACE_URL,
                        "rules": [
                            {
                                "name": RULE,
                                "evaluator": "local_groundedness",
                                "window": "30s",
                                "min_samples": 50,
                                "baseline": {"window": "3m", "min_samples": 200},
                                "severity": "page",
                            }
                        ],
                    },
                }
            )
        )
        with rag_monitor(tmp_path, config) as ports:
            assert ports.http is not None
            ask, chat = Service(ports.http, route="/ask"), Service(ports.http, route="/chat")
            try:
                _scenario(ask, chat, hook, ports.metrics, results)
            finally:
                ask.close()
                chat.close()


def _scenario(ask: Service, chat: Service, hook: Any, port: int, results: Path) -> None:
    def samples(window: str) -> float:
        return metric(port, "rag_monitor_alert_samples", f'window="{window}"') or 0.0

    def pages() -> list[dict[str, Any]]:
        return [
            a
            for a in hook.alerts()
            if a["labels"].get("alertname") == RULE and a["status"] == "firing"
        ]

    def traffic(chat_share: float, until: Any, within_s: float) -> None:
        """`PER_S` requests a second, half on each route, until `until()`."""
        start = tick = time.monotonic()
        while not until():
            assert time.monotonic() - start < within_s, f"not within {within_s} s"
            ask.send(PER_S // 4, HEALTHY_SHARE)
            chat.send(PER_S // 4, chat_share)
            tick += 0.5  # pacing the traffic, not waiting for a result
            time.sleep(max(0.0, tick - time.monotonic()))

    # The same share on both routes until the rule can judge: quiet.
    traffic(HEALTHY_SHARE, lambda: samples("baseline") >= 200 and samples("current") >= 50, 300)
    assert pages() == []

    # Every /chat answer hallucinated: the page says where. It may come on
    # the rise's first verdicts, before the routes are told apart at the rule's level; it
    # then names no slice (never another), and the alert names /chat once they are.
    traffic(1.0, lambda: bool(pages()), 180)
    page = pages()[0]
    notes = page["annotations"]
    assert notes.get("slice") in (None, "route=/chat"), notes["where"]
    named_now = notes.get("slice") == "route=/chat"
    if named_now:
        assert notes["where"].startswith("route /chat: ")
    ids = notes["trace_ids"].split()
    assert 1 <= len(ids) <= 5
    assert notes["trace_urls"].split() == [TRACE_URL.replace("{trace_id}", i) for i in ids]

    # The traces it lists are in the results file, failing (on /chat when it names it).
    def listed() -> dict[str, dict[str, Any]]:
        lines = [json.loads(line) for line in results.read_text().splitlines() if line]
        return {line["trace_id"]: line for line in lines if line["trace_id"] in ids}

    wait_until(lambda: len(listed()) == len(ids), 30, "the listed traces' results lines")
    for line in listed().values():
        assert line["results"]["local_groundedness"]["passed"] is False
        assert line["route"] == "/chat" or not named_now

    # GET /alerts on the metrics port lists the alert with its attribution: /chat, with
    # the rise's evidence.
    def firing() -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/alerts", timeout=5) as resp:
            body = json.loads(resp.read())
        (alert,) = [a for a in body["alerts"] if a["rule"] == RULE]
        return dict(alert)

    def names_chat() -> bool:
        slices = firing()["attribution"]["slices"]
        return bool(slices) and (slices[0]["dimension"], slices[0]["value"]) == ("route", "/chat")

    traffic(1.0, names_chat, 120)
    alert = firing()
    assert all(
        t["url"].startswith("http://tempo.example:3200/trace/")
        for t in alert["attribution"]["traces"]
    )

    # The pager hears of the slice: Alertmanager does not notify for changed annotations,
    # so the slice comes as the page's `Where` alert, a notification of its own, with the
    # page's labels and failing /chat traces that are in the results file.
    def wheres() -> list[dict[str, Any]]:
        return [
            a
            for a in hook.alerts()
            if a["labels"].get("alertname") == RULE + "_where" and a["status"] == "firing"
        ]

    traffic(1.0, lambda: bool(wheres()), 60)
    where = wheres()[0]
    assert where["labels"] == {
        **page["labels"],
        "alertname": RULE + "_where",
        "dimension": "route",
        "value": "/chat",
    }
    assert where["annotations"]["slice"] == "route=/chat"
    assert where["annotations"]["page"] == RULE
    ids = where["annotations"]["trace_ids"].split()
    assert 1 <= len(ids) <= 5
    wait_until(lambda: len(listed()) == len(ids), 30, "the Where alert's traces' results lines")
    for line in listed().values():
        assert line["results"]["local_groundedness"]["passed"] is False
        assert line["route"] == "/chat"
