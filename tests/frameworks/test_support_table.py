"""The README's "Tracing your app" table and the real-framework tests agree: every
`app:instrumentation:variant` the table names is a test case, and every agent stack the
tests drive for real is in the table."""

from __future__ import annotations

import re

from tests.frameworks.test_frameworks_agents import AGENT_STACKS
from tests.frameworks.test_frameworks_agents import APPS as AGENT_APPS
from tests.frameworks.test_frameworks_real import APPS as RAG_APPS
from tests.frameworks.test_frameworks_real import REPO

_CASE = re.compile(r"`([a-z_]+):([a-z0-9-]+):([a-z0-9_-]+)`")


def _table() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Tracing your app") :]
    section = section[: section.index("\n## ")]
    return [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]


def test_every_case_the_table_names_is_tested_and_every_agent_stack_is_named() -> None:
    rows = _table()
    assert rows[0].startswith("| your app | tracing |")
    named = {m.groups() for row in rows for m in _CASE.finditer(row.split("|")[-2])}
    tested = {(a, i, v) for a, i, v, _ in [*AGENT_APPS, *AGENT_STACKS]} | set(RAG_APPS)
    assert named, "the table names no tests"
    assert named <= tested, named - tested
    assert {(a, i, v) for a, i, v, _ in AGENT_STACKS} <= named
