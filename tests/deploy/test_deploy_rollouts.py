"""Rollout gating (deploy/rollouts/): the Argo Rollouts AnalysisTemplate and the Flagger
MetricTemplate validate against their CRDs' OpenAPI schemas (deploy/rollouts/schemas/,
strict: a field the CRD does not declare fails), carry the same query, and that query,
run by `promtool test rules`, tests the sidecar's cohort rule's hypothesis: on a table of
canary and rest counts around where the rule starts to page it answers as the rule decides
(`harness.thresholds.cohort_pages`, itself checked against the sidecar's engine on the same
verdicts), and over synthetic series through the recording rules of
deploy/prometheus/rules.yml it fails a worse canary, passes an equal one and is
inconclusive on too few verdicts."""

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
from harness.thresholds import Figures, cohort_pages, default_rule
from monitor.alerts import AlertEngine
from monitor.component import Evaluated
from monitor.records import RagRecord
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock, question, verdict

ROLLOUTS = DEPLOY / "rollouts"
ARGO = ROLLOUTS / "argo-analysistemplate.yaml"
FLAGGER = ROLLOUTS / "flagger-metrictemplate.yaml"
SCHEMAS = {
    ARGO: ROLLOUTS / "schemas/argo-rollouts-analysistemplate.json",
    FLAGGER: ROLLOUTS / "schemas/flagger-metrictemplate.json",
}
ARGS = {"service": "shop", "canary-version": "v2", "evaluator": "local_groundedness"}
FIGURES = Figures.from_defaults()
EVALUATOR = "local_groundedness"


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


def promtool_tests(tests: list[dict[str, Any]], tmp_path: Path, rule_files: list[str]) -> None:
    path = tmp_path / "rollouts_test.yml"
    path.write_text(
        yaml.safe_dump(
            {"rule_files": rule_files, "evaluation_interval": "1m", "tests": tests},
            sort_keys=False,
        )
    )
    proc = subprocess.run(
        [need("promtool"), "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def gate(canary: tuple[int, int], rest: tuple[int, int]) -> int:
    """What the templates must return for these counts: 1 where the sidecar's cohort rule
    pages the canary, 0 where both sides hold min_samples and it does not, -1 with fewer."""
    if cohort_pages(canary, rest, FIGURES):
        return 1
    enough = FIGURES.cohort_min_samples
    return 0 if canary[0] >= enough and rest[0] >= enough else -1


def both_tools(name: str, inputs: list[dict[str, str]], expected: int, at: str) -> list[Any]:
    tests = []
    for tool, query, value in (
        ("argo", argo_rendered(), expected),
        ("flagger", flagger_rendered(), None if expected == -1 else expected),
    ):
        samples = [] if value is None else [{"labels": "{}", "value": value}]
        tests.append(
            {
                "name": f"{tool}: {name}",
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [{"expr": query, "eval_time": at, "exp_samples": samples}],
            }
        )
    return tests


# (name, canary verdicts a minute, canary defect rate, the templates' result)
CASES = [
    ("a worse canary fails", 20, 0.5, 1),
    ("an equal canary passes", 20, 0.2, 0),
    ("a canary worse by less than half of min_increase passes", 20, 0.21, 0),
    ("too few canary verdicts are inconclusive", 2, 0.9, -1),
]


def test_promtool_runs_the_query_on_synthetic_series(tmp_path: Path) -> None:
    """From the monitor's counters on two replicas through the recording rules of
    rules.yml (group rag-monitor-versions) to the templates' answer."""
    tests = []
    for name, per_minute, rate, expected in CASES:
        # 30 minutes of each: the stable version's 60 a minute at 0.2.
        assert gate((30 * per_minute, round(30 * per_minute * rate)), (1800, 360)) == expected
        inputs = series("v1", 60, 0.2) + series("v2", per_minute, rate)
        tests += both_tools(name, inputs, expected, "40m")
    promtool_tests(tests, tmp_path, [str(DEPLOY / "prometheus/rules.yml")])


def boundary(verdicts: int, rest: tuple[int, int]) -> int | None:
    """The fewest canary defects of `verdicts` at which the cohort rule pages (None: not
    even all of them)."""
    return next(
        (k for k in range(verdicts + 1) if cohort_pages((verdicts, k), rest, FIGURES)), None
    )


def count_table() -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(canary, rest) counts, (verdicts, defects) each: at and one defect short of where the
    cohort rule starts to page, for canaries and rests of several sizes and rates, and the
    edges: a side short of min_samples by one, no defect anywhere, every verdict a defect."""
    least = FIGURES.cohort_min_samples
    rows = []
    for n, rest in [
        (least, (least, 0)),
        (least, (30 * least, 3 * least)),
        (4 * least, (20 * least, 4 * least)),
        (10 * least, (40 * least, 8 * least)),
        (15 * least, (15 * least, 7 * least)),
    ]:
        k = boundary(n, rest)
        assert k is not None and k > 0, (n, rest)
        rows += [((n, k), rest), ((n, k - 1), rest)]
    rows += [
        ((least - 1, least - 1), (10 * least, 0)),
        ((least, least), (least - 1, 0)),
        ((5 * least, 0), (5 * least, 0)),
        ((3 * least, 3 * least), (3 * least, 3 * least)),
    ]
    return rows


def recorded(version: str, samples: int, defects: int) -> list[dict[str, str]]:
    """The recording rules' 30m sums of one version, as promtool's input."""
    labels = f'service="shop",version="{version}",evaluator="local_groundedness"'
    return [
        {
            "series": f"rag_monitor:evaluation_{name}_by_version:increase30m{{{labels}}}",
            "values": f"{value}x5",
        }
        for name, value in (("samples", samples), ("defects", defects))
    ]


def test_the_templates_and_the_cohort_rule_agree_on_a_table_of_counts(tmp_path: Path) -> None:
    """The templates' query, run by promtool on canary and rest counts, gives what the
    sidecar's cohort rule decides on the same counts (the rest split between the stable
    version and records without one, which the rule counts in the rest, never judged)."""
    tests, answers = [], set()
    for (n, k), (m, r) in count_table():
        expected = gate((n, k), (m, r))
        answers.add(expected)
        inputs = recorded("v2", n, k) + recorded("v1", m - m // 3, r - r // 3)
        inputs += recorded("", m // 3, r // 3)
        tests += both_tools(f"canary {k}/{n}, rest {r}/{m}", inputs, expected, "3m")
    assert answers == {1, 0, -1}
    promtool_tests(tests, tmp_path, [])


def sidecar_pages(canary: tuple[int, int], rest: tuple[int, int]) -> bool:
    """Whether the sidecar's own cohort rule, at its defaults, pages version v2 at its first
    evaluation after these verdicts: the canary's, and the rest's split as in the table."""
    rule = default_rule("cohorts", name="canary")
    clock = Clock()
    engine = AlertEngine([rule], create_telemetry(), clock=clock)
    (n, k), (m, r) = canary, rest
    sides = [("v2", n, k), ("v1", m - m // 3, r - r // 3), (None, m // 3, r // 3)]
    for version, verdicts, defects in sides:
        for i in range(verdicts):
            record = RagRecord(
                request_id=f"{version}-{i}",
                service="shop",
                version=version,
                query=question(i),
                response="a",
            )
            engine.emit([Evaluated(record, {EVALUATOR: verdict(EVALUATOR, passed=i >= defects)})])
    clock.now += FIGURES.evaluation_interval_s
    sent = engine.evaluate()
    return any(a.status == "firing" and a.labels.get("cohort") == "v2" for a in sent)


def test_the_table_is_what_the_sidecars_cohort_rule_decides() -> None:
    """`cohort_pages`, which the table above is computed with, decides as the sidecar's
    engine does on the same verdicts (each its own question, without a conversation)."""
    decisions = [(row, cohort_pages(*row, FIGURES)) for row in count_table()]
    assert {pages for _, pages in decisions} == {True, False}
    assert [(row, sidecar_pages(*row)) for row, _ in decisions] == decisions
