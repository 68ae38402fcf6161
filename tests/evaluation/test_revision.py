"""An evaluator's revision hashes its configuration as resolved: writing out a value the
evaluator applies anyway (its default threshold, severity threshold, second stage, the
trustworthiness preset's options) keeps the revision, so no baseline restarts; a value that
changes a verdict changes it."""

from __future__ import annotations

from typing import Any

import pytest

from monitor.config import EvaluatorConfig, Judge
from monitor.evaluators.revision import revision

JUDGE = Judge(model="openai/gpt-4o-mini")


def rev(**entry: Any) -> str:
    return revision(EvaluatorConfig.model_validate(entry), JUDGE)


@pytest.mark.parametrize(
    ("name", "written"),
    [
        ("local_groundedness", {"threshold": 0.5}),
        ("local_groundedness", {"second_stage": False}),
        ("local_groundedness", {"threshold": 0.5, "second_stage": False}),
        ("local_relevance", {"threshold": 0.5}),
        ("local_safety", {"severity_threshold": "medium"}),
        ("violence", {"severity_threshold": "medium"}),
        ("relevance", {"threshold": 3}),
        ("faithfulness", {"threshold": 0.5}),
        ("trustworthiness_tlm", {"tlm": {}}),
        ("trustworthiness_tlm", {"tlm": {"preset": "medium", "draws": 5, "reflection": True}}),
        ("trustworthiness_tlm", {"tlm": {"preset": "low", "draws": 3, "reflection": False}}),
    ],
)
def test_a_default_written_out_keeps_the_revision(name: str, written: dict[str, Any]) -> None:
    left_out = (
        {"tlm": {"preset": written["tlm"]["preset"]}} if "preset" in written.get("tlm", {}) else {}
    )
    assert rev(name=name, **written) == rev(name=name, **left_out)


@pytest.mark.parametrize(
    ("name", "changed"),
    [
        ("local_groundedness", {"threshold": 0.6}),
        ("local_groundedness", {"second_stage": True}),
        ("local_safety", {"severity_threshold": "high"}),
        ("relevance", {"threshold": 4}),
        ("trustworthiness_tlm", {"tlm": {"draws": 6}}),
        ("trustworthiness_tlm", {"tlm": {"preset": "high"}}),
    ],
)
def test_a_value_that_changes_verdicts_changes_the_revision(
    name: str, changed: dict[str, Any]
) -> None:
    assert rev(name=name, **changed) != rev(name=name)


def test_what_changes_no_verdict_keeps_the_revision() -> None:
    assert rev(name="local_groundedness", sample_rate=0.1) == rev(name="local_groundedness")
