"""`docs/contract.md` against the code, both ways: every config key with its default, every
metric with its labels, every evaluator, every command and flag. What a user writes against
cannot drift from what runs without this test failing."""

from __future__ import annotations

import argparse
import ast
import functools
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel

from monitor.__main__ import _parser
from monitor.config import (
    RULE_KEYS,
    RULE_KINDS,
    Config,
    EvaluatorConfig,
    TrustworthinessTlm,
    alert_rule,
)
from monitor.evaluators.registry import known_evaluators
from monitor.telemetry import create_telemetry
from monitor.telemetry_metrics import METRICS, Metric
from tests.conftest import REPO

CONTRACT = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
ZH_DOCS = sorted((REPO / "docs" / "zh").glob("*.md"))
SECTIONS = frozenset(Config.model_fields)
# Keys the contract documents that are spellings of other keys, not fields of their own.
SPELLINGS = frozenset({"receivers.otlp.protocols.grpc", "receivers.otlp.protocols.http"})


def _section(title: str) -> str:
    """The text under the heading `title` (any level), up to the next heading of that level
    or above."""
    match = re.search(rf"^(#+) {re.escape(title)}\s*$", CONTRACT, re.M)
    assert match, f"docs/contract.md has no heading {title!r}"
    level = len(match.group(1))
    rest = CONTRACT[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def _rows(text: str) -> list[list[str]]:
    """The body rows of every table in `text`, as cells."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or re.fullmatch(r"\|[-| ]+\|", line.strip()):
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    # Drop each table's header row: the one before a separator line.
    headers = set()
    lines = text.splitlines()
    for i, line in enumerate(lines[1:], 1):
        if re.fullmatch(r"\|[-| ]+\|", line.strip()):
            headers.add(lines[i - 1].strip())
    return [r for r in rows if "| " + " | ".join(r) + " |" not in headers]


def _ticked(cell: str) -> list[str]:
    """The backticked names in a cell, leaving out what stands in parentheses."""
    depth, kept = 0, []
    for ch in cell:
        depth += ch == "("
        if depth == 0:
            kept.append(ch)
        depth -= ch == ")" and depth > 0
    return re.findall(r"`([^`]+)`", "".join(kept))


# -- configuration ----------------------------------------------------------------------


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The section model behind an annotation (`X`, `X | None`, the first form of an entry
    that takes several), or None."""
    if get_origin(annotation) is Annotated:
        return _model_of(get_args(annotation)[0])
    if get_origin(annotation) in (Union, type(int | None)):
        models = [m for a in get_args(annotation) if (m := _model_of(a)) is not None]
        return models[0] if models else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _is_list(annotation: Any) -> bool:
    return get_origin(annotation) is list


def _leaves(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, Any]]:
    """(dotted key, default) of every leaf of a section; a list of entries is one leaf,
    written `key[]`."""
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        inner = _model_of(info.annotation)
        if inner is not None:
            yield from _leaves(inner, key + ".")
        elif _is_list(info.annotation) and any(_model_of(a) for a in get_args(info.annotation)):
            yield f"{key}[]", info.default
        else:
            default = info.default
            if info.is_required():
                default = None
            elif info.default_factory is not None:
                default = _FACTORY
            yield key, default


_FACTORY = object()  # a default computed when the config is built (the CPUs)


def _expand(keys: list[str], section: str | None) -> list[str]:
    """`a.b`, `.c` → `a.b`, `a.c`; keys outside a section name are put under it."""
    out: list[str] = []
    for key in keys:
        if key.startswith(".") and out:
            key = out[-1].rsplit(".", 1)[0] + key
        elif section is not None and key.split(".")[0].removesuffix("[]") not in SECTIONS:
            key = f"{section}.{key}"
        out.append(key)
    return out


def _documented_config() -> dict[str, str | None]:
    """Documented key → its default cell entry (None where the row gives none per key)."""
    documented: dict[str, str | None] = {}
    config = _section("Configuration")
    for heading in re.findall(r"^### (.+)$", config, re.M):
        names = re.findall(r"`([^`]+)`", heading)
        if not names or not all(n in SECTIONS for n in names) or names == ["evaluators"]:
            continue
        section = names[0] if len(names) == 1 else None
        for row in _rows(_section(heading)):
            if len(row) < 3:
                continue
            keys = _expand([k.split(" / ")[0] for k in _ticked(row[0])], section)
            for alias in re.findall(r"` / `(\.[a-z_]+)`", row[0]):
                keys.append(keys[-1].rsplit(".", 1)[0] + alias)
            defaults = _split_defaults(row[1])
            if len(defaults) == 1:  # one default for every key of the row
                defaults *= len(keys)
            for i, key in enumerate(keys):
                documented[key] = defaults[i] if len(defaults) == len(keys) else None
    return documented


def _split_defaults(cell: str) -> list[str]:
    """A default cell's comma-separated values (commas inside brackets or digits kept)."""
    parts, depth, current = [], 0, ""
    for i, ch in enumerate(cell):
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth = max(depth - 1, 0)
        if ch == "," and depth == 0 and cell[i + 1 : i + 2] == " ":
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts]


_MIB = re.compile(r"^([\d,]+) MiB$")


def _value(text: str) -> Any:
    """A documented default as a value: `literal`, none, unlimited, N MiB, 65,536."""
    text = re.sub(r"\s*\(.*\)$", "", text).strip().rstrip("…")
    if text in ("none", "unlimited", "—"):
        return None
    if (mib := _MIB.match(text)) is not None:
        return int(mib.group(1).replace(",", "")) * 1024 * 1024
    if re.fullmatch(r"[\d,]+", text):
        return int(text.replace(",", ""))
    if text.startswith("`") and text.endswith("`") and text.count("`") == 2:
        return yaml.safe_load(text[1:-1])
    return _UNREADABLE


_UNREADABLE = object()


def _same(documented: Any, actual: Any) -> bool:
    if isinstance(actual, BaseModel) or actual is _FACTORY:
        return True
    if isinstance(actual, tuple | list) and isinstance(documented, list):
        return list(actual) == documented
    return bool(documented == actual)


def _config_leaves() -> dict[str, Any]:
    """Every key of the sections (the `evaluators` list has its own table) → its default."""
    leaves: dict[str, Any] = {}
    for section, info in Config.model_fields.items():
        model = _model_of(info.annotation)
        if model is not None:
            leaves.update(_leaves(model, f"{section}."))
    return leaves


def test_every_config_key_is_documented_and_every_documented_key_exists() -> None:
    documented = _documented_config()
    actual = _config_leaves()
    assert sorted(set(actual) - set(documented)) == [], "keys the contract does not list"
    assert sorted(set(documented) - set(actual) - SPELLINGS) == [], "keys that do not exist"


def test_every_documented_default_is_the_default() -> None:
    documented = _documented_config()
    actual = _config_leaves()
    wrong = []
    for key, default in actual.items():
        if default is _FACTORY:
            continue  # computed when the config is built (the CPUs): said in words
        cell = documented.get(key)
        value = _UNREADABLE if cell is None else _value(cell)
        if value is _UNREADABLE:
            wrong.append(f"{key}: the contract gives no default it can be compared with")
        elif not _same(value, default):
            wrong.append(f"{key}: contract says {cell!r}, the code {default!r}")
    assert wrong == []


_FORMS: dict[str, dict[str, Any]] = {
    "regression": {"baseline": {}},
    "cohorts": {"cohorts": {"by": "version"}},
    "absolute": {"max_defect_rate": 0.1},
    "slo": {"slo": {"objective": 0.7}},
}


def test_every_alert_rule_default_is_the_default_of_its_form() -> None:
    """The rule table: each key's default per form, against a rule of that form built with
    nothing else set (a key a form does not take is `—`)."""
    rows = {row[0].strip("`"): row[1:] for row in _rows(_section("Alert rules"))}
    wrong = []
    for column, (form, fields) in enumerate(_FORMS.items()):
        rule = alert_rule(
            {"name": "r", "evaluator": "e", **fields, "boost": {"sample_rate": 0.5}}
            if form not in ("absolute", "slo")
            else {"name": "r", "evaluator": "e", **fields}
        )
        for key, cells in rows.items():
            value: Any = rule
            for part in key.split("."):
                value = getattr(value, part) if value is not None else None
            cell = cells[column]
            expected = None if cell in ("—", "") else _value(cell)
            if expected is _UNREADABLE or expected != value:
                wrong.append(f"{form} {key}: contract says {cell!r}, the code {value!r}")
    assert wrong == []
    leaves = {
        name
        for kind in RULE_KINDS.values()
        for name, info in kind.model_fields.items()
        if _model_of(info.annotation) is None
    } - {"name", "evaluator", "category", "max_defect_rate"}
    nested = {
        f"{name}.{sub}"
        for name in ("baseline", "boost", "slo")
        for sub in ("window", "min_samples", "while_p_below", "season", "accept_after", "reference")
    }
    assert leaves <= set(rows), leaves - set(rows)
    assert set(rows) - leaves <= nested


def test_evaluator_entry_and_alert_rule_keys_are_documented() -> None:
    rows = _rows(_section("`evaluators`"))
    entry_keys = {k for row in rows for k in _ticked(row[0])}
    assert entry_keys == set(EvaluatorConfig.model_fields)
    alerts = _section("`alerts`") + _section("Alert rules")
    rule_words = set(re.findall(r"`([a-z_]+)", alerts))
    assert RULE_KEYS <= rule_words


def test_the_tlm_options_are_documented_and_exist() -> None:
    (cell,) = [row[1] for row in _rows(_section("`evaluators`")) if row[0] == "`tlm`"]
    documented = set(_ticked(cell)) - {"trustworthiness_tlm"}
    assert documented == set(TrustworthinessTlm.model_fields)


# -- evaluators --------------------------------------------------------------------------


def test_the_evaluator_table_lists_exactly_the_registered_evaluators() -> None:
    names = {n for row in _rows(_section("Evaluators")) for n in _ticked(row[0])}
    assert names == known_evaluators()


# -- metrics -----------------------------------------------------------------------------

_ASKING = frozenset({"counter", "gauge", "histogram"})
_PROMETHEUS_CLASSES = frozenset({"Counter", "Gauge", "Histogram", "Summary", "Info", "Enum"})


@functools.cache
def _monitor_trees() -> tuple[tuple[Path, ast.Module], ...]:
    """The modules of `monitor/` that name a metric factory or prometheus_client (no
    other can declare or ask for a metric), parsed once for the checks below."""
    texts = {path: path.read_text(encoding="utf-8") for path in (REPO / "monitor").rglob("*.py")}
    named = re.compile(r"\b(?:counter|gauge|histogram)\(|prometheus_client")
    return tuple((p, ast.parse(t)) for p, t in sorted(texts.items()) if named.search(t))


def _asked_for_in_code() -> dict[str, set[str]]:
    """Every metric name `monitor/` asks the table for (`telemetry.counter("name")`, or a
    helper of the same name and one argument) → the kinds it is asked as."""
    found: dict[str, set[str]] = {}
    for _, tree in _monitor_trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or len(node.args) != 1 or node.keywords:
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if called in _ASKING and isinstance(first, ast.Constant):
                if isinstance(first.value, str):
                    found.setdefault(first.value, set()).add(called)
    return found


def _declared_by_hand(root: Path, trees: Sequence[tuple[Path, ast.Module]]) -> list[str]:
    """Calls of prometheus_client's metric classes in `trees` (the modules under `root`)
    outside the one function that registers the table's rows (`telemetry.py`'s
    `_register`)."""
    found = []
    for path, tree in trees:
        imported = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("prometheus")
            for alias in node.names
            if alias.name in _PROMETHEUS_CLASSES
        }
        allowed: set[ast.AST] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "_register":
                if path == root / "telemetry.py":
                    allowed.update(ast.walk(node))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node not in allowed:
                if isinstance(node.func, ast.Name) and node.func.id in imported:
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def _exported(row: Metric) -> str:
    return row.name + ("_total" if row.kind == "counter" else "")


def _metrics_in_contract() -> dict[str, tuple[str, frozenset[str]]]:
    """The contract's metric table: name → (type, labels)."""
    documented: dict[str, tuple[str, frozenset[str]]] = {}
    for row in _rows(_section("Metrics")):
        # The labels come first; a colon starts prose about them.
        labels = frozenset(_ticked(row[2].split(": ")[0])) if len(row) > 2 else frozenset()
        for name in _ticked(row[0]):
            documented[name] = (row[1], labels)
    return documented


def test_the_contract_lists_every_metric_of_the_table_with_its_type_and_labels() -> None:
    table = {_exported(row): (row.kind, frozenset(row.labels)) for row in METRICS.values()}
    contract = _metrics_in_contract()
    assert sorted(set(table) - set(contract)) == [], "metrics the contract does not list"
    assert sorted(set(contract) - set(table)) == [], "documented metrics the table lacks"
    differ = {n: (contract[n], table[n]) for n in table if table[n] != contract[n]}
    assert differ == {}, "(contract, table)"


def test_the_code_registers_every_metric_from_the_table_and_no_other() -> None:
    asked = _asked_for_in_code()
    assert sorted(set(asked) - set(METRICS)) == [], "metrics the code asks for, not in the table"
    assert sorted(set(METRICS) - set(asked)) == [], "rows of the table no code asks for"
    wrong = {n: sorted(kinds) for n, kinds in asked.items() if kinds != {METRICS[n].kind}}
    assert wrong == {}, "asked for as another type than the table's"
    by_hand = _declared_by_hand(REPO / "monitor", _monitor_trees())
    assert by_hand == [], "metrics declared outside the table"


def test_every_row_of_the_metrics_table_registers_as_it_says() -> None:
    telemetry = create_telemetry()
    for row in METRICS.values():
        metric = getattr(telemetry, row.kind)(row.name)
        assert getattr(telemetry, row.kind)(row.name) is metric  # made once
        assert metric._labelnames == row.labels, row.name
        assert metric._documentation == row.help, row.name
        if row.buckets:
            assert tuple(metric._upper_bounds[:-1]) == row.buckets, row.name
    names = {m.name for m in telemetry.registry.collect() if m.name.startswith("rag_monitor_")}
    assert {"rag_monitor_" + row.name for row in METRICS.values()} == names
    with pytest.raises(TypeError, match="late_spans is a counter"):
        telemetry.gauge("late_spans")
    with pytest.raises(KeyError, match="no_such_metric"):
        telemetry.counter("no_such_metric")


def test_the_metric_checks_find_a_metric_declared_by_hand(tmp_path: Path) -> None:
    """The checks above read the code as written: a call they cannot see would pass."""
    asked = _asked_for_in_code()
    assert asked["late_spans"] == {"counter"} and asked["build_info"] == {"gauge"}
    assert asked["alert_evaluation_duration_seconds"] == {"histogram"}
    (tmp_path / "telemetry.py").write_text(
        "from prometheus_client import Counter\n"
        "def _register():\n    return Counter('a', 'b')\n"
        "def other():\n    return Counter('c', 'd')\n"
    )
    (tmp_path / "stray.py").write_text("from prometheus_client import Gauge as G\nG('x', 'y')\n")
    trees = [(path, ast.parse(path.read_text())) for path in sorted(tmp_path.glob("*.py"))]
    assert _declared_by_hand(tmp_path, trees) == ["stray.py:2", "telemetry.py:5"]


# -- commands and flags ------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def test_every_command_and_flag_is_documented_and_exists() -> None:
    parser = _parser({})
    commands = _subparsers(parser)
    rows = _rows(_section("Commands"))
    documented: dict[str, set[str]] = {}
    for row in rows:
        words = _ticked(row[0])
        if words and words[0].startswith("rag-monitor "):
            command = words[0].split()[1]
            if command.startswith("--"):
                continue
            flags = set(re.findall(r"--[a-z-]+", row[0] + " " + row[1]))
            documented[command] = flags
    assert set(documented) == set(commands)
    common = {w for row in rows for w in _ticked(row[0]) if w.startswith("--")}
    assert common == {"--log-level", "--log-format", "--config"}
    assert "`rag-monitor --version`" in _section("Commands")
    for name, sub in commands.items():
        assert documented[name] | common >= _flags(sub), name
        assert documented[name] <= _flags(sub), name


@pytest.mark.parametrize(
    "path", ["README.md", "docs/contract.md", *(f"docs/zh/{p.name}" for p in ZH_DOCS)]
)
def test_the_example_config_keys_the_docs_quote_exist(path: str) -> None:
    """Every `section.key` the docs quote in backticks names a real key (or a list entry's
    key, or a metric label's value)."""
    text = (REPO / path).read_text(encoding="utf-8")
    leaves = {key.removesuffix("[]") for key in _config_leaves()}
    prefixes = {k.rsplit(".", i)[0] for k in leaves for i in range(k.count(".") + 1)}
    pattern = r"`((?:" + "|".join(SECTIONS) + r")\.[a-z_.]+[a-z_])`"
    quoted = set(re.findall(pattern, text))
    unknown = sorted(
        q
        for q in quoted
        if q not in prefixes
        and not any(q.startswith(p + ".") for p in leaves)
        and not any(q.startswith(s + ".") for s in SPELLINGS)
        and not (REPO / "monitor" / q).exists()  # a module path such as `redaction.py`
    )
    assert unknown == [], path


def test_the_judge_request_outcomes_are_the_documented_ones() -> None:
    from monitor.judge.client import OUTCOMES

    row = next(r for r in _rows(_section("Metrics")) if _ticked(r[0]) == ["judge_requests_total"])
    documented = re.search(r"`outcome` \(([^)]*)\)", row[2])
    assert documented is not None, row
    assert re.findall(r"`([a-z_]+)`", documented.group(1)) == list(OUTCOMES)


def test_contract_reader_finds_the_tables(tmp_path: Path) -> None:
    """The readers above see what a person sees (a broken table would pass as empty)."""
    assert len(_documented_config()) > 80
    assert len(_metrics_in_contract()) > 40
    assert len(_rows(_section("Evaluators"))) > 10


def test_every_command_says_what_it_does_in_its_help() -> None:
    for name, sub in _subparsers(_parser({})).items():
        assert sub.description and len(sub.description) > 40, name
        # `rag-monitor NAME --help` shows it (argparse wraps its lines).
        assert " ".join(sub.description.split()) in " ".join(sub.format_help().split()), name


# -- results file ----------------------------------------------------------------------------


def test_the_results_file_fields_are_the_documented_ones() -> None:
    from monitor.alerts.backtest_rows import Row
    from monitor.exporters.results_file import results_line
    from monitor.records import CONTEXT_SOURCES, NOT_EVALUATED, RagRecord
    from monitor.results import EvalResult

    # Every optional field present: a record written unevaluated, its text.
    record = RagRecord(request_id="r", metadata={NOT_EVALUATED: "shutdown_deadline"})
    line = results_line(record, {}, text=True)
    documented = {
        name.split(".")[0] for row in _rows(_section("Results file")) for name in _ticked(row[0])
    }
    # `previous` is read, not written: `backtest` pairs an old revision's verdicts that a
    # file carries under it with the line's own (monitor/alerts/backtest_rows.py).
    old = {"e": EvalResult("e", passed=False, revision="old").as_json()}
    read = Row.of(
        {"time": 0.0, "results": {"e": EvalResult("e", passed=True).as_json()}, "previous": old}
    )
    assert read.paired is not None and set(read.paired) == {"e"}
    assert documented == set(line) | {"previous"}, "results file fields: (contract, code)"
    (row,) = (r for r in _rows(_section("Results file")) if r[0] == "`context_source`")
    assert _ticked(row[1]) == list(CONTEXT_SOURCES)
