"""`external_verdicts` in a config: a rule on an app's own judge (`external:<name>`,
`guardrail:<name>`) is valid without an `evaluators[]` entry, `check-config` says it is on
the app's judge and who may send its verdicts; what would make such a rule never judge is
a problem named in one pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from monitor.__main__ import FLAG_ENV
from monitor.cli.check_config import check_config
from monitor.config import ConfigError, load_config

RULES = (
    "alerts:\n  rules:\n"
    "    - {name: app_judge, evaluator: 'external:忠实度', baseline: {window: 7d}}\n"
    "    - {name: shield_blocks, evaluator: 'guardrail:shield', max_defect_rate: 0.2}\n"
)


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    return info.value.problems


def test_check_config_shows_a_rule_on_the_apps_own_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("external_verdicts: {services: [rag-api, 检索服务]}\n" + RULES)
    for key in [k for k in os.environ if k.startswith("RAG_MONITOR_")]:
        monkeypatch.delenv(key)
    capsys.readouterr()
    code = check_config(path, tuple(FLAG_ENV.values()))
    out, err = capsys.readouterr()
    assert code == 0, err
    header = [line for line in out.splitlines() if line.startswith("# ")]
    assert (
        "# an app's own verdicts (external:, guardrail:) read from rag-api, 检索服务: "
        "any evaluator, at most 16 a service"
    ) in header
    assert any(
        line.startswith("# alert app_judge: ")
        and line.endswith("on the app's own judge external:忠实度")
        for line in header
    ), header
    assert any(line.endswith("on the app's own judge guardrail:shield") for line in header)


def test_a_rule_on_an_app_judge_that_could_never_judge_is_a_problem(tmp_path: Path) -> None:
    off = _problems(tmp_path, "external_verdicts: {enabled: false}\n" + RULES)
    assert any(
        "alerts.rules.0.evaluator: 'external:忠实度' is an app's own judge" in p for p in off
    )
    listed = _problems(
        tmp_path, "external_verdicts: {evaluators: ['external:relevance']}\n" + RULES
    )
    assert any("'guardrail:shield' is not among external_verdicts.evaluators" in p for p in listed)


def test_external_evaluator_names_and_vocabularies_are_checked(tmp_path: Path) -> None:
    problems = _problems(
        tmp_path,
        "external_verdicts:\n"
        "  evaluators: [faithfulness]\n"
        "  vocabularies:\n"
        "    - {name: mine, kind: guardrail, events: [my.guard], evaluator: [my.name], label: [my.v]}\n",
    )
    assert any("'faithfulness' does not start with 'external:'" in p for p in problems), problems
    assert any("a guardrail vocabulary maps its label values to outcomes" in p for p in problems)
