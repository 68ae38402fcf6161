"""The fence around the statistics the alerts judge with (`monitor/evidence/`): it imports
nothing of the alerts (not the engine, the rule kinds or their entries); the rest of the
product reaches it only through its interface, the package `monitor.evidence`, never one of
its modules; the alert engine does not reach it at all; and no module of either package is
over 400 lines."""

from __future__ import annotations

from tests.project.test_import_graph import PACKAGE, _graph

EVIDENCE = "monitor.evidence"
ENGINE = "monitor.alerts.engine"
MAX_LINES = 400


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


def test_no_statistics_or_alerts_module_is_over_400_lines() -> None:
    modules = sorted((PACKAGE / "evidence").rglob("*.py")) + sorted(
        (PACKAGE / "alerts").rglob("*.py")
    )
    lines = {
        str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines())
        for p in modules
    }
    assert len(lines) > 1
    assert {name: n for name, n in lines.items() if n > MAX_LINES} == {}
