"""The package's import graph: config is a leaf, and no module imports itself back through
others (imports inside functions count: they hide a cycle, they do not remove it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "monitor"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                # `from pkg import sub` names the submodule when there is one.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    graph = _graph()
    assert "monitor.config" in graph and graph["monitor.records"] is not None
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_config_imports_nothing_of_the_pipeline() -> None:
    graph = _graph()
    package = {m for m in graph if m == "monitor.config" or m.startswith("monitor.config.")}
    assert {t for m in package for t in graph[m]} - package - {"monitor"} == set()
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, monitor.config; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in {'numpy', 'wordllama', 'litellm', 'kafka', 'grpc'}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == "[]", loaded.stdout


# -- layering --------------------------------------------------------------------------

# Lowest first; a module belongs to the layer of its longest matching prefix. Prefixes
# name modules that may not exist yet: the rule holds for them from their first commit.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "shared machinery",
        frozenset(
            {
                # Machinery that knows no stage (`monitor/shared/`).
                "monitor.shared",
                "monitor.config",
                "monitor.records",
                # What a record may hold and costs (record_limits).
                "monitor.records.limits",
                "monitor.spans",
                # The conventions table, as data: read by the span decoders (which log
                # records to take) and the extraction alike.
                "monitor.conventions",
                # Spans → records: read by the trace stage (what sampling needs) and run in
                # the evaluation stage's task.
                "monitor.extraction",
                "monitor.telemetry",
                # Every metric, declared once: read by `monitor.telemetry`.
                "monitor.telemetry_metrics",
                "monitor.shared.retry",
                "monitor.records.redaction",
                "monitor.pool",
                "monitor.component",
                # An evaluation's result: what sinks are handed.
                "monitor.results",
                # Sampling rates raised by alert rules, read by the sampler.
                "monitor.boosts",
                # A record's dimensions: written in results lines, read by the alerts.
                "monitor.records.where",
                # The statistics alert rules judge with, fenced
                # (tests/project/test_alerts_fence.py).
                "monitor.evidence",
            }
        ),
    ),
    ("scoring", frozenset({"monitor.detector", "monitor.judge", "monitor.evaluators"})),
    (
        "stages",
        frozenset(
            {
                "monitor.receivers",
                "monitor.processors",
                "monitor.exporters",
                "monitor.alerts",
                "monitor.audit",
            }
        ),
    ),
    (
        "wiring",
        frozenset(
            {
                "monitor",
                "monitor.pipeline",
                "monitor.service",
                "monitor.__main__",
                "monitor.cli",
            }
        ),
    ),
)
# The stages know each other only through `monitor.component`: only the wiring imports two.
STAGES = (
    "monitor.receivers",
    "monitor.processors",
    "monitor.exporters",
    "monitor.alerts",
    "monitor.audit",
)
# Generic machinery that must know no stage and nothing about evaluation.
STAGELESS = ("monitor.pool", "monitor.shared.processes", "monitor.shared.retry")


def _within(module: str, prefix: str) -> bool:
    """`module` is `prefix` or inside it; the package itself (`monitor`, its `__init__`)
    contains only itself here."""
    return module == prefix or (prefix != "monitor" and module.startswith(prefix + "."))


def _layer(module: str) -> int:
    """The index in LAYERS of `module`'s longest matching prefix; -1 when none matches."""
    best, best_length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if _within(module, prefix) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    return best


def _violations(graph: dict[str, set[str]]) -> list[str]:
    found = [f"{m}: in no layer of LAYERS" for m in sorted(graph) if _layer(m) < 0]
    for module in sorted(graph):
        for target in sorted(graph[module]):
            if _layer(target) > _layer(module) >= 0:
                found.append(
                    f"{module} ({LAYERS[_layer(module)][0]}) imports {target} "
                    f"({LAYERS[_layer(target)][0]})"
                )
            for stage in STAGES:
                if not _within(module, stage) and _within(target, stage) and _layer(module) == 2:
                    found.append(f"{module} imports another stage: {target}")
            if any(_within(module, p) for p in STAGELESS) and not any(
                _within(target, p) for p in STAGELESS
            ):
                if _layer(target) != 0 or _within(target, "monitor.evaluators"):
                    found.append(f"{module} must know no stage or evaluator: imports {target}")
    return found


def test_no_import_runs_up_the_layers() -> None:
    """Shared machinery < scoring (detector, judge, evaluators) < stages (receivers,
    processors, exporters, alerts; none imports another) < wiring (service, CLI); the
    process pool and the retry policy import only shared machinery."""
    graph = _graph()
    assert _violations(graph) == []
    assert _layer("monitor.exporters.prometheus") == 2 and _layer("monitor.results") == 0


def test_the_layering_check_finds_upward_and_sideways_imports() -> None:
    graph = {
        "monitor.telemetry": {"monitor"},
        "monitor": set(),
        "monitor.exporters.alertmanager": {"monitor.alerts.engine"},
        "monitor.alerts.engine": {"monitor.processors.evaluate", "monitor.component"},
        "monitor.processors.evaluate": {"monitor.evaluators.registry"},
        "monitor.evaluators.registry": set(),
        "monitor.component": set(),
        "monitor.pool.workers": {"monitor.processors.trace", "monitor.telemetry"},
        "monitor.processors.trace": set(),
        "monitor.shared.retry": {"monitor.evaluators.base"},
        "monitor.evaluators.base": set(),
        "monitor.results": set(),
        "monitor.stray": set(),
    }
    assert _violations(graph) == [
        "monitor.stray: in no layer of LAYERS",
        "monitor.alerts.engine imports another stage: monitor.processors.evaluate",
        "monitor.exporters.alertmanager imports another stage: monitor.alerts.engine",
        "monitor.pool.workers (shared machinery) imports monitor.processors.trace (stages)",
        "monitor.pool.workers must know no stage or evaluator: imports monitor.processors.trace",
        "monitor.shared.retry (shared machinery) imports monitor.evaluators.base (scoring)",
        "monitor.shared.retry must know no stage or evaluator: imports monitor.evaluators.base",
        "monitor.telemetry (shared machinery) imports monitor (wiring)",
    ]
