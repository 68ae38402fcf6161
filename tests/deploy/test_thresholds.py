"""One source for thresholds (harness/thresholds.py): every figure deploy/, grafana/ and the
docs restate from a rule's defaults is what the config defaults and the judging code give,
a changed default is one edit and `python -m harness.thresholds`, and a copy the generator
does not know of, or one whose text changed under it, fails by name."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from harness.thresholds import (
    BLOCKS,
    COPIES,
    DASHBOARD,
    KIT,
    RULES,
    RULES_INTERVAL_S,
    CopyMissing,
    Figures,
    main,
    rendered,
    stale,
    strays,
    write,
)
from monitor.config import parse_duration

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = Figures.from_defaults()


def scratch(tmp_path: Path) -> Path:
    """A copy of the kit the generator reads and writes."""
    for name in KIT:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, symlinks=True)
        else:
            shutil.copy(source, tmp_path / name)
    return tmp_path


def test_every_copy_is_what_the_defaults_give() -> None:
    assert stale(DEFAULTS) == [], "run python -m harness.thresholds"
    assert strays(DEFAULTS) == []
    assert main(["--check"]) == 0


def test_a_changed_default_is_one_regeneration(tmp_path: Path) -> None:
    root = scratch(tmp_path)
    rise = DEFAULTS.min_increase + 0.02
    budget = f"{parse_duration(DEFAULTS.false_page_every) / 86_400 + 30:g}d"
    slo = replace(DEFAULTS.slo, objective=DEFAULTS.slo.objective + 0.05)
    safety = replace(DEFAULTS.safety, max_defect_rate=DEFAULTS.safety.max_defect_rate * 2)
    changed = DEFAULTS.but(
        min_increase=rise,
        cohort_min_increase=rise,
        baseline_min_samples=DEFAULTS.baseline_min_samples * 2,
        false_page_every=budget,
        slo=slo,
        safety=safety,
    )
    figures = changed.slots()
    written = write(changed, root)
    # Every file that restates a figure held one of these.
    assert sorted(written) == sorted({c.path for c in COPIES} | {b.path for b in BLOCKS})
    assert stale(changed, root) == [] and strays(changed, root) == []
    assert sorted(stale(DEFAULTS, root)) == sorted(written)
    rules = (root / RULES).read_text()
    assert figures["z"] != DEFAULTS.slots()["z"]
    assert f"increase30m_vs_24h - {figures['half_increase']})" in rules
    assert f"> {figures['z']}\n" in rules
    dashboard = (root / "grafana/dashboards/rag-monitor.json").read_text()
    assert f"one false page per {budget}" in dashboard
    argo = (root / "deploy/rollouts/argo-analysistemplate.yaml").read_text()
    assert f"- {figures['cohort_half_increase']}\n" in argo
    assert f">= {figures['cohort_z']}\n" in argo
    assert f"min_increase ({figures['cohort_half_increase']})" in argo
    assert f"ratio_rate28d / {figures['slo_budget']}\n" in rules
    sloth = (root / "deploy/prometheus/sloth/groundedness-slo.yaml").read_text()
    assert f"at {figures['slo_objective_pct']} a healthy service" in sloth
    assert f"wilson_lower10m > {figures['safety_rate']}\n" in rules
    values = (root / "deploy/helm/rag-monitor/values.yaml").read_text()
    assert f"min_samples: {figures['baseline_min_samples']}}}" in values


def test_the_check_fails_on_a_copy_that_disagrees(tmp_path: Path) -> None:
    root = scratch(tmp_path)
    readme = root / "deploy/README.md"
    text = readme.read_text()
    half = DEFAULTS.slots()["half_increase"]
    assert f"(increase - {half}) / se" in text
    readme.write_text(text.replace(f"(increase - {half}) / se", "(increase - 0.5) / se"))
    assert stale(DEFAULTS, root) == ["deploy/README.md"]
    write(DEFAULTS, root)
    assert readme.read_text() == text


def test_the_threshold_panels_draw_what_their_alert_compares_with(tmp_path: Path) -> None:
    root = scratch(tmp_path)
    rules = root / RULES
    text = rules.read_text()
    assert text.count("rag_monitor:unscored:ratio10m > 0.1\n") == 1
    rules.write_text(text.replace("unscored:ratio10m > 0.1\n", "unscored:ratio10m > 0.25\n"))
    assert stale(DEFAULTS, root) == [DASHBOARD]
    write(DEFAULTS, root)
    dashboard = json.loads((root / DASHBOARD).read_text())
    (panel,) = [p for p in dashboard["panels"] if p["id"] == 71]
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps if s["color"] == "red"] == [0.25]
    assert "RagTrafficUnscored above 25%" in panel["title"]
    assert "above 25% for 30m" in panel["description"]


def test_a_copy_the_generator_does_not_list_is_named(tmp_path: Path) -> None:
    root = scratch(tmp_path)
    notes = root / "grafana/README.md"
    notes.write_text(notes.read_text() + "\nThe regression pages at z > 4.3224.\n")
    (found,) = strays(DEFAULTS, root)
    assert found.startswith("grafana/README.md:") and found.endswith(": 4.3224")


def test_a_copy_reworded_under_the_generator_is_named(tmp_path: Path) -> None:
    root = scratch(tmp_path)
    dashboard = root / "grafana/dashboards/rag-monitor.json"
    dashboard.write_text(dashboard.read_text().replace("Wilson bounds at z = ", "Wilson z = "))
    with pytest.raises(CopyMissing, match=re.escape("grafana/dashboards/rag-monitor.json")):
        rendered(DEFAULTS, root)


def _ranges(group: str) -> set[tuple[str, str]]:
    rules = yaml.safe_load((ROOT / RULES).read_text())
    (found,) = [g for g in rules["groups"] if g["name"] == group]
    return {
        m for r in found["rules"] for m in re.findall(r"\[(\w+)\](?: offset (\w+))?", r["expr"])
    }


def test_the_rules_windows_are_the_rules_defaults() -> None:
    """The windows are in the recording rules' names too (`increase30m`): checked, not
    written, so a changed window renames them by hand."""
    regression = _ranges("rag-monitor-regressions")
    window, baseline = DEFAULTS.regression_window, DEFAULTS.baseline_window
    assert regression == {(window, ""), (baseline, window)}
    assert _ranges("rag-monitor-versions") == {(DEFAULTS.cohort_window, "")}
    assert parse_duration(DEFAULTS.cohort_window) == parse_duration(window)


def test_the_rules_look_as_often_as_their_z_assumes() -> None:
    groups = yaml.safe_load((ROOT / RULES).read_text())["groups"]
    with_z = [g for g in groups if DEFAULTS.slots()["z"] in yaml.safe_dump(g)]
    assert {g["name"] for g in with_z} == {"rag-monitor-defect-rates", "rag-monitor-regressions"}
    assert all(parse_duration(g["interval"]) == RULES_INTERVAL_S for g in with_z)
