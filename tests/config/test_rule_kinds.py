"""Each kind of alert rule is its own class with its own keys and defaults, read from a
config file as users write it: the key that makes a kind (`baseline`, `cohorts`,
`max_defect_rate`, `slo`) picks the class; every key of every kind takes a good value and
otherwise its default (the one the class states), a bad value is refused naming the key,
and a key of another kind is refused naming the key, the rule and the kinds it belongs to."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from pydantic import BaseModel

from monitor.cli.check_config import check_config
from monitor.config import (
    RULE_KEYS,
    RULE_KINDS,
    AbsoluteRule,
    AlertRule,
    CohortRule,
    ConfigError,
    RegressionRule,
    SloRule,
    dump_yaml,
    effective_config,
    load_config,
)
from monitor.config._rule_sections import SLO_BURN_RATES

REQUIRED = object()  # a key the rule must give: it has no default
NAME = "drift"

# The least a rule of each kind writes: the key that makes the kind.
MINIMAL: dict[str, dict[str, Any]] = {
    "regression": {"baseline": {}},
    "cohorts": {"cohorts": {"by": "version"}},
    "absolute": {"max_defect_rate": 0.1},
    "slo": {"slo": {"objective": 0.7}},
}
# What a section needs before one of its keys can be set alone.
SECTION_MINIMAL: dict[str, dict[str, Any]] = {
    "baseline": {},
    "cohorts": {"by": "version"},
    "slo": {"objective": 0.7},
    "boost": {"sample_rate": 0.5},
}

# key -> (default, a good value other than it, a bad value), for every kind.
COMMON: dict[str, tuple[Any, Any, Any]] = {
    "name": (REQUIRED, "groundedness_page", "two words"),
    "evaluator": (None, "local_relevance", "local_groundednes"),
    "category": (None, "violence", "hate"),
    "measure": ("verdicts", "scores", "score"),
    "severity": ("page", "ticket", "two words"),
}
# `min_increase`'s default is a threshold `python -m harness.thresholds` copies into deploy/,
# grafana/ and docs: read here from the class, so changing it stays one edit.
MIN_INCREASE = RegressionRule.default("min_increase")
RISE: dict[str, tuple[Any, Any, Any]] = {
    "window": ("30m", "1h", "forever"),
    "min_samples": (100, 7, 0),
    "min_increase": (MIN_INCREASE, round(MIN_INCREASE + 0.02, 4), 1),
    "false_page_every": (None, "30d", "59m"),
    "boost.sample_rate": (REQUIRED, 0.5, 2),
    "boost.while_p_below": (0.05, 0.01, 1),
}
TABLE: dict[str, dict[str, tuple[Any, Any, Any]]] = {
    "regression": {
        **COMMON,
        **RISE,
        "test": ("sequential", "window", "cusum"),
        "baseline.window": ("24h", "48h", "10m"),
        "baseline.min_samples": (500, 50, 0),
        "baseline.season": ("week", "day", "month"),
        "baseline.accept_after": ("7d", "14d", "1h"),
        "baseline.reference": ("trailing", "last_week", "yesterday"),
    },
    "cohorts": {**COMMON, **RISE, "cohorts.by": (REQUIRED, "model", "tenant")},
    "absolute": {
        **COMMON,
        "max_defect_rate": (REQUIRED, 0.2, 1.5),
        "window": ("10m", "1h", "forever"),
        "min_samples": (30, 7, 0),
        "false_page_every": (None, "30d", "59m"),
    },
    "slo": {
        **COMMON,
        "slo.objective": (REQUIRED, 0.9, 1),
        "slo.window": ("28d", "7d", "30m"),
        "slo.burn_rates": (
            [row.model_dump() for row in SLO_BURN_RATES],
            [{"burn_rate": 2.0, "budget": None, "long": "1h", "short": "5m", "severity": "page"}],
            [],
        ),
        # The rule's window is its objective's: written, it must be the same.
        "window": ("28d", "672h", "1h"),
        "min_samples": (30, 7, 0),
    },
}
ROWS = [(kind, key, *row) for kind, keys in TABLE.items() for key, row in keys.items()]


def _rule(kind: str, key: str | None = None, value: Any = None) -> dict[str, Any]:
    """The minimal rule of `kind`, with `key` (dotted for a section's key) set to `value`."""
    rule: dict[str, Any] = {"name": NAME, "evaluator": "local_groundedness", **MINIMAL[kind]}
    if key is None:
        return rule
    if key == "category":  # a category rule names no evaluator
        del rule["evaluator"]
    section, _, leaf = key.rpartition(".")
    if section:
        rule[section] = {**SECTION_MINIMAL[section], **rule.get(section, {}), leaf: value}
    else:
        rule[key] = value
    return rule


def _load(tmp_path: Path, rule: dict[str, Any]) -> AlertRule:
    """The rule as `check-config` and `run` read it, from a file with the evaluators it
    may name and a sampling rate a boost can raise."""
    path = tmp_path / "monitor.yaml"
    config = {
        "sampling": {"rate": 0.1},
        "evaluators": [{"name": "local_groundedness"}, {"name": "local_relevance"}],
        "alerts": {"rules": [rule]},
    }
    path.write_text(yaml.safe_dump(config))
    (loaded,) = load_config(path, environ={}).alerts.rules
    return loaded


def _problems(tmp_path: Path, rule: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        _load(tmp_path, rule)
    return refused.value.problems


def _read(rule: BaseModel, key: str) -> Any:
    value: Any = rule
    for part in key.split("."):
        value = getattr(value, part)
    return _plain(value)


def test_the_table_names_every_key_of_every_kind() -> None:
    """A key added to a kind without a row here fails: the table is the kinds' keys."""
    assert set(TABLE) == set(RULE_KINDS)
    for kind, cls in RULE_KINDS.items():
        leaves = set()
        for name, field in cls.model_fields.items():
            annotation = field.annotation
            sections = [
                a
                for a in (annotation, *get_args(annotation))
                if isinstance(a, type) and issubclass(a, BaseModel)
            ]
            if sections:
                leaves |= {f"{name}.{sub}" for sub in sections[0].model_fields}
            else:
                leaves.add(name)
        assert leaves == set(TABLE[kind]), kind


@pytest.mark.parametrize("kind", list(RULE_KINDS))
def test_the_key_that_makes_a_kind_picks_its_class(tmp_path: Path, kind: str) -> None:
    rule = _load(tmp_path, _rule(kind))
    assert type(rule) is RULE_KINDS[kind]
    assert rule.kind == kind


@pytest.mark.parametrize(("kind", "key", "default", "good", "bad"), ROWS)
def test_a_key_left_out_gets_its_kinds_default_and_a_good_value_is_taken(
    tmp_path: Path, kind: str, key: str, default: Any, good: Any, bad: Any
) -> None:
    cls = RULE_KINDS[kind]
    if default is REQUIRED:
        with pytest.raises(KeyError):
            cls.default(key)
    else:
        assert _plain(cls.default(key)) == default
        # Left out; an optional section (`boost`) written with only what it needs.
        section = key.rpartition(".")[0]
        rule = _rule(kind)
        if key == "evaluator":  # a rule with none names a category
            rule = {**_rule(kind, "category", "violence")}
        if section and section not in rule:
            rule[section] = SECTION_MINIMAL[section]
        assert _read(_load(tmp_path, rule), key) == default
    taken = _load(tmp_path, _rule(kind, key, good))
    assert _read(taken, key) == good


def _plain(value: Any) -> Any:
    """A list of sections (`slo.burn_rates`) as the file writes it."""
    if isinstance(value, tuple | list):
        return [v.model_dump() if isinstance(v, BaseModel) else v for v in value]
    return value


@pytest.mark.parametrize(("kind", "key", "default", "good", "bad"), ROWS)
def test_a_bad_value_is_refused_naming_its_key(
    tmp_path: Path, kind: str, key: str, default: Any, good: Any, bad: Any
) -> None:
    problems = _problems(tmp_path, _rule(kind, key, bad))
    assert any(p.startswith(f"alerts.rules.0.{key}: ") for p in problems), problems


# A good value of each key, as a rule of the kinds that take it writes it.
GOOD = {
    **{key: row[1] for keys in TABLE.values() for key, row in keys.items() if "." not in key},
    **{key: minimal[key] for minimal in MINIMAL.values() for key in minimal},
    "boost": SECTION_MINIMAL["boost"],
}
FOREIGN = [
    (kind, key)
    for kind, cls in RULE_KINDS.items()
    for key in sorted(RULE_KEYS - set(cls.model_fields))
]


@pytest.mark.parametrize(("kind", "key"), FOREIGN)
def test_a_key_of_another_kind_is_refused_naming_the_key_the_rule_and_whose_it_is(
    tmp_path: Path, kind: str, key: str
) -> None:
    problems = _problems(tmp_path, {**_rule(kind), key: GOOD[key]})
    cls = RULE_KINDS[kind]
    owners = [other for other in RULE_KINDS.values() if key in other.model_fields]
    assert owners and cls not in owners
    if key == owners[0].kind_key:
        # The keys of two kinds: the rule is of the kind listed first, the other's key is
        # refused.
        cls, other = sorted((cls, owners[0]), key=list(RULE_KINDS.values()).index)
        whose = f"{other.kind_key} makes {other.called}"
        key = other.kind_key
    else:
        whose = f"{key} is a key of "
    (problem,) = problems_for(problems, key)
    if whose.endswith(" is a key of "):
        listed = problem.split(whose)[1].split(" rules;")[0]
        assert set(re.split(", | and ", listed)) == {owner.noun for owner in owners}
    assert f"rule {NAME} is {cls.called}, by its {cls.kind_key}" in problem
    assert whose in problem


def problems_for(problems: list[str], key: str) -> list[str]:
    return [p for p in problems if p.startswith(f"alerts.rules.0.{key}: ")]


@pytest.mark.parametrize(("kind", "key"), FOREIGN)
def test_a_key_of_another_kind_written_null_says_nothing(
    tmp_path: Path, kind: str, key: str
) -> None:
    """As a file of the keys every rule once had writes them: `test: null` on a cohort
    rule."""
    rule = _load(tmp_path, {**_rule(kind), key: None})
    assert type(rule) is RULE_KINDS[kind]
    assert getattr(rule, key) is None


def test_a_rule_of_no_kind_or_of_two_is_refused_naming_the_keys(tmp_path: Path) -> None:
    (none,) = _problems(tmp_path, {"name": NAME, "evaluator": "local_groundedness"})
    assert none.startswith(
        "alerts.rules.0.max_defect_rate: exactly one of max_defect_rate, baseline or cohorts, "
        "or an slo"
    )
    (two,) = _problems(tmp_path, {**_rule("regression"), "max_defect_rate": 0.1})
    assert two == (
        "alerts.rules.0.max_defect_rate: exactly one of max_defect_rate, baseline or cohorts, "
        "or an slo (max_defect_rate makes an absolute rule; rule drift is a regression rule, "
        "by its baseline)"
    )


def test_check_config_names_the_key_the_rule_and_whose_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "alerts:\n  rules:\n"
        "    - {name: canary, evaluator: local_groundedness, cohorts: {by: version}, test: window}\n"
        "    - {name: budget, evaluator: local_groundedness, slo: {objective: 0.7},"
        " min_increase: 0.05}\n"
    )
    assert check_config(path, ()) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.splitlines() == [
        "alerts.rules.0.test: only a rule with a baseline takes a test (test is a key of "
        "regression rules; rule canary is a cohort rule, by its cohorts)",
        "alerts.rules.1.min_increase: an SLO rule pages on its error budget's burn rate, not on "
        "a rise (min_increase is a key of regression and cohort rules; rule budget is an SLO "
        "rule, by its slo)",
        # What the rest of the rule says, in the same run (its default slowest row burns
        # below 1 at this objective): still true once min_increase is gone.
        "warning: alerts.rules.1.slo.burn_rates.2: fires at burn rate 0.933, below 1: it "
        "fires while the service still meets its objective 0.7",
    ]


def test_each_kind_answers_none_for_the_keys_it_does_not_take() -> None:
    """What code that reads any rule by name (`rule.baseline`, `rule.boost`) relies on."""
    rules: list[AlertRule] = [
        RegressionRule.model_validate(_rule("regression")),
        CohortRule.model_validate(_rule("cohorts")),
        AbsoluteRule.model_validate(_rule("absolute")),
        SloRule.model_validate(_rule("slo")),
    ]
    for rule in rules:
        for key in RULE_KEYS - set(type(rule).model_fields):
            assert getattr(rule, key) is None, (type(rule).kind, key)


@pytest.mark.parametrize("kind", list(RULE_KINDS))
def test_the_effective_rule_check_config_prints_is_its_kinds_keys_and_loads_back(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump({"alerts": {"rules": [_rule(kind)]}}))
    config = load_config(path, environ={})
    effective = effective_config(config)
    (printed,) = effective["alerts"]["rules"]
    assert set(printed) == set(RULE_KINDS[kind].model_fields)
    again = tmp_path / "again.yaml"
    again.write_text(dump_yaml(effective))
    assert load_config(again, environ={}).alerts.rules == config.alerts.rules
