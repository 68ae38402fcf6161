"""The new user's week with the shipped deploy kit, end to end: a version that answers off
context pages the on-call receiver, as a canary and as a full rollout.

Everything is the kit as shipped, run as the README and deploy/README.md say: `rag-monitor
run --config` on deploy/monitor.yaml (its evaluators and rules), a real Prometheus on
deploy/prometheus/prometheus.yml scraping it and evaluating deploy/prometheus/rules.yml,
and a real Alertmanager on deploy/alertmanager/alertmanager.yml, the one whose alerts
both send to. The user's own edits are what the kit's comments ask for: the addresses
(listeners on port 0, the Alertmanager and scrape targets, each receiver's URL — here a
local webhook per receiver: on-call, the team's queue, the platform) and, to compress a
week into minutes, two documented knobs: `alerts.evaluation_interval_s` and the cohort
rule's `window`. Alertmanager's grouping and every other setting stay as shipped.

Two services roll out a bad version `v2` next to a healthy `v1` (the app sets
`service.version`, README "Alerts"):
- `shop` as a canary beside v1, then to all of its traffic: the canary pages on-call once
  both versions hold the rule's `min_samples` verdicts (README "When a rule can first
  page"), and the page holds after v1's verdicts have left the window (judged against v1 as
  last seen), never resolved;
- `cart` straight to all of its traffic after v1's verdicts left the window (a rollout that
  outran its canary): paged once v2 holds `min_samples`, against v1 as last seen.
The monitor's own alerts and tickets go elsewhere: nothing reaches the team's or the
platform's receiver. Every check waits on a condition; the traffic is paced, nothing sleeps
for a window.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.rag_service import Service, metric, paced
from harness.servers import (
    DEPLOY,
    Webhook,
    alertmanager_of,
    http_json,
    need,
    prometheus,
    rag_monitor,
    webhook,
)
from harness.wait import CONDITION_S, wait_until

pytestmark = pytest.mark.e2e

CANARY = "hallucination_canary"
# The compressed cohort window: v1's verdicts leave it this long after its last ones.
WINDOW = "1m"
HEALTHY_SHARE = 0.2
OFF_CONTEXT = 1.0  # the bad version: every answer off its context
# A little over the rule's min_samples (100, its default), so every phase can be judged
# even if a record or two is not scored.
PER_PHASE = 110
RECEIVERS = ("quality-oncall", "quality-team", "platform")
# How long paced traffic may run before the test fails (only a failing test waits so long).
PACED_S = 3 * CONDITION_S


def monitor_config(path: Path, alertmanager: str) -> None:
    """deploy/monitor.yaml with the user's addresses and the two compressing knobs."""
    config = yaml.safe_load((DEPLOY / "monitor.yaml").read_text())
    config["receivers"]["otlp"] = {
        "grpc": {"enabled": False},
        "http": {"endpoint": "127.0.0.1:0"},
    }
    config["exporters"]["prometheus"]["endpoint"] = "127.0.0.1:0"
    alerts = config["alerts"]
    alerts["alertmanager"]["url"] = alertmanager
    alerts["evaluation_interval_s"] = 1
    (canary,) = [rule for rule in alerts["rules"] if rule["name"] == CANARY]
    assert canary["cohorts"] == {"by": "version"} and canary["severity"] == "page"
    canary["window"] = WINDOW
    path.write_text(yaml.safe_dump(config))


def alertmanager_config(path: Path, hooks: dict[str, Webhook]) -> None:
    """deploy/alertmanager/alertmanager.yml with each receiver's URL the user's own."""
    config = yaml.safe_load((DEPLOY / "alertmanager/alertmanager.yml").read_text())
    assert {r["name"] for r in config["receivers"]} == set(RECEIVERS)
    for receiver in config["receivers"]:
        (hook,) = receiver["webhook_configs"]
        hook["url"] = hooks[receiver["name"]].url
    path.write_text(yaml.safe_dump(config))


def prometheus_config(metrics_port: int, alertmanager: str) -> str:
    """deploy/prometheus/prometheus.yml with its targets the user's own."""
    config = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    config["rule_files"] = [str(DEPLOY / "prometheus" / f) for f in config["rule_files"]]
    (manager,) = config["alerting"]["alertmanagers"]
    manager["static_configs"] = [{"targets": [urllib.parse.urlsplit(alertmanager).netloc]}]
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "rag-monitor"]
    job["static_configs"] = [{"targets": [f"127.0.0.1:{metrics_port}"]}]
    return str(yaml.safe_dump(config))


def test_a_version_off_context_pages_on_call_as_canary_and_as_full_rollout(
    tmp_path: Path,
) -> None:
    need("prometheus")
    need("prometheus-alertmanager")
    with webhook() as oncall, webhook() as team, webhook() as platform:
        hooks = dict(zip(RECEIVERS, (oncall, team, platform), strict=True))
        routing = tmp_path / "alertmanager.yml"
        alertmanager_config(routing, hooks)
        with alertmanager_of(tmp_path, routing) as am:
            config = tmp_path / "monitor.yaml"
            monitor_config(config, am)
            with rag_monitor(tmp_path, config) as ports:
                assert ports.http is not None
                with prometheus(tmp_path, prometheus_config(ports.metrics, am)) as prom:
                    apps = {
                        (service, version): Service(ports.http, version, service=service)
                        for service in ("shop", "cart")
                        for version in ("v1", "v2")
                    }
                    try:
                        _week(apps, ports.metrics, am, prom, hooks)
                    finally:
                        for app in apps.values():
                            app.close()


def _week(
    apps: dict[tuple[str, str], Service],
    port: int,
    am: str,
    prom: str,
    hooks: dict[str, Webhook],
) -> None:
    oncall = hooks["quality-oncall"]

    def send(service: str, version: str, share: float, n: int = PER_PHASE) -> None:
        app = apps[service, version]
        app.send(n, share)
        assert app.provider.force_flush()

    def samples(service: str, version: str) -> float:
        needles = (f'service="{service}"', f'rule="{CANARY}"', f'cohort="{version}"')
        return metric(port, "rag_monitor_alert_cohort_samples", *needles) or 0.0

    def firing(service: str) -> float | None:
        needles = (f'service="{service}"', f'rule="{CANARY}"', 'cohort="v2"')
        return metric(port, "rag_monitor_alert_firing", *needles)

    def paged(service: str) -> list[dict[str, Any]]:
        return [
            a
            for a in oncall.alerts()
            if a["labels"]["alertname"] == CANARY and a["labels"]["service"] == service
        ]

    def held_by_alertmanager(service: str) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode(
            {"filter": [f'alertname="{CANARY}"', f'service="{service}"'], "active": "true"},
            doseq=True,
        )
        return list(http_json(f"{am}/api/v2/alerts?{query}"))

    # Both services healthy on v1.
    for service in ("shop", "cart"):
        send(service, "v1", HEALTHY_SHARE)
    wait_until(
        lambda: samples("shop", "v1") >= 100 and samples("cart", "v1") >= 100,
        CONDITION_S,
        "v1's verdicts in both services' windows",
    )

    # shop's canary: v2 beside v1, every answer off context. The sidecar fires once both
    # hold min_samples; on-call hears of it after Alertmanager's group_wait, while both
    # versions keep serving.
    send("shop", "v1", HEALTHY_SHARE)
    send("shop", "v2", OFF_CONTEXT)
    # Fired as soon as both versions held min_samples: before v2 sent more than PER_PHASE.
    wait_until(lambda: firing("shop") == 1, CONDITION_S, "the sidecar to fire for the canary")
    canary = [(apps["shop", "v1"], HEALTHY_SHARE), (apps["shop", "v2"], OFF_CONTEXT)]
    paced(canary, lambda: paged("shop"), PACED_S, per_s=2)
    (page,) = paged("shop")
    assert page["status"] == "firing"
    assert page["labels"]["cohort"] == "v2" and page["labels"]["severity"] == "page"
    assert page["labels"]["generator"] == "rag-monitor"
    assert int(page["annotations"]["samples"]) >= 100
    assert "for version v2 against" in page["annotations"]["description"]

    # shop rolls v2 out to all of its traffic: past the window, v1 has left it and the
    # page holds, judged against v1 as last seen (re-sent to Alertmanager as such).
    def rolled_out_and_still_paged() -> bool:
        if samples("shop", "v1") > 0:
            return False
        return any(
            "took all of its traffic" in alert["annotations"]["description"]
            for alert in held_by_alertmanager("shop")
        )

    paced([(apps["shop", "v2"], OFF_CONTEXT)], rolled_out_and_still_paged, PACED_S, per_s=4)
    assert firing("shop") == 1
    assert {a["status"] for a in paged("shop")} == {"firing"}

    # cart rolls v2 straight out to all of its traffic, v1's verdicts out of the window by
    # now: paged against v1 as last seen, once v2 holds min_samples.
    wait_until(lambda: samples("cart", "v1") == 0, CONDITION_S, "cart's v1 out of its window")
    send("cart", "v2", OFF_CONTEXT)
    (rollout,) = wait_until(lambda: paged("cart"), CONDITION_S, "cart's rollout page")
    assert rollout["status"] == "firing" and rollout["labels"]["cohort"] == "v2"
    assert 100 <= int(rollout["annotations"]["samples"]) <= PER_PHASE
    assert "before version v2 took all of its traffic" in rollout["annotations"]["description"]

    # Prometheus scrapes the sidecar and evaluates every shipped rule without an error,
    # over the whole week's series. Checked last: the groups evaluated every minute first
    # run up to a minute after Prometheus starts, and by now that minute has passed.
    wait_until(lambda: _rules_evaluated(prom), CONDITION_S, "Prometheus to evaluate the rules")

    # Pages only to on-call: the team's queue and the platform heard nothing.
    elsewhere = {name: hooks[name].alerts() for name in ("quality-team", "platform")}
    assert elsewhere == {"quality-team": [], "platform": []}, json.dumps(elsewhere)[:3000]


def _rules_evaluated(prom: str) -> bool:
    """Prometheus has scraped the sidecar, and evaluated each shipped rule, all healthy."""
    up = http_json(f"{prom}/api/v1/query?query=up")["data"]["result"]
    if not up or up[0]["value"][1] != "1":
        return False
    groups = http_json(f"{prom}/api/v1/rules")["data"]["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert rules, "no rules loaded"
    unhealthy = [(r["name"], r.get("lastError")) for r in rules if r["health"] == "err"]
    assert unhealthy == [], unhealthy
    return all(r["health"] == "ok" for r in rules)
