"""Config: YAML + env overrides, unknown keys rejected, every problem names its key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from monitor.config import ConfigError, load_config, parse_duration
from tests.conftest import EXAMPLES


def test_embedded_defaults() -> None:
    config = load_config(None, environ={})
    assert config.receivers.otlp.grpc.endpoint == "127.0.0.1:4317"
    assert config.receivers.otlp.http.endpoint == "127.0.0.1:4318"
    assert config.exporters.prometheus.endpoint == "0.0.0.0:9464"
    assert config.sampling.rate == 1.0
    assert [e.name for e in config.evaluators] == [
        "local_groundedness",
        "local_relevance",
        "local_retrieval",
        "local_safety",
    ]
    assert config.receivers.kafka.enabled is False


def test_example_config_is_valid() -> None:
    config = load_config(EXAMPLES / "config.yaml", environ={})
    assert config.alerts.rules[0].evaluator == "local_groundedness"


def test_env_overrides_yaml(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("sampling:\n  rate: 0.5\n")
    config = load_config(
        path,
        environ={
            "RAG_MONITOR_SAMPLING__RATE": "0.25",
            "RAG_MONITOR_RECEIVERS__OTLP__AUTH_TOKEN": "s3cret",
            "RAG_MONITOR_RECEIVERS__KAFKA__TOPICS": "[a, b]",
            "UNRELATED": "x",
        },
    )
    assert config.sampling.rate == 0.25
    assert config.receivers.otlp.auth_token == "s3cret"
    assert config.receivers.kafka.topics == ["a", "b"]


def test_unknown_wrong_type_and_missing_are_all_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("sampling:\n  rate: lots\n  colour: blue\nevaluators:\n  - sample_rate: 0.5\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    text = "\n".join(info.value.problems)
    assert "sampling.colour: unknown key" in text
    assert "sampling.rate:" in text
    assert "evaluators.0.name: required value is missing" in text


def test_check_config_cli_exit_codes(tmp_path: Path, cli: list[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("receivers:\n  otlp:\n    grpc:\n      endpoint: nowhere\n  kafak: {}\n")
    result = subprocess.run([*cli, "check-config", str(bad)], capture_output=True, text=True)
    assert result.returncode == 1
    assert "receivers.otlp.grpc.endpoint: expected host:port" in result.stdout
    assert "receivers.kafak: unknown key" in result.stdout
    good = subprocess.run(
        [*cli, "check-config", str(EXAMPLES / "config.yaml")], capture_output=True, text=True
    )
    assert good.returncode == 0, good.stdout + good.stderr
    assert "evaluator local_groundedness" in good.stdout


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        (
            "receivers:\n  kafka:\n    enabled: true\n",
            "receivers.kafka.bootstrap_servers: required",
        ),
        ("evaluators:\n  - name: no_such_thing\n", "evaluators.0.name: unknown evaluator"),
        (
            "evaluators:\n  - name: local_safety\n  - name: local_safety\n",
            "evaluators: listed twice: local_safety",
        ),
        (
            "alerts:\n  rules:\n    - name: r\n      evaluator: local_groundedness\n"
            "      category: violence\n      max_defect_rate: 0.1\n",
            "alerts.rules.0.evaluator: exactly one of evaluator or category",
        ),
        (
            "evaluators:\n  - name: local_safety\nalerts:\n  rules:\n    - name: r\n"
            "      evaluator: local_groundedness\n      max_defect_rate: 0.1\n",
            "alerts.rules.0.evaluator: 'local_groundedness' is not configured",
        ),
        (
            "alerts:\n  rules:\n    - name: r\n      category: violence\n      max_defect_rate: 0.1\n"
            "      window: soon\n",
            "alerts.rules.0.window: expected a duration",
        ),
        ("sampling:\n  overrides:\n    - rate: 0.5\n", "sampling.overrides.0.service"),
        ("redaction:\n  patterns: ['(']\n", "redaction.patterns: pattern 0 is not a valid regex"),
        ("sampling: [1, 2\n", "line 2: invalid YAML"),
        ("- just\n- a list\n", "(top level): expected a mapping"),
    ],
)
def test_cross_field_and_syntax_problems(tmp_path: Path, yaml_text: str, expected: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_env_problem_names_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, environ={"RAG_MONITOR_SAMPLING__RATE": "3", "RAG_MONITOR_NOPE__X": "1"})
    text = "\n".join(info.value.problems)
    assert "sampling.rate" in text and "(set by RAG_MONITOR_SAMPLING__RATE)" in text
    assert "nope: unknown key (set by RAG_MONITOR_NOPE__X)" in text


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "absent.yaml", environ={})
    assert "cannot read" in info.value.problems[0]


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("10m", 600), ("1.5h", 5400), ("1d", 86400)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
