"""`check-config` as a user meets it: every problem of a file in one pass, in the file's
words, quoted numbers refused, the nearest key suggested, floors that keep a config from
hurting, and the effective value of every default printed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from monitor.config import ConfigError, available_cpus, load_config
from monitor.evaluators.registry import evaluator_problems


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={}, evaluator_check=evaluator_problems)
    return info.value.problems


def test_type_errors_and_whole_file_problems_come_in_one_pass(tmp_path: Path) -> None:
    problems = _problems(
        tmp_path,
        "sampling: {rate: lots}\n"
        "evaluators:\n  - {name: local_groundednes}\n  - {name: local_relevance, threshold: 7}\n",
    )
    assert "sampling.rate: expected a number" in problems
    assert any(
        p.startswith(
            "evaluators.0.name: unknown evaluator 'local_groundednes' "
            "(did you mean 'local_groundedness'?"
        )
        for p in problems
    ), problems
    assert "evaluators.1.threshold: 7 is outside local_relevance's scale 0..1" in problems


def test_messages_name_no_internal_classes(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "sampling: 3\nexporters: [a]\nbudget: {}\n")
    assert problems == [
        "sampling: expected a mapping of keys (key: value)",
        "exporters: expected a mapping of keys (key: value)",
    ]
    for problem in problems:
        assert "instance of" not in problem and "Sampling" not in problem


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sampling: {rate: '0.5'}\n", "sampling.rate: '0.5' is written as a string"),
        ('pipeline: {workers: "4"}\n', "pipeline.workers: '4' is written as a string"),
        ("redaction: {enabled: 'true'}\n", "redaction.enabled: 'true' is written as a string"),
        (
            "evaluators: [{name: local_relevance, threshold: '0.6'}]\n",
            "evaluators.0.threshold: '0.6' is written as a string",
        ),
    ],
)
def test_a_number_or_boolean_in_quotes_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    assert any(p.startswith(expected) for p in _problems(tmp_path, text))


def test_a_number_from_the_environment_is_a_number(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("sampling: {rate: '${env:RATE}'}\n")
    config = load_config(path, environ={"RAG_MONITOR_PIPELINE__WORKERS": "3", "RATE": "0.25"})
    assert config.sampling.rate == 0.25 and config.pipeline.workers == 3


def test_durations_still_take_quoted_text(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("pipeline: {evaluation_timeout_s: '90', shutdown_timeout_s: 1m}\n")
    config = load_config(path, environ={})
    assert config.pipeline.evaluation_timeout_s == 90.0
    assert config.pipeline.shutdown_timeout_s == 60.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sampling: {rat: 0.5}\n", "sampling.rat: unknown key; did you mean 'rate'?"),
        (
            "trace_assembly: {idle_timout_s: 3}\n",
            "trace_assembly.idle_timout_s: unknown key; did you mean 'idle_timeout_s'?",
        ),
        (
            "evaluators: [{name: local_groundedness, treshold: 0.4}]\n",
            "evaluators.0.treshold: unknown key; did you mean 'threshold'?",
        ),
        ("samplin: {}\n", "samplin: unknown key; did you mean 'sampling'?"),
        ("colour: blue\n", "colour: unknown key"),
    ],
)
def test_an_unknown_key_names_the_nearest_known_one(
    tmp_path: Path, text: str, expected: str
) -> None:
    assert _problems(tmp_path, text) == [expected]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("evaluators: []\n", "evaluators: no evaluators: the monitor would score nothing"),
        (
            "pipeline: {evaluation_timeout_s: 0.001}\n",
            "pipeline.evaluation_timeout_s: must be at least 1 s",
        ),
        (
            "trace_assembly: {idle_timeout_s: 0.000001}\n",
            "trace_assembly.idle_timeout_s: must be at least 0.1 s",
        ),
        (
            "alerts: {evaluation_interval_s: 0.001}\n",
            "alerts.evaluation_interval_s: must be at least 0.5 s",
        ),
        ("judge: {timeout_s: 0.01}\n", "judge.timeout_s: must be at least 0.1 s"),
        (
            "receivers: {otlp: {http: {read_header_timeout_s: 1ms}}}\n",
            "receivers.otlp.http.read_header_timeout_s: must be at least 0.1 s",
        ),
        (
            f"pipeline: {{processes: {available_cpus() + 1}}}\n",
            f"pipeline.processes: {available_cpus() + 1} worker processes on "
            f"{available_cpus()} CPUs",
        ),
    ],
)
def test_configs_that_would_hurt_are_refused_with_the_reason(
    tmp_path: Path, text: str, expected: str
) -> None:
    problems = _problems(tmp_path, text)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_check_config_prints_the_effective_value_of_every_default(
    tmp_path: Path, cli: list[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "judge: {model: openai/gpt-4o-mini, api_key_env: RAG_TEST_JUDGE_KEY}\n"
        "evaluators: [{name: local_groundedness}, {name: local_safety}, {name: groundedness},\n"
        "  {name: relevancy, language: auto}]\n"
    )
    # The judge needs its key to pass (check-config makes no call with it); named by
    # `api_key_env`, it is checked without importing litellm (seconds of CPU).
    env = {**os.environ, "RAG_TEST_JUDGE_KEY": "sk-test"}
    result = subprocess.run(
        [*cli, "check-config", str(path)], capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, result.stderr
    entries = yaml.safe_load(result.stdout)["evaluators"]
    assert entries[0] == {
        **entries[0],
        "threshold": 0.5,
        "sample_rate": 1.0,
        "second_stage": False,
        "severity_threshold": None,
    }
    assert entries[1]["threshold"] is None and entries[1]["severity_threshold"] == "medium"
    assert entries[2]["threshold"] == 3.0
    # A judge's template language: en where none is written; local evaluators have none.
    assert [e["language"] for e in entries] == [None, None, "en", "auto"]
    assert "# evaluator relevancy, language auto" in result.stdout.splitlines()


def test_check_config_reports_every_problem_at_once(tmp_path: Path, cli: list[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("sampling: {rate: 2}\nevaluators: [{name: nope}]\n")
    result = subprocess.run(
        [*cli, "check-config", str(path)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith("sampling.rate: must be less than or equal to 1")
    assert lines[1].startswith("evaluators.0.name: unknown evaluator 'nope'")


def test_mistakes_of_every_kind_come_in_one_pass(tmp_path: Path) -> None:
    """A token written into the file, a misspelt key, a value out of range, and what the
    sections say of each other (a rule and an escalation naming evaluators by a near miss,
    a boost that does not raise its rate): all reported by one run, with suggestions."""
    problems = _problems(
        tmp_path,
        "receivers: {otlp: {auth_token: s3cret}}\n"
        "trace_assembly: {idle_timout_s: 5}\n"
        "alerts:\n"
        "  false_page_every: 1s\n"
        "  rules:\n"
        "    - {name: r, evaluator: local_groundednes, baseline: {}}\n"
        "    - {name: b, evaluator: local_relevance, baseline: {}, boost: {sample_rate: 0.5}}\n"
        "evaluators:\n"
        "  - {name: local_groundedness}\n"
        "  - {name: local_relevance}\n"
        "  - {name: local_retrieval, escalate_from: local_relevanse}\n",
    )
    expected = [
        "receivers.otlp.auth_token: a token is not written into the config file",
        "trace_assembly.idle_timout_s: unknown key; did you mean 'idle_timeout_s'?",
        "alerts.false_page_every: 1s is outside 1h..3650d",
        "alerts.rules.0.evaluator: 'local_groundednes' is not configured (did you mean "
        "'local_groundedness'?",
        "alerts.rules.1.boost.sample_rate: 0.5 does not raise local_relevance's rate of 1",
        "evaluators.2.escalate_from: 'local_relevanse' is not configured (did you mean "
        "'local_relevance'?",
    ]
    for start in expected:
        assert any(p.startswith(start) for p in problems), (start, problems)


def test_rules_are_named_apart_from_each_other_and_from_their_where_alerts(
    tmp_path: Path,
) -> None:
    """A rule's name is its alertname and the key of its saved state: two rules of one name,
    or a rule named as another's Where alert, would be one alert to Alertmanager."""
    rule = "{name: %s, evaluator: local_groundedness, max_defect_rate: 0.2}"
    problems = _problems(
        tmp_path,
        "evaluators: [{name: local_groundedness}]\n"
        "alerts:\n  rules:\n"
        + "".join(f"    - {rule % name}\n" for name in ("drift", "drift", "spike", "spike_where")),
    )
    assert problems == [
        "alerts.rules: named twice: drift",
        "alerts.rules: spike_where is the name of spike's Where alert (the alert naming the "
        "slice a page's rise is in); rename it",
    ]
