"""Rollout gating (deploy/rollouts/): the Argo Rollouts AnalysisTemplate and the Flagger
MetricTemplate validate against their CRDs' OpenAPI schemas (deploy/rollouts/schemas/,
strict: a field the CRD does not declare fails), carry the same query, and that query,
run by `promtool test rules` over synthetic series with the recording rules of
deploy/prometheus/rules.yml, fails a worse canary, passes an equal one and is inconclusive
on too few verdicts."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from harness.servers import DEPLOY, need

ROLLOUTS = DEPLOY / "rollouts"
ARGO = ROLLOUTS / "argo-analysistemplate.yaml"
FLAGGER = ROLLOUTS / "flagger-metrictemplate.yaml"
SCHEMAS = {
    ARGO: ROLLOUTS / "schemas/argo-rollouts-analysistemplate.json",
    FLAGGER: ROLLOUTS / "schemas/flagger-metrictemplate.json",
}
ARGS = {"service": "shop", "canary-version": "v2", "evaluator": "local_groundedness"}


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def strict(schema: Any) -> Any:
    """The CRD schema as the API server applies it with field validation `Strict`: an
    object that declares its properties admits no other field."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def validator(path: Path) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(strict(json.loads(SCHEMAS[path].read_text())))


@pytest.mark.parametrize("path", [ARGO, FLAGGER], ids=lambda p: p.name)
def test_templates_match_their_crd_schemas(path: Path) -> None:
    doc = load(path)
    errors = sorted(validator(path).iter_errors(doc), key=str)
    assert not errors, "\n".join(f"{e.json_path}: {e.message[:200]}" for e in errors[:10])
    expected = {ARGO: ("argoproj.io/v1alpha1", "AnalysisTemplate")}
    expected[FLAGGER] = ("flagger.app/v1beta1", "MetricTemplate")
    assert (doc["apiVersion"], doc["kind"]) == expected[path]


@pytest.mark.parametrize("path", [ARGO, FLAGGER], ids=lambda p: p.name)
def test_the_schema_check_catches_a_misplaced_or_mistyped_field(path: Path) -> None:
    check = validator(path)
    unknown = copy.deepcopy(load(path))
    unknown["spec"]["querry"] = "up"
    assert not check.is_valid(unknown)
    mistyped = copy.deepcopy(load(path))
    if path == ARGO:
        mistyped["spec"]["metrics"][0]["failureLimit"] = {"n": 0}
    else:
        mistyped["spec"]["provider"]["type"] = "prometheus-operator"
    assert not check.is_valid(mistyped)


def argo_query() -> str:
    doc = load(ARGO)
    (metric,) = doc["spec"]["metrics"]
    assert (metric["successCondition"], metric["failureCondition"]) == (
        "result[0] == 0",
        "result[0] == 1",
    )
    query: str = metric["provider"]["prometheus"]["query"]
    return query


def flagger_query() -> str:
    query: str = load(FLAGGER)["spec"]["query"]
    return query


def test_both_templates_ask_the_same_question() -> None:
    """Flagger's query is Argo's in Flagger's variable syntax, without the `-1` of "too
    few verdicts": Flagger halts on a query that returns nothing."""
    argo = argo_query().rstrip("\n").splitlines()
    assert argo[-1] == "or vector(-1)"
    as_flagger = (
        "\n".join(argo[:-1])
        .replace("{{args.service}}", "{{ variables.service }}")
        .replace("{{args.evaluator}}", "{{ variables.evaluator }}")
        .replace("{{args.canary-version}}", "{{ variables.canary_version }}")
    )
    assert as_flagger == flagger_query().rstrip("\n")


def argo_rendered() -> str:
    query = argo_query()
    for name, value in ARGS.items():
        query = query.replace(f"{{{{args.{name}}}}}", value)
    assert "{{" not in query
    return query


def flagger_rendered() -> str:
    query = flagger_query()
    variables = {"service": "shop", "canary_version": "v2", "evaluator": "local_groundedness"}
    for name, value in variables.items():
        query = query.replace(f"{{{{ variables.{name} }}}}", value)
    assert "{{" not in query
    return query


def series(version: str, per_minute: int, defect_rate: float) -> list[dict[str, str]]:
    """40 minutes of `per_minute` verdicts of one version, `defect_rate` of them failing,
    on two replicas that share them."""
    fails = per_minute * defect_rate / 2
    passes = per_minute * (1 - defect_rate) / 2
    out = []
    for instance in ("a", "b"):
        for outcome, step in (("fail", fails), ("pass", passes)):
            labels = (
                f'instance="{instance}",service="shop",version="{version}",route="/ask",'
                f'evaluator="local_groundedness",outcome="{outcome}"'
            )
            out.append(
                {"series": f"rag_monitor_evaluations_total{{{labels}}}", "values": f"0+{step:g}x40"}
            )
    return out


# (name, canary verdicts a minute, canary defect rate, Argo's result, Flagger's result)
CASES = [
    ("a worse canary fails", 20, 0.5, 1, 1),
    ("an equal canary passes", 20, 0.2, 0, 0),
    ("a slightly worse canary passes (below 0.03)", 20, 0.22, 0, 0),
    ("too few canary verdicts are inconclusive", 2, 0.9, -1, None),
]


def test_promtool_runs_the_query_on_synthetic_series(tmp_path: Path) -> None:
    promtool = need("promtool")
    tests = []
    for name, per_minute, rate, argo, flagger in CASES:
        inputs = series("v1", 60, 0.2) + series("v2", per_minute, rate)
        for tool, query, expected in (
            ("argo", argo_rendered(), argo),
            ("flagger", flagger_rendered(), flagger),
        ):
            samples = [] if expected is None else [{"labels": "{}", "value": expected}]
            tests.append(
                {
                    "name": f"{tool}: {name}",
                    "interval": "1m",
                    "input_series": inputs,
                    "promql_expr_test": [
                        {"expr": query, "eval_time": "40m", "exp_samples": samples}
                    ],
                }
            )
    path = tmp_path / "rollouts_test.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(DEPLOY / "prometheus/rules.yml")],
                "evaluation_interval": "1m",
                "tests": tests,
            },
            sort_keys=False,
        )
    )
    proc = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr
