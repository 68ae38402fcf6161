"""The fence around the alerts' statistics (`monitor/alerts/evidence/`): it imports nothing
else of the alerts (not the engine, the rule kinds or their entries); the rest of the alerts
reach it only through its interface, the package `monitor.alerts.evidence`, never one of its
modules; the engine does not reach it at all; and none of its modules is over 400 lines."""

from __future__ import annotations

from tests.project.test_import_graph import PACKAGE, _graph

EVIDENCE = "monitor.alerts.evidence"
ENGINE = "monitor.alerts.engine"
MAX_LINES = 400


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _breaches(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module in sorted(graph):
        for target in sorted(graph[module]):
            if _inside(module, EVIDENCE):
                if _inside(target, "monitor.alerts") and not _inside(target, EVIDENCE):
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
        "monitor.alerts.evidence.history": {"monitor.alerts.evidence.counts", "monitor.config"},
        "monitor.alerts.evidence.units": {"monitor.alerts.kinds"},
        "monitor.alerts.engine": {"monitor.alerts.evidence", "monitor.alerts.entries"},
        "monitor.alerts.kinds.slo": {"monitor.alerts.evidence.window"},
        "monitor.alerts.kinds.regression": {"monitor.alerts.evidence"},
    }
    assert _breaches(graph) == [
        "monitor.alerts.engine imports monitor.alerts.evidence: the engine calls no statistics",
        "monitor.alerts.evidence.units imports monitor.alerts.kinds: the evidence knows no rule",
        "monitor.alerts.kinds.slo imports monitor.alerts.evidence.window: only "
        "monitor.alerts.evidence is the interface",
    ]


def test_no_statistics_module_is_over_400_lines() -> None:
    modules = sorted((PACKAGE / "alerts" / "evidence").glob("*.py"))
    lines = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in modules}
    assert len(lines) > 1
    assert {name: n for name, n in lines.items() if n > MAX_LINES} == {}
