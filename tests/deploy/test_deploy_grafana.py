"""The Grafana dashboard validates against the JSON schema generated from npm
`@grafana/schema` (grafana/schema/generate.sh), queries only metrics the monitor exports
or the shipped recording rules produce, and has the variables, exemplars and provisioning
an operator needs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from monitor.alerts import AlertEngine
from monitor.alerts.state import StateFile
from monitor.audit.anchors import AnchorCheck, JudgeChanges
from monitor.audit.sink import AuditSink
from monitor.config import AlertBaseline, Budget, ExternalVerdicts, RegressionRule, Sampling
from monitor.config._audit import Audit
from monitor.exporters.prometheus import MetricsSink
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation._external import ExternalScreen
from monitor.processors.sampler import Sampler
from monitor.processors.sampling_rates import SamplingRateGauge
from monitor.telemetry import create_telemetry

GRAFANA = Path(__file__).resolve().parents[2] / "grafana"
DEPLOY = GRAFANA.parent / "deploy"
SCHEMA = json.loads((GRAFANA / "schema/dashboard.schema.json").read_text())
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return [p for p in out if p["type"] != "row"]


def exported_names() -> set[str]:
    names = set()
    # With the metrics components register on their own (the alert engine's, the
    # effective sampling rate's).
    telemetry = create_telemetry()
    AlertEngine(
        [RegressionRule(name="r", evaluator="e", baseline=AlertBaseline())],
        telemetry,
        state_file=StateFile("unused", telemetry),
    )
    SamplingRateGauge(Sampler(Sampling(), {"e": None}), telemetry)
    AuditSink(Audit(evaluator="e", reference="j"), telemetry, lambda record: None)
    changes = JudgeChanges()
    AnchorCheck(
        [],
        [],
        BudgetGate(Budget()),
        telemetry,
        lambda evaluator, figures: None,
        changes=changes,
        every_s=1,
        alpha=0.1,
    )
    MetricsSink(telemetry)
    ExternalScreen(ExternalVerdicts(), telemetry)
    for family in telemetry.registry.collect():
        for suffix in ("", "_total", "_bucket", "_sum", "_count"):
            names.add(family.name + suffix)
    rules = yaml.safe_load((DEPLOY / "prometheus/rules.yml").read_text())
    names.update(r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r)
    return names | {"ALERTS"}


def test_schema_is_generated_and_strict() -> None:
    script = (GRAFANA / "schema/generate.sh").read_text()
    version = re.search(r"^GRAFANA_SCHEMA_VERSION=(\S+)$", script, re.M)
    assert version and f"@grafana/schema@{version.group(1)} " in SCHEMA["$comment"]
    image = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["grafana"]["image"]
    assert image == f"grafana/grafana:{version.group(1)}"  # the schema of the Grafana we ship
    validator = jsonschema.Draft7Validator(SCHEMA)
    assert not validator.is_valid({"title": "no schemaVersion"})
    assert not validator.is_valid(
        {"schemaVersion": 39, "panels": [{"type": "timeseries", "gridpos": {}}]}
    )


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_matches_grafana_schema(path: Path) -> None:
    dashboard = json.loads(path.read_text())
    errors = sorted(jsonschema.Draft7Validator(SCHEMA).iter_errors(dashboard), key=str)
    assert not errors, "\n".join(f"{e.json_path}: {e.message[:200]}" for e in errors[:10])


def test_dashboard_queries_only_known_series() -> None:
    known = exported_names()
    dashboard = json.loads((GRAFANA / "dashboards/rag-monitor.json").read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels(dashboard):
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            for name in re.findall(r"\b(rag_monitor[:_][a-z0-9_:]+|ALERTS)\b", target["expr"]):
                assert name in known, f"{panel['title']}: {name} is neither exported nor recorded"


def test_dashboard_has_variables_exemplars_and_the_key_panels() -> None:
    dashboard = json.loads((GRAFANA / "dashboards/rag-monitor.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert {"service", "route", "evaluator"} <= set(variables)
    assert all(
        variables[v]["multi"] and variables[v]["includeAll"]
        for v in ("service", "route", "evaluator")
    )
    exprs = [t["expr"] for p in panels(dashboard) for t in p["targets"]]
    for var in ("$service", "$route", "$evaluator"):
        assert any(var in e for e in exprs), var
    exemplars = [t["expr"] for p in panels(dashboard) for t in p["targets"] if t.get("exemplar")]
    assert any('outcome="fail"' in e for e in exemplars)
    assert any("safety_evaluations_total" in e for e in exemplars)
    text = " ".join(exprs)
    for needle in (
        "evaluation_defect_rate_by_route",
        "evaluation_score_bucket",
        "safety_defect_rate",
        "evaluation_duration_seconds_bucket",
        "judge_requests_total",
        "judge_tokens_total",
        "judge_cost_usd_total",
        "spans_received_total",
        "dropped_total",
        "kafka_lag",
        "alert_firing",
    ):
        assert needle in text, needle
    assert any(p["type"] == "heatmap" for p in panels(dashboard))


def test_provisioning_points_at_the_dashboards_and_links_exemplars_to_traces() -> None:
    provider = yaml.safe_load((GRAFANA / "provisioning/dashboards/rag-monitor.yaml").read_text())
    path = provider["providers"][0]["options"]["path"]
    grafana = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["grafana"]
    assert f"../grafana/dashboards:{path}:ro" in grafana["volumes"]
    sources = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yaml").read_text())[
        "datasources"
    ]
    (prom,) = sources
    dashboard = json.loads((GRAFANA / "dashboards/rag-monitor.json").read_text())
    ds_var = next(v for v in dashboard["templating"]["list"] if v["name"] == "datasource")
    assert ds_var["current"]["value"] == prom["uid"]
    (dest,) = prom["jsonData"]["exemplarTraceIdDestinations"]
    assert dest["name"] == "trace_id" and "$${__value.raw}" in dest["url"]


def test_dashboard_shows_each_service_against_its_own_baseline() -> None:
    dashboard = json.loads((GRAFANA / "dashboards/rag-monitor.json").read_text())
    fleet = next(p for p in panels(dashboard) if "against its own baseline" in p["title"])
    assert fleet["repeat"] == "service"
    exprs = [t["expr"] for t in fleet["targets"]]
    assert any("evaluation_defect_rate:ratio30m" in e for e in exprs)
    assert any("evaluation_defect_rate:baseline24h" in e for e in exprs)
    sidecar = next(p for p in panels(dashboard) if p["title"].startswith("Sidecar regression"))
    assert any("rag_monitor_defect_rate_baseline" in t["expr"] for t in sidecar["targets"])


def test_dashboard_shows_the_effective_sampling_rate_and_boosts_beside_the_defect_rates() -> None:
    dashboard = json.loads((GRAFANA / "dashboards/rag-monitor.json").read_text())
    rows = [p for p in dashboard["panels"] if p["type"] == "row"]
    quality = next(r for r in rows if r["title"] == "Quality")
    below = min(r["gridPos"]["y"] for r in rows if r["gridPos"]["y"] > quality["gridPos"]["y"])
    sampling = next(p for p in panels(dashboard) if "sampling rate" in p["title"].lower())
    # In the Quality row, with the defect rates.
    assert quality["gridPos"]["y"] < sampling["gridPos"]["y"] < below
    targets = {t["refId"]: t["expr"] for t in sampling["targets"]}
    rate = next(r for r, e in targets.items() if "rag_monitor_sampling_rate" in e)
    boost = next(r for r, e in targets.items() if "rag_monitor_alert_boost_active" in e)
    assert "$service" in targets[rate] and "$evaluator" in targets[rate]
    assert "$service" in targets[boost]
    # Boost periods are drawn as shaded blocks over the rate.
    (override,) = [
        o
        for o in sampling["fieldConfig"]["overrides"]
        if o["matcher"] == {"id": "byFrameRefID", "options": boost}
    ]
    properties = {prop["id"]: prop["value"] for prop in override["properties"]}
    assert properties["custom.fillOpacity"] > 0
    assert sampling["fieldConfig"]["defaults"]["custom"]["lineInterpolation"] == "stepAfter"
    # No two panels overlap.
    cells = set()
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, panel["title"]
                cells.add((x, y))


def test_dashboard_shows_the_remaining_error_budget() -> None:
    dashboard = json.loads((GRAFANA / "dashboards/rag-monitor.json").read_text())
    budget = next(p for p in panels(dashboard) if "error budget left" in p["title"].lower())
    exprs = [t["expr"] for t in budget["targets"]]
    # The sidecar's gauge and the fleet's recording rule, for the services picked.
    assert any(e.startswith("rag_monitor_slo_error_budget_remaining{") for e in exprs)
    assert any(e.startswith("rag_monitor:slo_error_budget_remaining:ratio28d{") for e in exprs)
    assert all('service=~"$service"' in e for e in exprs)
    assert budget["fieldConfig"]["defaults"]["unit"] == "percentunit"
    steps = budget["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["color"] for s in steps][:2] == ["red", "orange"] and steps[1]["value"] == 0
    burn = next(p for p in panels(dashboard) if "burn rate" in p["title"].lower())
    assert any("rag_monitor_slo_burn_rate" in t["expr"] for t in burn["targets"])


def test_dashboard_shows_where_the_firing_alerts_excess_is() -> None:
    dashboard = json.loads((GRAFANA / "dashboards/rag-monitor.json").read_text())
    rows = [p for p in dashboard["panels"] if p["type"] == "row"]
    alerts = next(r for r in rows if r["title"] == "Alerts")
    where = next(
        p for p in panels(dashboard) if "rag_monitor_alert_slice" in p["targets"][0]["expr"]
    )
    assert where["type"] == "table" and where["gridPos"]["y"] > alerts["gridPos"]["y"]
    assert "$service" in where["targets"][0]["expr"]


def test_dashboard_shows_the_audited_estimate_with_its_interval_beside_the_raw_rate() -> None:
    """The audit row, one collapsed row holding its panels: the estimate's three bounds and
    the raw rate on one panel, the evaluator's miss and false-alarm rates on another."""
    dashboard = json.loads((GRAFANA / "dashboards/rag-monitor.json").read_text())
    row = next(p for p in dashboard["panels"] if p["title"].startswith("Audited estimate"))
    exprs = [[t["expr"] for t in panel["targets"]] for panel in row["panels"]]
    estimate = " ".join(exprs[0])
    for bound in ("estimate", "lower", "upper"):
        assert f'bound="{bound}"' in estimate
    assert "rag_monitor_audit_raw_defect_rate" in estimate
    assert "rag_monitor_evaluator_miss_rate" in " ".join(exprs[1])
    assert "rag_monitor_evaluator_false_alarm_rate" in " ".join(exprs[1])
    assert "rag_monitor_judge_changed" in " ".join(exprs[3])


def _rules_text() -> str:
    return (DEPLOY / "prometheus/rules.yml").read_text()


def _alert_threshold(name: str) -> float:
    """The threshold `name` compares its series with, as written in rules.yml (a
    commented-out example too): the first `> number` of its expression."""
    text = _rules_text()
    start = text.index(f"alert: {name}\n")
    end = text.find("alert: ", start + 1)
    found = re.search(r"\}? > \(?([0-9.]+)\)?\s", text[start : end if end > 0 else None])
    assert found, name
    return float(found.group(1))


# Panels that restate an alert rule's threshold: their red threshold line and every
# percentage in their texts are that rule's.
_PANEL_THRESHOLDS = {
    2: "RagHallucinationRateHigh",
    11: "RagSafetyDefectRateHigh",
    71: "RagTrafficUnscored",
    73: "RagEvaluationsSkipped",
}


def test_panel_texts_restate_the_rules_thresholds() -> None:
    from monitor.config import FALSE_PAGE_EVERY, parse_duration
    from monitor.evidence.stats import look_level, one_sided_z

    min_increase = RegressionRule.default("min_increase")
    dashboard = json.loads((GRAFANA / "dashboards/rag-monitor.json").read_text())
    by_id = {p["id"]: p for p in panels(dashboard)}
    rules = _rules_text()
    # z of a look a minute (the groups' interval) at the default false-page budget: the
    # one the rules write, and the one every panel text names.
    z = f"{one_sided_z(look_level(60, parse_duration(FALSE_PAGE_EVERY))):.4f}"
    assert re.findall(r"- ([0-9.]+) \* sqrt", rules) == [z, z]
    assert re.search(r"regression_z\{[^}]*\} > ([0-9.]+)", rules).group(1) == z  # type: ignore[union-attr]
    texts = [p["title"] + " " + p.get("description", "") for p in panels(dashboard)]
    named = [found for text in texts for found in re.findall(r"z [=>] ([0-9.]+)", text)]
    assert named and set(named) == {z}, named
    readme = (GRAFANA / "README.md").read_text()
    for text in [*texts, readme]:
        assert not re.search(r"95\s?% Wilson|Wilson[^.]*95\s?%", text), text

    for panel_id, alert in _PANEL_THRESHOLDS.items():
        panel = by_id[panel_id]
        threshold = _alert_threshold(alert)
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert [s["value"] for s in steps if s["color"] == "red"] == [threshold], panel_id
        text = panel["title"] + " " + panel.get("description", "")
        shown = {float(p) / 100 for p in re.findall(r"([0-9.]+)\s?%", text)}
        assert shown <= {threshold}, (panel_id, shown, threshold)

    # The regression panel: half of min_increase, and the verdicts each window needs.
    regression = by_id[23]["description"]
    half = float(re.search(r"increase30m_vs_24h - ([0-9.]+)\)", rules).group(1))  # type: ignore[union-attr]
    assert half == min_increase / 2
    assert f"min_increase {min_increase:g}" in regression
    current = re.search(r"increase30m >= ([0-9]+)", rules).group(1)  # type: ignore[union-attr]
    baseline = re.search(r"increase24h_offset30m >= ([0-9]+)", rules).group(1)  # type: ignore[union-attr]
    assert f"with {current} current and {baseline} baseline verdicts" in regression


def test_the_last_row_shows_what_was_not_scored() -> None:
    dashboard = json.loads((GRAFANA / "dashboards/rag-monitor.json").read_text())
    rows = [p for p in dashboard["panels"] if p["type"] == "row"]
    assert rows[-1]["title"] == "Not scored"
    after = dashboard["panels"][dashboard["panels"].index(rows[-1]) + 1 :]
    exprs = " ".join(t["expr"] for p in after for t in p["targets"])
    for series in (
        "rag_monitor:unscored:ratio10m",
        "rag_monitor:records_suspect:rate10m",
        "rag_monitor:traces_not_rag:rate10m",
        "rag_monitor:evaluations_skipped:ratio10m",
    ):
        assert series in exprs, series
    assert all("$service" in t["expr"] for p in after for t in p["targets"])


def test_dashboard_shows_where_the_records_context_came_from() -> None:
    dashboard = json.loads((GRAFANA / "dashboards/rag-monitor.json").read_text())
    titles = [p["title"] for p in dashboard["panels"]]
    (shares,) = [p for p in dashboard["panels"] if "context_source" in p["title"]]
    # In the pipeline row, beside the record counts, as shares of all records.
    assert titles.index(shares["title"]) == titles.index("Kafka lag") + 1
    (target,) = shares["targets"]
    assert "rag_monitor_records_context_source_total" in target["expr"]
    assert "by (context_source)" in target["expr"] and "$service" in target["expr"]
    assert shares["fieldConfig"]["defaults"]["unit"] == "percentunit"
