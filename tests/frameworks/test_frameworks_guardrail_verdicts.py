"""A real app with a guardrail that records its verdicts, against a running monitor
(docs/external-evaluations.md): `tests/frameworks/apps/guardrail_app.py`, a RAG app traced
by Microsoft's OpenTelemetry distro (`microsoft-opentelemetry`), from its own environment
(`tests/frameworks/envs/ms-guardrail/`). Its guardrail (`answer-shield`) judges each answer
and the distro's `ApplyGuardrailScope` records the decision: an `apply_guardrail` span
naming the guardrail, its version and decision (`microsoft.guardian.*`,
`microsoft.security.decision.type`), with one `microsoft.security.finding` event per risk
category found. No shipped vocabulary names these attributes: the monitor reads them through
a vocabulary declared in its config (`external_verdicts.vocabularies`, `VOCABULARY`), the
app's spans sent over OTLP/HTTP to the monitor (`Service`, in this process).

The app runs three times against one monitor: its guardrail at `shield-v1` while its
scripted model leaks a contact address into one answer in six, then three; then its
guardrail at `shield-v2` over the same three. One answer in six links outside the sources
in every run (flagged). The real runs prove that each decision reaches
the record of its question as a `guardrail:answer-shield` verdict (blocked, flagged or
passed, per category, with the guardrail's version as its revision), counted per evaluator
(`evaluations_total`) and per guardrail and category (`guardrail_verdicts_total`); and that
the guardrail's new version is a new revision on the same answers.

Paging needs hours of verdicts: the verdicts the monitor read in these runs are replayed
into the alert engine on simulated time, each on a request of its own, as
`tests/frameworks/test_frameworks_external_verdicts.py` does: the first run's for a
baseline, then the second's (the app's fail rate, blocked or flagged, doubled: 2/6 to 4/6)
pages; the first's, then the third's (the same doubled rate, from the guardrail's new
version) starts a new baseline and does not page."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial

import pytest

from harness.framework_envs import APP_IDLE_TIMEOUT_S, APP_WAIT_S, run_python_app
from harness.wait import wait_until_async
from monitor.alerts import AlertEngine
from monitor.component import Alert
from monitor.config import Config
from monitor.receivers.otlp import OtlpReceivers
from monitor.results import EvalResult
from monitor.service import Service
from tests.frameworks._verdict_replay import AppRun, baselines_started, replay
from tests.frameworks.apps.framework_apps import PLANTED_THREE, QUESTIONS
from tests.receivers.test_external_verdicts import Capture

pytestmark = pytest.mark.e2e

SERVICE = "guardrail-app"
EVALUATOR = "guardrail:answer-shield"  # the guardrail's `microsoft.guardian.name`
# (guardrail version, variant): the runs, in order, against one monitor.
RUNS = (("shield-v1", "leaks-1"), ("shield-v1", "leaks-3"), ("shield-v2", "leaks-3"))
# What `ApplyGuardrailScope` writes (microsoft-opentelemetry 1.5.0), declared as the docs
# show: the span carries the guardrail's name, version and decision; each finding event its
# category, score and, when it overrides the decision, its own.
VOCABULARY = {
    "name": "microsoft-guardrail",
    "kind": "guardrail",
    "events": ["microsoft.security.finding"],
    "span_key": "microsoft.security.decision.type",
    "evaluator": ["microsoft.guardian.name", "microsoft.guardian.id"],
    "label": ["microsoft.security.policy.decision.type", "microsoft.security.decision.type"],
    "category": ["microsoft.security.risk.category"],
    "score": ["microsoft.security.risk.score"],
    "explanation": ["microsoft.security.decision.reason"],
    "version": ["microsoft.guardian.version", "microsoft.security.policy.version"],
    "outcomes": {
        "deny": "blocked",
        "modify": "flagged",
        "warn": "flagged",
        "audit": "flagged",
        "allow": "passed",
    },
}
# The guardrail's decisions as the monitor's outcomes.
OUTCOME = {"deny": "blocked", "warn": "flagged", "allow": "passed"}


@dataclass
class Observed:
    runs: list[AppRun]
    counted: dict[tuple[str, str], float]  # (evaluator, outcome) → evaluations_total
    guarded: dict[tuple[str, str], float]  # (category, verdict) → guardrail_verdicts_total
    refused: float  # external_verdicts_refused_total, every reason


def _config() -> Config:
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"endpoint": "127.0.0.1:0"}}
            },
            "trace_assembly": {"idle_timeout_s": APP_IDLE_TIMEOUT_S},
            "evaluators": [{"name": "local_relevance"}],
            "pipeline": {"processes": 0},
            "external_verdicts": {"services": [SERVICE], "vocabularies": [VOCABULARY]},
        }
    )


def _all_in(ids: list[str], results: dict[str, dict[str, EvalResult]]) -> bool:
    return all(i in results for i in ids)


def _metric(monitor: Service, name: str, **labels: str) -> float:
    return monitor.telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0


async def _observe() -> Observed:
    capture = Capture()
    service = Service(_config(), serve_http=False, extra_sinks=[capture])
    await service.start()
    try:
        (otlp,) = [r for r in service.receivers if isinstance(r, OtlpReceivers)]
        assert otlp.http is not None
        endpoint = f"http://127.0.0.1:{otlp.http.port}/v1/traces"
        runs = []
        for version, variant in RUNS:
            answers, _ = await run_python_app("guardrail", version, variant, endpoint)
            ids = [str(a["trace_id"]) for a in answers]
            await wait_until_async(
                partial(_all_in, ids, capture.results),
                APP_WAIT_S,
                f"the records of the {version} {variant} run",
            )
            runs.append(AppRun.taken(EVALUATOR, answers, capture.results, capture.records))
        where = {"service": SERVICE, "version": "", "route": "/ask"}
        counted = {
            (evaluator, outcome): _metric(
                service, "evaluations_total", **where, evaluator=evaluator, outcome=outcome
            )
            for evaluator in (EVALUATOR, "local_relevance")
            for outcome in ("pass", "fail", "error")
        }
        guarded = {
            (category, verdict): _metric(
                service,
                "guardrail_verdicts_total",
                **where,
                guardrail=EVALUATOR,
                category=category,
                verdict=verdict,
            )
            for category in ("pii", "external_link", "unspecified")
            for verdict in ("blocked", "flagged", "passed")
        }
        refused = sum(
            s.value
            for metric in service.telemetry.registry.collect()
            if metric.name == "rag_monitor_external_verdicts_refused"
            for s in metric.samples
            if s.name.endswith("_total")
        )
    finally:
        await service.shutdown(10)
    return Observed(runs, counted, guarded, refused)


@pytest.fixture(scope="module")
def observed() -> Observed:
    return asyncio.run(_observe())


def _leaked(variant: str) -> set[str]:
    """The questions whose answers the scripted model leaked an address into."""
    uris = list(PLANTED_THREE)[: int(variant.removeprefix("leaks-"))]
    return {q for q, uri in QUESTIONS if uri in uris}


def test_each_guardrail_decision_joins_its_questions_record(observed: Observed) -> None:
    for run, (version, variant) in zip(observed.runs, RUNS, strict=True):
        leaked = _leaked(variant)
        assert [a["question"] for a in run.answers] == [q for q, _ in QUESTIONS]
        for answer, (record, verdict) in zip(run.answers, run.judged(), strict=True):
            assert (record.service, record.route) == (SERVICE, "/ask")
            assert (record.query, record.response) == (answer["question"], answer["response"])
            assert record.context_text == answer["sources"]
            # The app's guardrail decided as the test planted...
            expected = "deny" if answer["question"] in leaked else answer["decision"]
            assert answer["decision"] == expected
            assert ("pii" in answer["categories"]) == (answer["question"] in leaked)
            # ...and the monitor read its decision, categories and version.
            outcome = OUTCOME[answer["decision"]]
            assert (verdict.label, verdict.passed, verdict.revision) == (
                outcome,
                outcome == "passed",
                version,
            )
            assert verdict.safety is not None
            assert set(verdict.safety) == (set(answer["categories"]) or {"unspecified"})
            assert verdict.explanation
            assert "local_relevance" in run.results[answer["trace_id"]]  # the monitor's own
        assert [a["decision"] for a in run.answers].count("warn") == 1  # the honey answer


def test_the_guardrails_verdicts_are_counted_per_evaluator_and_category(
    observed: Observed,
) -> None:
    counted, guarded = observed.counted, observed.guarded
    # Blocked 1 + 3 + 3, flagged 1 a run: 7 + 3 defects, 8 passed of 18.
    assert [counted[(EVALUATOR, o)] for o in ("pass", "fail", "error")] == [8, 10, 0]
    assert guarded == {
        ("pii", "blocked"): 7,
        ("pii", "flagged"): 0,
        ("pii", "passed"): 0,
        ("external_link", "blocked"): 0,
        ("external_link", "flagged"): 3,
        ("external_link", "passed"): 0,
        ("unspecified", "blocked"): 0,
        ("unspecified", "flagged"): 0,
        ("unspecified", "passed"): 8,
    }
    own = [counted[("local_relevance", o)] for o in ("pass", "fail", "error")]
    assert (own[0] + own[1], own[2]) == (18, 0)
    assert observed.refused == 0


def test_the_guardrail_changing_its_version_is_a_new_revision(observed: Observed) -> None:
    _, before, after = observed.runs
    old = [(r.response, v.label, v.revision) for r, v in before.judged()]
    new = [(r.response, v.label, v.revision) for r, v in after.judged()]
    # The same answers, the same verdicts: only the guardrail's revision changed.
    assert [o[:2] for o in old] == [n[:2] for n in new]
    assert {o[2] for o in old} == {"shield-v1"}
    assert {n[2] for n in new} == {"shield-v2"}


RULE = "app_guardrail"


def _replay(phases: list[tuple[float, AppRun]]) -> tuple[list[Alert], AlertEngine]:
    return replay(RULE, EVALUATOR, [(seconds, run.judged()) for seconds, run in phases])


def _share(run: AppRun, labels: set[str]) -> float:
    verdicts = [v for _, v in run.judged()]
    return sum(v.label in labels for v in verdicts) / len(verdicts)


def _fail_rate(run: AppRun) -> float:
    """The guardrail's defects: answers blocked or flagged."""
    return _share(run, {"blocked", "flagged"})


def test_a_doubling_of_the_apps_fail_rate_pages(observed: Observed) -> None:
    """More answers blocked (one in six, then three): the fail rate doubles."""
    baseline, doubled, _ = observed.runs
    assert _share(doubled, {"blocked"}) == 3 * _share(baseline, {"blocked"})
    assert _fail_rate(doubled) == 2 * _fail_rate(baseline)
    sent, _ = _replay([(900, baseline), (300, doubled)])
    firing = [a for a in sent if a.status == "firing"]
    assert firing, "the doubling paged"
    assert {a.rule for a in firing} == {RULE}
    assert firing[0].annotations["evaluator_revision"] == "shield-v1"


def test_the_guardrail_changing_its_version_does_not_page(observed: Observed) -> None:
    """The guardrail's new version fails twice the old one's share: a new baseline."""
    baseline, _, new_guard = observed.runs
    assert _fail_rate(new_guard) == 2 * _fail_rate(baseline)
    sent, engine = _replay([(900, baseline), (600, new_guard)])
    assert [a for a in sent if a.status == "firing"] == []
    assert baselines_started(engine, RULE, "revision") == 1


def test_the_steady_guardrail_never_pages(observed: Observed) -> None:
    baseline = observed.runs[0]
    sent, _ = _replay([(1500, baseline)])
    assert sent == []
