"""`check-config` on extremes a careless or hostile config writes: refused by name (an SLO
window of a nanosecond, a burn rate or budget of 1e-300, a thousand burn-rate rows, more
conventions than the documented MAX_CONVENTIONS, a convention matching more span names than
MAX_MATCH_NAMES or mapping more kind values than MAX_KIND_VALUES), or warned by name while
valid (a burn rate below 1, a convention that takes over a shipped one's spans or events, a
conversation keyed on each trace's own id, a judge call allowed longer than the evaluation
deadline)."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli.check_config import check_config
from monitor.config import ConfigError, load_config
from monitor.config._extraction import MAX_CONVENTIONS, MAX_KIND_VALUES, MAX_MATCH_NAMES
from monitor.config._rule_sections import MAX_BURN_RATES
from monitor.evaluators.registry import evaluator_problems


def slo(**fields: str) -> str:
    body = ", ".join(f"{k}: {v}" for k, v in fields.items())
    return (
        "alerts: {rules: [{name: g, evaluator: local_groundedness, slo: {objective: 0.9, "
        f"{body}}}}}]}}\n"
    )


def rows(n: int, row: str = "{burn_rate: 2, long: 1h, short: 5m}") -> str:
    return "[" + ", ".join([row] * n) + "]"


def conventions(n: int, entry: str) -> str:
    listed = ", ".join(entry.replace("NAME", f"mine{k}") for k in range(n))
    return f"extraction: {{conventions: [{listed}]}}\n"


RETRIEVER = "{name: NAME, match: {span_names: [search], role: retrieval}}"


def matching(n: int) -> str:
    """A convention whose match lists `n` span names."""
    names = ", ".join(f"search{k}" for k in range(n))
    return conventions(1, f"{{name: NAME, match: {{span_names: [{names}], role: retrieval}}}}")


def kind_values(n: int) -> str:
    """A convention whose kind maps `n` values."""
    values = ", ".join(f"kind{k}: retrieval" for k in range(n))
    return conventions(1, f"{{name: NAME, kind: {{attribute: app.kind, values: {{{values}}}}}}}")


REFUSED = [
    (slo(window="1ns"), "alerts.rules.0.slo.window: 1ns is outside 1h..3650d"),
    (slo(window="20000d"), "alerts.rules.0.slo.window: must be at most 3650d"),
    (
        slo(burn_rates="[{burn_rate: 1.0e-300, long: 1h, short: 5m}]"),
        "alerts.rules.0.slo.burn_rates.0.burn_rate: fires at burn rate 1e-300, below 0.01",
    ),
    (
        slo(burn_rates="[{budget: 1.0e-300, long: 1h, short: 5m}]"),
        "alerts.rules.0.slo.burn_rates.0.budget: fires at burn rate 6.72e-298, below 0.01",
    ),
    (
        slo(burn_rates="[{burn_rate: 2, long: 1h, short: 1ns}]"),
        "alerts.rules.0.slo.burn_rates.0.short: 1ns is outside 1m..3650d",
    ),
    (
        slo(burn_rates=rows(1000)),
        f"alerts.rules.0.slo.burn_rates: List should have at most {MAX_BURN_RATES} items",
    ),
    (
        conventions(MAX_CONVENTIONS + 1, RETRIEVER),
        f"extraction.conventions: List should have at most {MAX_CONVENTIONS} items",
    ),
    (
        matching(MAX_MATCH_NAMES + 1),
        "extraction.conventions.0.match.span_names: List should have at most "
        f"{MAX_MATCH_NAMES} items",
    ),
    (
        kind_values(MAX_KIND_VALUES + 1),
        "extraction.conventions.0.kind.values: Dictionary should have at most "
        f"{MAX_KIND_VALUES} items",
    ),
]


@pytest.mark.parametrize(("text", "problem"), REFUSED, ids=[p.split(":")[0] for _, p in REFUSED])
def test_extremes_are_refused_by_name(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={}, evaluator_check=evaluator_problems)
    assert any(p.startswith(problem) for p in info.value.problems), info.value.problems


ACCEPTED = [
    slo(window="1h", burn_rates=rows(MAX_BURN_RATES, "{burn_rate: 2, long: 1h, short: 1m}")),
    conventions(MAX_CONVENTIONS, RETRIEVER),
    matching(MAX_MATCH_NAMES),
    kind_values(MAX_KIND_VALUES),
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_the_limits_themselves_are_accepted(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    load_config(path, environ={}, evaluator_check=evaluator_problems)


WARNED = [
    (
        slo(burn_rates="[{burn_rate: 0.5, long: 1d, short: 2h}]"),
        "alerts.rules.0.slo.burn_rates.0: fires at burn rate 0.5, below 1",
    ),
    (
        conventions(1, "{name: NAME, kind: {attribute: openinference.span.kind, "
                    "values: {LLM: model}}}"),
        "extraction.conventions.0.kind.attribute: openinference.span.kind is the role "
        "attribute of the shipped convention openinference",
    ),
    (
        conventions(1, "{name: NAME, match: {attributes: [traceloop.span.kind], "
                    "role: retrieval}}"),
        "extraction.conventions.0.match.attributes: traceloop.span.kind is on every span of "
        "the shipped convention openllmetry",
    ),
    (
        conventions(1, "{name: NAME, match: {span_names: [answer], role: model}, "
                    "output: [{event: gen_ai.choice, attribute: message}]}"),
        "extraction.conventions.0.output.0.event: gen_ai.choice is an event the shipped "
        "convention genai reads",
    ),
    (
        conventions(1, "{name: NAME, match: {span_names: [ask], role: request}, "
                    "conversation: [trace_id]}"),
        "extraction.conventions.0.conversation.0: trace_id holds a trace's own id, so every "
        "trace would be a conversation of its own",
    ),
    (
        conventions(1, "{name: NAME, match: {span_names: [ask], role: request}, "
                    "conversation: [{attribute: app.context, encoding: json, field: traceId}]}"),
        "extraction.conventions.0.conversation.0: traceId holds a trace's own id",
    ),
    (
        "judge: {model: ollama/small, api_base: 'http://127.0.0.1:11434', timeout_s: 120}\n"
        "pipeline: {evaluation_timeout_s: 60}\nevaluators: [{name: groundedness}]\n",
        "judge.timeout_s: 120s is above pipeline.evaluation_timeout_s 60s",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("text", "warning"), WARNED, ids=[w.split(":")[0] for _, w in WARNED])
def test_likely_mistakes_are_warned_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, warning: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert check_config(path, ()) == 0
    err = capsys.readouterr().err
    assert f"warning: {warning}" in err, err


def test_a_config_of_the_usual_shape_has_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    session = (
        "{name: app, match: {span_names: [ask], role: request}, conversation: "
        "[app.session_id], output: [{event: app.answer, attribute: text}]}"
    )
    retriever = RETRIEVER.replace("NAME", "retriever")
    # An SLO on groundedness, with the default rule on the records it skips beside it.
    context = "{name: ctx, evaluator: local_groundedness, measure: no_context, baseline: {}}"
    rules = slo(burn_rates="[{burn_rate: 2, long: 1h, short: 5m}]").replace(
        "}]}\n", f"}}, {context}]}}\n"
    )
    assert context in rules
    path.write_text(rules + f"extraction: {{conventions: [{retriever}, {session}]}}\n")
    assert check_config(path, ()) == 0
    assert "warning:" not in capsys.readouterr().err
