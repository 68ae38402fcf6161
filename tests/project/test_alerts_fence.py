"""The fence around the statistics the alerts judge with (`monitor/evidence/`): it imports
nothing of the alerts (not the engine, the rule kinds or their entries); the rest of the
product reaches it only through its interface, the package `monitor.evidence`, never one of
its modules; the alert engine does not reach it at all; the rule kinds do no arithmetic on counts (`_count_arithmetic`); and the
regression kind calls a small interface of it (`_evidence_names`)."""

from __future__ import annotations

import ast

from tests.project.test_import_graph import PACKAGE, _graph

EVIDENCE = "monitor.evidence"
ENGINE = "monitor.alerts.engine"
KINDS = PACKAGE / "alerts" / "kinds"
# Names (variables, attributes, subscripted containers) that hold counts of verdicts.
COUNTS = frozenset(
    {"samples", "defects", "squares", "n", "fails", "failures", "count", "counts", "total"}
)
ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
# Calls that pass a count through to an arithmetic operand unchanged in kind.
PASS_THROUGH = frozenset({"abs", "float", "int", "len", "max", "min", "round", "sum"})


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _breaches(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module in sorted(graph):
        for target in sorted(graph[module]):
            if _inside(module, EVIDENCE):
                if _inside(target, "monitor.alerts"):
                    found.append(f"{module} imports {target}: the evidence knows no rule")
            elif _inside(target, EVIDENCE):
                if module == ENGINE:
                    found.append(f"{ENGINE} imports {target}: the engine calls no statistics")
                elif target != EVIDENCE:
                    found.append(f"{module} imports {target}: only {EVIDENCE} is the interface")
    return found


def test_the_statistics_are_fenced() -> None:
    graph = _graph()
    assert any(_inside(m, EVIDENCE) and m != EVIDENCE for m in graph)
    assert EVIDENCE in graph["monitor.alerts.kinds.regression"]
    assert _breaches(graph) == []


def test_the_fence_check_finds_each_breach() -> None:
    graph = {
        "monitor.evidence.history": {"monitor.evidence.counts", "monitor.config"},
        "monitor.evidence.units": {"monitor.alerts.kinds"},
        "monitor.alerts.engine": {"monitor.evidence", "monitor.alerts.entries"},
        "monitor.alerts.kinds.slo": {"monitor.evidence.window"},
        "monitor.alerts.kinds.regression": {"monitor.evidence"},
    }
    assert _breaches(graph) == [
        "monitor.alerts.engine imports monitor.evidence: the engine calls no statistics",
        "monitor.alerts.kinds.slo imports monitor.evidence.window: only "
        "monitor.evidence is the interface",
        "monitor.evidence.units imports monitor.alerts.kinds: the evidence knows no rule",
    ]


def _counted(node: ast.expr) -> str | None:
    """The count name `node` reads: a name, an attribute or a subscript of one in `COUNTS`,
    or one passed to a `PASS_THROUGH` call (`max(1, x.samples)`)."""
    if isinstance(node, ast.Name):
        return node.id if node.id in COUNTS else None
    if isinstance(node, ast.Attribute):
        return node.attr if node.attr in COUNTS else None
    if isinstance(node, ast.Subscript):
        return _counted(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in PASS_THROUGH:
            return next((c for a in node.args if (c := _counted(a)) is not None), None)
    return None


def _count_arithmetic(source: str, name: str) -> list[str]:
    """The rule: in a rule kind, no binary arithmetic (`+ - * / // % **`) and no augmented
    assignment with such an operator has an operand that reads a count (`_counted`). Sums,
    rates, errors and tests of counts are the evidence's (`monitor.evidence`: `Baseline`,
    `Expectation`, `Batch`, `design_interval`); a kind compares what they give (means, p-values,
    thresholds) and says it."""
    found = []
    nodes = sorted(ast.walk(ast.parse(source)), key=lambda n: getattr(n, "lineno", 0))
    for node in nodes:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ARITHMETIC):
            operands = [node.left, node.right]
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ARITHMETIC):
            operands = [node.target, node.value]
        else:
            continue
        read = [c for o in operands if (c := _counted(o)) is not None]
        if read:
            found.append(f"{name}:{node.lineno} {ast.unparse(node)}: arithmetic on {read[0]}")
    return found


def test_the_rule_kinds_do_no_arithmetic_on_counts() -> None:
    kinds = sorted(KINDS.rglob("*.py"))
    assert any(p.name == "regression.py" for p in kinds)
    found = [
        breach
        for path in kinds
        for breach in _count_arithmetic(
            path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE))
        )
    ]
    assert found == []


def test_the_count_rule_finds_planted_arithmetic() -> None:
    planted = "\n".join(
        [
            "reference = Moments(e.samples, e.mean * e.samples, 0.0)",
            "variance = e.variance * e.design / max(1, current.samples)",
            "state.pending[k] += count",
            "rate = fails / n",
            "effective = current.samples / design",
            "left = total - counts[0]",
        ]
    )
    assert [line.split(" ", 1)[0] for line in _count_arithmetic(planted, "k.py")] == [
        "k.py:1",
        "k.py:2",
        "k.py:3",
        "k.py:4",
        "k.py:5",
        "k.py:6",
    ]
    allowed = "\n".join(
        [
            "increase = current.mean - expected.mean",
            "fire = ready and own >= m / 2",
            "ready = current.samples >= cfg.min_samples",
            "span = now - entry.started_at",
            "reference = expected.reference()",
        ]
    )
    assert _count_arithmetic(allowed, "k.py") == []


# The regression kind's interface to the statistics: what it calls of `monitor.evidence`,
# over all of its modules (`monitor/alerts/kinds/regression*.py`).
REGRESSION_EVIDENCE_NAMES = 7


def _evidence_names(sources: dict[str, str]) -> set[str]:
    """The distinct names `sources` (module name -> text) import from the evidence."""
    names = set()
    for source in sources.values():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import) and any(_inside(a.name, EVIDENCE) for a in node.names):
                names.add("the module itself")
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                if _inside(node.module, EVIDENCE):
                    names.update(a.name for a in node.names)
                elif node.module == "monitor" and any(a.name == "evidence" for a in node.names):
                    names.add("the module itself")
    return names


def test_the_regression_kind_calls_a_small_interface_of_the_evidence() -> None:
    sources = {p.name: p.read_text(encoding="utf-8") for p in KINDS.glob("regression*.py")}
    assert "regression.py" in sources and len(sources) > 1
    names = _evidence_names(sources)
    assert "Baseline" in names
    assert len(names) <= REGRESSION_EVIDENCE_NAMES, sorted(names)


def test_the_names_count_finds_each_way_of_importing() -> None:
    sources = {
        "a": "from monitor.evidence import Baseline, Moments\nfrom monitor.config import Config\n",
        "b": "from monitor.evidence import Moments, bets\n",
        "c": "def f() -> None:\n    from monitor.evidence.window import SlidingWindow\n",
        "d": "import monitor.evidence as ev\n",
        "e": "from monitor import evidence\n",
    }
    assert _evidence_names(sources) == {
        "Baseline",
        "Moments",
        "bets",
        "SlidingWindow",
        "the module itself",
    }
