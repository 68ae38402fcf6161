"""A new version whose prompt loses its documents (no retriever traced, the documents only in
the prompt) makes records with no context: groundedness skips them, it does not fail them,
so the hallucination rate does not move. The shipped default rules watch the share of such
records against the service's own history (`context_missing_regression`), and page saying
the context went missing: at a 20 % canary (naming its version) and fully rolled out. The
engine as the default config builds it, on an injected clock, judged every 15 s."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from monitor.alerts import AlertEngine
from monitor.component import Alert, Evaluated
from monitor.config import load_config
from monitor.records import ContextDoc, RagRecord
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock, question, verdict

# Hours of a canary and its rollout on a simulated clock.
pytestmark = pytest.mark.scorecard

RULE = "context_missing_regression"
DOCS = (ContextDoc(content="The kettle has a two-year warranty."),)


def _record(n: int, version: str, context: bool) -> RagRecord:
    return RagRecord(
        request_id=f"r{n}",
        trace_id=f"{n:032x}",
        service="shop",
        version=version,
        query=question(n),
        response="a",
        retrieved_context=DOCS if context else (),
    )


def _run(
    tmp_path: Path, new_share: float, back_s: int = 0
) -> tuple[list[Alert], list[tuple[str, str]], float]:
    """Three hours of version 1.0 (every record with context, 10 % failing groundedness),
    then version 2.0 on `new_share` of the traffic, its records without context, for an
    hour, then version 1.0 alone for `back_s`; one record a second. Returns what was sent, what fires at the end, and the
    minutes from the new version to the first page of `RULE`."""
    empty = tmp_path / "monitor.yaml"
    empty.write_text("")
    config = load_config(empty, environ={})
    assert RULE in [r.name for r in config.alerts.rules]  # a shipped default
    clock = Clock()
    start = clock.now
    engine = AlertEngine.from_config(config, create_telemetry(), clock=clock)
    rng = random.Random(3)
    sent: list[Alert] = []
    first = float("nan")
    tick = start + 15
    for n in range(4 * 3600 + back_s):
        clock.now = start + n
        while clock.now >= tick:
            sent += engine.evaluate()
            tick += 15
        new = 3 * 3600 <= n < 4 * 3600 and rng.random() < new_share
        results: dict[str, EvalResult] = {}
        if not new:
            results["local_groundedness"] = verdict("local_groundedness", rng.random() >= 0.1)
        results["local_relevance"] = verdict("local_relevance", True)
        engine.emit([Evaluated(_record(n, "2.0" if new else "1.0", context=not new), results)])
        if engine.evaluation_due:
            sent += engine.evaluate()
        if first != first and (RULE, "shop") in engine.firing():
            first = (clock.now - start - 3 * 3600) / 60
    return sent, engine.firing(), first


@pytest.mark.parametrize("share", [0.2, 1.0], ids=["canary-20pct", "rolled-out"])
def test_a_version_that_loses_its_context_pages_saying_so(tmp_path: Path, share: float) -> None:
    sent, firing, minutes = _run(tmp_path, share)
    assert firing == [(RULE, "shop")]  # and not the hallucination rule: nothing failed more
    assert minutes <= 15, minutes
    page = next(a for a in sent if a.labels["alertname"] == RULE and a.status == "firing")
    assert page.labels["severity"] == "page"
    # What the routing tells it from a defect rate's page by (its inhibit rules: the
    # Prometheus mirror of the hallucination rule still notifies).
    assert page.labels["measure"] == "no_context"
    summary = page.annotations["summary"]
    assert summary.startswith("the context went missing: share of records with no context")
    assert "on shop rose from 0.00 to " in summary
    if share < 1:
        # The canary carries the whole excess: its Where alert names the version.
        where = next(a for a in sent if a.labels["alertname"] == f"{RULE}_where")
        assert (where.labels["dimension"], where.labels["value"]) == ("version", "2.0")
    before = [a for a in sent if a.labels["alertname"] == RULE]
    assert before and all(a.starts_at == page.starts_at for a in before)


def test_the_resolve_says_the_context_is_back(tmp_path: Path) -> None:
    """The canary rolled back: one resolve, saying the context is back at the window's
    share, not "the context went missing: ... rose from 0.00 to 0.00"."""
    sent, firing, _ = _run(tmp_path, 0.2, back_s=3600)
    assert firing == []
    (resolved,) = [a for a in sent if a.labels["alertname"] == RULE and a.status == "resolved"]
    summary = resolved.annotations["summary"]
    assert summary.startswith("the context is back: share of records with no context"), summary
    assert " on shop came back to 0.0" in summary and "against 0.00 expected" in summary, summary
