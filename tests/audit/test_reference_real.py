"""A real reference judge that fails every anchor gives no estimate and says why.

The judge is SmolLM2 served by llama.cpp (`harness/llama_server.py`) behind the forwarding
proxy of `test_judge_drift_real.py`, which pushes the model to one answer with a strong
logit bias for "No" (unsupported): a model that fails every record. The running service
checks it on the anchors at start; the audit whose reference it is withholds its estimate
and says so in `GET /audit`, its gauge and a log line naming the judge and its anchor
figures, where the same verdicts unchecked give an estimate of full confidence. (An honest
reference giving the estimate it gives unchecked: `test_reference_check.py`.)"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness.llama_server import MODEL
from harness.wait import wait_until_async
from monitor.audit.sink import AuditSink
from monitor.component import Evaluated
from monitor.config import Config
from monitor.config._audit import Audit
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.service import Service
from monitor.telemetry import create_telemetry
from tests.audit.test_audit_sink import Clock, _share
from tests.audit.test_judge_drift_real import DriftingJudge, _anchors
from tests.judge.test_judge_real_model import model_server  # noqa: F401  (the SmolLM2 server)

DETECTOR, JUDGE = "local_groundedness", "fact_check"
FAILS = {"No": 100}  # llama.cpp's token keys: the model all but always says "No"
# Two anchors of each label: a judge that fails all four is right on half, all one way (the
# claim needs no more, and each anchor is a call of a few hundred prompt tokens).
PER_LABEL = 2
ANCHORS = 2 * PER_LABEL


def _verdicts(sink: AuditSink) -> None:
    """400 records, a quarter of them detector defects; the reference fails every one it
    scores, as the pushed model does."""
    items = []
    for i in range(400):
        results = {DETECTOR: EvalResult(DETECTOR, passed=i % 4 != 0)}
        results[JUDGE] = EvalResult(JUDGE, passed=False)
        items.append(
            Evaluated(RagRecord(request_id=f"req-{i}", service="shop", response="a"), results)
        )
    sink.emit(items)


@pytest.mark.e2e  # one check of four anchors on a real model
@pytest.mark.timeout(900)
@pytest.mark.asyncio
async def test_a_real_reference_that_fails_every_anchor_gives_no_estimate_and_says_why(
    model_server: str,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    proxy = DriftingJudge(model_server, swap_at=0, hold_at=ANCHORS, bias=FAILS)
    async with proxy.serving():
        config = Config.model_validate(
            {
                "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
                "judge": {
                    "model": MODEL,
                    "api_base": proxy.url,
                    "structured_output": "on",
                    "max_output_tokens": 32,
                    "max_concurrency": 1,
                    "retries": 0,
                    "timeout_s": 120,
                },
                "evaluators": [{"name": DETECTOR}, {"name": JUDGE}],
                "pipeline": {"processes": 0},
                "audit": {
                    "evaluator": DETECTOR,
                    "reference": JUDGE,
                    "share": 0.25,
                    "min_audited": 2,
                    "anchors": {
                        "enabled": True,
                        "every": "1h",
                        "file": str(_anchors(tmp_path / "anchors.json", PER_LABEL)),
                    },
                },
            }
        )
        service = Service(config, serve_http=False, with_receivers=False)
        sink = next(s for s in service.pipeline.sinks if isinstance(s, AuditSink))
        registry = service.telemetry.registry

        def gauge(name: str, **labels: str) -> float | None:
            return registry.get_sample_value(f"rag_monitor_{name}", labels)

        with caplog.at_level(logging.WARNING):
            await service.start()
            try:
                await wait_until_async(
                    lambda: gauge("judge_anchor_accuracy", evaluator=JUDGE) is not None,
                    600,
                    "the anchor check at start",
                )
                assert proxy.served == ANCHORS
                _verdicts(sink)
                sink.refresh()
                page = sink.page()
            finally:
                await service.shutdown(30)
    # The pushed model failed every anchor: half of them right, its verdicts all one way.
    assert gauge("judge_anchor_accuracy", evaluator=JUDGE) == 0.5
    why = (
        f"the reference {JUDGE} got 50% of {ANCHORS} anchors right at its last check (an "
        "audit needs 80%) and failed 100% of them: its verdicts are all one way"
    )
    assert page["withheld"] == why
    shop = page["services"]["shop"]
    assert shop["estimate"] is None and shop["audited_only"] is None
    assert gauge("audit_estimate_withheld", evaluator=DETECTOR) == 1
    assert gauge("defect_rate_estimate", service="shop", evaluator=DETECTOR, bound="upper") is None
    assert f"judge {JUDGE} on the anchors: {why}" in caplog.text
    # The same verdicts with no check, as before references were checked: an estimate.
    unchecked = AuditSink(
        Audit(evaluator=DETECTOR, reference=JUDGE, share=0.25, min_audited=2),
        create_telemetry(),
        lambda record: _share(record, 1.0),
        clock=Clock(),
    )
    _verdicts(unchecked)
    unchecked.refresh()
    trusted = unchecked.page()["services"]["shop"]["estimate"]
    assert trusted is not None and trusted["estimate"] > 0.9
