"""A config that turns on a feature whose extra is not installed is refused in the config's
own words, naming the extra and the command that installs it, every such problem in one
pass; a feature left off needs no extra. Here the extras are hidden the way Python lets a
module be hidden (`sys.modules[name] = None`: its import fails, `find_spec` finds nothing);
tests/project/test_default_install.py checks the same in a real environment without them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from monitor.config import EXTRA_MODULES, ConfigError, load_config
from monitor.evaluators.registry import check_evaluators, evaluator_problems

# Every feature that needs an extra, turned on.
ALL_FEATURES = """\
receivers:
  kafka: {enabled: true, bootstrap_servers: ['127.0.0.1:9']}
redaction: {enabled: true, phone_region: GB}
judge: {model: openai/gpt-4o-mini}
evaluators:
  - {name: local_groundedness, second_stage: true}
  - {name: groundedness}
  - {name: trustworthiness_tlm}
"""
MISSING = {
    "receivers.kafka.enabled: the Kafka receiver needs the kafka extra (not installed): "
    "pip install 'rag-monitor[kafka]'",
    "redaction.detectors: the phone detector needs the redaction extra (not installed): "
    "pip install 'rag-monitor[redaction]' (or leave phone out of redaction.detectors)",
    "evaluators.0.second_stage: the second stage needs the second-stage extra (not "
    "installed): pip install 'rag-monitor[second-stage]'",
    "evaluators.1.name: groundedness, an LLM judge, needs the judges extra (not installed): "
    "pip install 'rag-monitor[judges]'",
    "evaluators.2.name: trustworthiness_tlm, an LLM judge, needs the judges extra (not "
    "installed): pip install 'rag-monitor[judges]'",
}


@pytest.fixture
def without_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in EXTRA_MODULES.values():
        monkeypatch.setitem(sys.modules, module, None)


def _problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={}, evaluator_check=evaluator_problems)
    return info.value.problems


def test_every_missing_extra_is_named_in_one_pass(tmp_path: Path, without_extras: None) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(ALL_FEATURES + "sampling: {rate: 2}\n")
    problems = _problems(path)
    assert set(problems) == {*MISSING, "sampling.rate: must be less than or equal to 1"}


def test_with_the_extras_installed_the_same_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(ALL_FEATURES)
    config = load_config(path, environ={}, evaluator_check=evaluator_problems)
    assert config.receivers.kafka.enabled and config.redaction.enabled


def test_features_left_off_need_no_extra(tmp_path: Path, without_extras: None) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "receivers:\n  kafka: {enabled: false, bootstrap_servers: ['127.0.0.1:9']}\n"
        "redaction: {enabled: true, detectors: [email, card], phone_region: GB}\n"
        "judge: {model: openai/gpt-4o-mini}\n"
        "evaluators:\n  - {name: local_groundedness, second_stage: false}\n  - {name: f1}\n"
    )
    config = load_config(path, environ={}, evaluator_check=evaluator_problems)
    assert [e.name for e in config.evaluators] == ["local_groundedness", "f1"]
    assert load_config(None, environ={}, evaluator_check=evaluator_problems).evaluators


def test_a_config_built_in_code_is_refused_where_the_service_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`Service` checks the evaluators of a config it is handed (what `run` loads is
    checked on load already)."""
    path = tmp_path / "c.yaml"
    path.write_text(ALL_FEATURES)
    config = load_config(path, environ={})
    monkeypatch.setitem(sys.modules, "litellm", None)
    with pytest.raises(ConfigError) as info:
        check_evaluators(config)
    assert set(info.value.problems) == {p for p in MISSING if "judges" in p}
