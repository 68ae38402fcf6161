"""Kubernetes: the Helm chart and the plain manifests, rendered and schema-checked.

The chart is rendered by Helm's own engine (`helm-python-sdk`: Helm's Go SDK behind a C
ABI, no cluster and no network) and linted; every rendered object is validated against the
Kubernetes OpenAPI schemas of the newest version `kubernetes-validate` ships (strict: no
unknown fields), and the Prometheus Operator objects (PodMonitor, PrometheusRule) against
the models generated from the operator's CRDs (`cloudcoil-models-prometheus-operator`;
strictness by round trip: a field the CRD does not know is dropped and the comparison
fails). The monitor config each rendering carries must load with the monitor's own loader.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import shutil
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from harness.servers import DEPLOY
from monitor.config import load_config
from monitor.evaluators.registry import check_evaluators

helm = pytest.importorskip("helm_python", reason="pip install helm-python-sdk")
kubernetes_validate = pytest.importorskip("kubernetes_validate")
# The operator's models take seconds to import, and every pytest worker collects this file:
# only a test that validates an operator object imports them (`_operator`).
OPERATOR = "cloudcoil.models.prometheus_operator.v1"
try:
    importlib.metadata.version("cloudcoil-models-prometheus-operator")
except importlib.metadata.PackageNotFoundError:
    pytest.skip("pip install cloudcoil-models-prometheus-operator", allow_module_level=True)

CHART = DEPLOY / "helm" / "rag-monitor"
EXAMPLE = DEPLOY / "helm" / "examples" / "rag-service"
K8S_VERSION = kubernetes_validate.latest_version()


def render(chart: Path, values: dict[str, Any] | None = None, release: str = "demo") -> list[Any]:
    with helm.Chart.load(str(chart)) as loaded:
        out = loaded.render(values or {}, name=release, namespace="prod")
    docs = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def ci_values(name: str) -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((CHART / "ci" / f"{name}-values.yaml").read_text())
    return values


def validate(doc: dict[str, Any]) -> None:
    """Schema-check one object: core kinds by OpenAPI schema, operator kinds by CRD model."""
    if doc["apiVersion"] == "monitoring.coreos.com/v1":
        model = getattr(_operator(), doc["kind"])
        again = model.model_validate(doc).model_dump(mode="json", by_alias=True, exclude_unset=True)
        assert again == doc, f"{doc['kind']} has fields its CRD does not know"
        return
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@cache
def _operator() -> ModuleType:
    return importlib.import_module(OPERATOR)


def by_kind(docs: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for doc in docs:
        out.setdefault(doc["kind"], []).append(doc)
    return out


def pod_spec(deployment: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def monitor_config(configmap: dict[str, Any], tmp: Path) -> Any:
    path = tmp / "config.yaml"
    path.write_text(configmap["data"]["config.yaml"])
    config = load_config(path, environ={})
    check_evaluators(config)
    return config


@pytest.fixture(scope="module")
def app_chart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The example app chart with rag-monitor vendored into charts/, as
    `helm dependency update` leaves it."""
    root = tmp_path_factory.mktemp("charts") / "rag-service"
    shutil.copytree(EXAMPLE, root, symlinks=False)
    shutil.copytree(CHART, root / "charts" / "rag-monitor", symlinks=False)
    yield root


def test_chart_lints_clean() -> None:
    report = helm.lint(str(CHART), strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("values", ["default", "sidecar", "standalone"])
def test_every_rendered_object_passes_its_schema(values: str, tmp_path: Path) -> None:
    docs = render(CHART, None if values == "default" else ci_values(values))
    assert docs
    for doc in docs:
        validate(doc)
    kinds = by_kind(docs)
    assert set(kinds) >= {"ConfigMap", "PodMonitor", "PrometheusRule"}
    monitor_config(kinds["ConfigMap"][0], tmp_path)


def test_sidecar_mode_adds_a_native_sidecar_to_the_apps_pod(
    app_chart: Path, tmp_path: Path
) -> None:
    docs = render(app_chart, release="shop")
    for doc in docs:
        validate(doc)
    kinds = by_kind(docs)
    (app,) = kinds["Deployment"]
    (configmap,) = kinds["ConfigMap"]
    spec = pod_spec(app)
    (sidecar,) = spec["initContainers"]
    assert sidecar["name"] == "rag-monitor" and sidecar["restartPolicy"] == "Always"
    assert sidecar["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert sidecar["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert sidecar["image"] == "registry.example.com/rag-monitor:0.1.0"
    # The app talks to the sidecar over loopback, where the monitor listens.
    config = monitor_config(configmap, tmp_path)
    (app_container,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in app_container["env"]}
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"].endswith(config.receivers.otlp.grpc.endpoint)
    assert config.receivers.otlp.grpc.endpoint.startswith("127.0.0.1:")
    # The config volume is the release's ConfigMap, mounted where the args point.
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["rag-monitor-config"]["configMap"]["name"] == configmap["metadata"]["name"]
    mounts = {m["name"]: m["mountPath"] for m in sidecar["volumeMounts"]}
    assert sidecar["args"][-1].startswith(mounts["rag-monitor-config"])
    # The judge key: existing Secret -> env var -> judge.api_key_env.
    (key,) = [e for e in sidecar["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    assert key["valueFrom"]["secretKeyRef"] == {"name": "rag-monitor-judge", "key": "api-key"}
    assert config.judge.api_key_env == key["name"]
    # Drain before the kill: the sidecar stops after the app, within the grace period.
    assert config.pipeline.shutdown_timeout_s < spec["terminationGracePeriodSeconds"]
    # Scraping: the PodMonitor selects this release's pods and the port the sidecar names.
    (podmonitor,) = kinds["PodMonitor"]
    labels = spec and app["spec"]["template"]["metadata"]["labels"]
    selector = podmonitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    ports = {p["name"] for p in sidecar["ports"]}
    assert podmonitor["spec"]["podMetricsEndpoints"][0]["port"] in ports
    assert "rag-monitor" in podmonitor["metadata"]["name"]  # rules match job=~".*rag-monitor.*"
    annotations = app["spec"]["template"]["metadata"]["annotations"]
    assert annotations["checksum/rag-monitor-config"]


def test_standalone_mode_is_a_kafka_consumer_group(tmp_path: Path) -> None:
    docs = render(CHART, ci_values("standalone"))
    kinds = by_kind(docs)
    (deployment,) = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    spec = pod_spec(deployment)
    assert "initContainers" not in spec
    (container,) = spec["containers"]
    assert container["name"] == "rag-monitor" and "restartPolicy" not in container
    config = monitor_config(kinds["ConfigMap"][0], tmp_path)
    assert config.receivers.kafka.enabled and config.receivers.kafka.group_id == "rag-monitor"
    selector = kinds["PodMonitor"][0]["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_prometheus_rule_carries_the_shipped_rules() -> None:
    (rule,) = by_kind(render(CHART))["PrometheusRule"]
    shipped = yaml.safe_load((DEPLOY / "prometheus" / "rules.yml").read_text())
    assert rule["spec"]["groups"] == shipped["groups"]


def test_worker_processes_follow_the_cpu_limit() -> None:
    (deployment,) = by_kind(render(CHART, {"mode": "standalone"}))["Deployment"]
    (container,) = pod_spec(deployment)["containers"]
    env = {e["name"]: e for e in container["env"]}
    ref = env["RAG_MONITOR_PIPELINE__PROCESSES"]["valueFrom"]["resourceFieldRef"]
    assert ref == {"containerName": "rag-monitor", "resource": "limits.cpu", "divisor": "1"}
    assert container["resources"]["limits"]["cpu"]
    values = {"pipeline": {"processesFromCpuLimit": False}, "mode": "standalone"}
    (off,) = by_kind(render(CHART, values))["Deployment"]
    assert "env" not in pod_spec(off)["containers"][0]


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"mode": "daemonset"}, "/mode"),
        ({"judge": {"envName": "RAG_MONITOR_JUDGE_KEY"}}, "/judge/envName"),  # a config override
        ({"podMonitor": {"interval": 15}}, "/podMonitor/interval"),
        ({"replicaz": 2}, "replicaz"),
        ({"image": {"extras": ["judge"]}}, "/image/extras/0"),
    ],
)
def test_values_schema_rejects_bad_values(values: dict[str, Any], where: str) -> None:
    with pytest.raises(helm.HelmError, match=where):
        render(CHART, values)


def test_the_chart_refuses_a_config_its_image_cannot_serve() -> None:
    """Each key that needs an extra the image lacks is named, with the extra and the build
    argument that adds it; the same config renders once image.extras lists them."""
    config = {
        "receivers": {"kafka": {"enabled": True, "bootstrap_servers": ["kafka:9092"]}},
        "redaction": {"enabled": True},
        "judge": {"model": "openai/gpt-4o-mini"},
        "evaluators": [{"name": "local_groundedness", "second_stage": True}, {"name": "f1"}],
    }
    with pytest.raises(helm.HelmError) as refused:
        render(CHART, {"config": config})
    needed = {
        "config.evaluators.0.second_stage: the second stage needs the second-stage extra",
        "config.redaction.detectors: the phone detector needs the redaction extra",
        "config.receivers.kafka.enabled: the Kafka receiver needs the kafka extra",
    }
    # One line per key (the first behind Helm's "execution error at ...: ").
    lines = [line[line.index("config.") :] for line in str(refused.value).splitlines()]
    assert {line.split(", which")[0] for line in lines} == needed
    assert "--build-arg EXTRAS=judges,kafka" in str(refused.value)
    assert "evaluators.1" not in str(refused.value)  # f1 is local
    judge = {"config": {"judge": config["judge"], "evaluators": [{"name": "groundedness"}]}}
    with pytest.raises(helm.HelmError, match="groundedness, an LLM judge, needs the judges"):
        render(CHART, {**judge, "image": {"extras": []}})
    assert render(CHART, judge)  # the default image carries the judges
    extras = ["judges", "second-stage", "redaction", "kafka"]
    assert render(CHART, {"config": config, "image": {"extras": extras}})
    assert render(CHART, {"config": config, "image": {"extras": ["all"]}})


def test_the_chart_and_the_image_default_to_the_same_extras() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    (default,) = re.findall(r"^ARG EXTRAS=(\S*)$", dockerfile, re.M)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["extras"] == default.split(",") == ["judges"]


@pytest.mark.parametrize("path", sorted((DEPLOY / "kubernetes").glob("*.yaml")))
def test_plain_manifests_pass_their_schemas(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] == "Kustomization":
            continue
        validate(doc)


def test_plain_manifests_run_the_monitor_as_a_native_sidecar() -> None:
    deployment = yaml.safe_load((DEPLOY / "kubernetes" / "deployment.yaml").read_text())
    spec = pod_spec(deployment)
    (sidecar,) = spec["initContainers"]
    assert sidecar["name"] == "rag-monitor" and sidecar["restartPolicy"] == "Always"
    assert [c["name"] for c in spec["containers"]] == ["app"]
