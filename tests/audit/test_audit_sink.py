"""The audit sink: which records count and which are audited (the sampling hash), the
reference judge's verdicts and its failures, labels joining their records, the bounded
memory of pending records, the window, and the gauges."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from monitor.audit.labels import LabelFile, parse_label
from monitor.audit.saved import MAX_SLICE_VALUES
from monitor.audit.sink import BUCKETS, AuditSink
from monitor.component import Evaluated
from monitor.config import Config, ConfigError, load_config
from monitor.config._audit import Audit, LabelFeed
from monitor.evidence.ppi import Tally, estimate
from monitor.processors.sampler import sampling_position
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry

SHARE = 0.25
DETECTOR, JUDGE = "local_groundedness", "faithfulness"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _record(i: int, service: str = "shop") -> RagRecord:
    return RagRecord(request_id=f"req-{i}", service=service, query="q", response="a")


def _audited(i: int) -> bool:
    return sampling_position(f"req-{i}") < SHARE


def _share(record: RagRecord, rate: float) -> bool | None:
    """As the pipeline decides: the detector's rate and `SHARE` of it, by the hash."""
    position = sampling_position(record.sampling_key)
    return None if position >= rate else position < rate * SHARE


def _results(detector: bool | None, reference: bool | str | None = None) -> dict[str, EvalResult]:
    """Verdicts as defects (True = fail); None = an error; reference "absent": not scored."""
    out = {DETECTOR: _verdict(DETECTOR, detector)}
    if reference != "absent":
        out[JUDGE] = _verdict(JUDGE, reference if not isinstance(reference, str) else None)
    return out


def _verdict(name: str, defect: bool | None) -> EvalResult:
    if defect is None:
        return EvalResult(name, error="judge timed out")
    return EvalResult(name, passed=not defect)


def _sink(telemetry: Telemetry, clock: Clock, rate: float = 1.0, **audit: Any) -> AuditSink:
    section = Audit(evaluator=DETECTOR, reference=JUDGE, share=SHARE, min_audited=2, **audit)
    return AuditSink(section, telemetry, lambda record: _share(record, rate), clock=clock)


def _gauge(t: Telemetry, name: str, **labels: str) -> float | None:
    return t.registry.get_sample_value(f"rag_monitor_{name}", labels)


def _count(t: Telemetry, name: str, **labels: str) -> float:
    return t.registry.get_sample_value(f"rag_monitor_{name}_total", labels) or 0.0


def test_judged_audits_give_the_estimate_the_maths_gives(telemetry: Telemetry) -> None:
    clock = Clock()
    sink = _sink(telemetry, clock)
    expected = Tally()
    items = []
    for i in range(400):
        detector = i % 3 == 0
        reference = i % 4 == 0
        if _audited(i):
            expected.add_audited(detector, reference)
            items.append((_record(i), _results(detector, reference)))
        else:
            expected.add_unaudited(detector)
            items.append((_record(i), _results(detector, "absent")))
    sink.emit([Evaluated(*item) for item in items])
    want = estimate(expected, min_audited=2)
    assert want.corrected is not None
    labels = {"service": "shop", "evaluator": DETECTOR}
    for bound in ("estimate", "lower", "upper"):
        got = _gauge(telemetry, "defect_rate_estimate", **labels, bound=bound)
        assert got == pytest.approx(getattr(want.corrected, bound))
    assert _gauge(telemetry, "audit_raw_defect_rate", **labels) == pytest.approx(want.raw)
    assert _gauge(telemetry, "evaluator_miss_rate", **labels) == pytest.approx(want.miss_rate)
    assert _gauge(telemetry, "audited_records", **labels) == expected.audited
    assert _count(telemetry, "audit_records", service="shop", outcome="audited") == (
        expected.audited
    )
    page = sink.page()["services"]["shop"]
    assert page["audited"] == expected.audited and page["evaluated"] == 400
    assert page["estimate"]["lower"] == pytest.approx(want.corrected.lower)


def test_records_outside_the_random_share_do_not_count(telemetry: Telemetry) -> None:
    """At a detector rate of 0.5, a record whose position is above it was sampled for
    another reason (negative feedback, an error, a boost) and is left out."""
    sink = _sink(telemetry, Clock(), rate=0.5)
    outside = [i for i in range(200) if sampling_position(f"req-{i}") >= 0.5]
    sink.emit([Evaluated(_record(i), _results(True, True)) for i in outside])
    assert sink.page()["services"] == {}
    assert _count(telemetry, "audit_records", service="shop", outcome="unaudited") == 0


def test_a_reference_that_errs_or_does_not_score_is_counted_and_left_out(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    sink = _sink(telemetry, Clock())
    audited = [i for i in range(100) if _audited(i)][:2]
    sink.emit(
        [
            Evaluated(_record(audited[0]), _results(True, None)),
            Evaluated(_record(audited[1]), _results(True, "absent")),
        ]
    )
    assert _count(telemetry, "audit_records", service="shop", outcome="reference_error") == 1
    assert _count(telemetry, "audit_records", service="shop", outcome="reference_missing") == 1
    assert sink.page()["services"] == {}  # nothing to estimate from
    assert "the reference faithfulness failed on audited record" in caplog.text
    assert "judge timed out" in caplog.text


def _labelled(telemetry: Telemetry, clock: Clock, **audit: Any) -> AuditSink:
    section = Audit(
        evaluator=DETECTOR,
        reference="labels",
        share=SHARE,
        min_audited=2,
        labels=LabelFeed(http=True),
        **audit,
    )
    return AuditSink(section, telemetry, lambda record: _share(record, 1.0), clock=clock)


def test_labels_join_their_records_later(telemetry: Telemetry) -> None:
    clock = Clock()
    sink = _labelled(telemetry, clock)
    audited = [i for i in range(200) if _audited(i)]
    unaudited = [i for i in range(200) if not _audited(i)]
    sink.emit([Evaluated(_record(i), _results(i % 2 == 0, "absent")) for i in range(200)])
    page = sink.page()
    assert page["pending_labels"] == len(audited)
    assert page["awaiting_labels"] == [f"req-{i}" for i in audited]
    assert page["services"]["shop"]["audited"] == 0  # the unaudited ones count already
    clock.now += 3600  # labels come an hour later
    for i in audited:
        assert sink.label(f"req-{i}", i % 3 == 0, "http") is None
    assert sink.page()["pending_labels"] == 0
    assert sink.page()["services"]["shop"]["audited"] == len(audited)
    assert _count(telemetry, "audit_labels", source="http", outcome="joined") == len(audited)
    # An unaudited record, an id never seen, a second label for a joined record: refused.
    for request_id in (f"req-{unaudited[0]}", "nobody", f"req-{audited[0]}"):
        why = sink.label(request_id, True, "http")
        assert why is not None and why.startswith("unknown_id")
    assert _count(telemetry, "audit_labels", source="http", outcome="unknown_id") == 3


def test_pending_records_are_bounded_and_a_drop_is_counted(telemetry: Telemetry) -> None:
    sink = _labelled(telemetry, Clock(), max_pending=3)
    audited = [i for i in range(200) if _audited(i)][:5]
    sink.emit([Evaluated(_record(i), _results(False, "absent")) for i in audited])
    assert sink.page()["awaiting_labels"] == [f"req-{i}" for i in audited[2:]]
    assert _count(telemetry, "audit_pending_dropped", service="shop") == 2
    assert sink.label(f"req-{audited[0]}", True, "file") is not None
    assert sink.label(f"req-{audited[4]}", True, "file") is None


def test_a_flood_of_one_service_never_drops_another_s_awaiting_records(
    telemetry: Telemetry,
) -> None:
    """Past `max_pending` in all, the service awaiting the most drops its own oldest: the
    quiet service's records still take their labels."""
    sink = _labelled(telemetry, Clock(), max_pending=6)
    audited = [i for i in range(2000) if _audited(i)]
    quiet, flood = audited[:2], audited[2:42]
    sink.emit([Evaluated(_record(i, "cart"), _results(False, "absent")) for i in quiet])
    sink.emit([Evaluated(_record(i, "shop"), _results(False, "absent")) for i in flood])
    assert _count(telemetry, "audit_pending_dropped", service="shop") == len(flood) - 4
    assert _count(telemetry, "audit_pending_dropped", service="cart") == 0
    for i in quiet:
        assert sink.label(f"req-{i}", True, "http") is None
    assert sink.page()["awaiting_labels"] == [f"req-{i}" for i in flood[-4:]]


def test_a_label_after_its_window_is_refused_as_expired(telemetry: Telemetry) -> None:
    clock = Clock()
    sink = _labelled(telemetry, clock, window="1h")
    first = next(i for i in range(100) if _audited(i))
    sink.emit([Evaluated(_record(first), _results(True, "absent"))])
    clock.now += 3600 + 3600 / BUCKETS
    why = sink.label(f"req-{first}", True, "http")
    assert why is not None and why.startswith("expired")
    assert _count(telemetry, "audit_labels", source="http", outcome="expired") == 1


def test_the_window_slides_and_the_series_go(telemetry: Telemetry) -> None:
    clock = Clock()
    sink = _sink(telemetry, clock, window="1h")
    sink.emit([Evaluated(_record(i), _results(i < 50, _audited(i) and i < 60)) for i in range(200)])
    labels = {"service": "shop", "evaluator": DETECTOR}
    assert _gauge(telemetry, "audit_raw_defect_rate", **labels) == pytest.approx(0.25)
    clock.now += 1800
    sink.emit([Evaluated(_record(i), _results(False, False)) for i in range(200, 400)])
    assert _gauge(telemetry, "audit_raw_defect_rate", **labels) == pytest.approx(50 / 400)
    clock.now += 1800  # the first batch's bucket left the window
    sink.refresh()
    assert _gauge(telemetry, "audit_raw_defect_rate", **labels) == 0.0
    clock.now += 3600
    sink.refresh()
    assert _gauge(telemetry, "audit_raw_defect_rate", **labels) is None
    assert _gauge(telemetry, "defect_rate_estimate", **labels, bound="upper") is None


def test_malformed_labels_name_the_problem() -> None:
    assert parse_label({"request_id": "a", "label": "fail"}) == ("a", True)
    assert parse_label({"request_id": "a", "label": "pass"}) == ("a", False)
    assert parse_label([1]) == "a label is a JSON object, not list"
    assert parse_label({"label": "fail"}) == "request_id: missing or not a non-empty string"
    assert parse_label({"request_id": "a", "label": True}) == (
        'label: must be "pass" or "fail", got true'
    )
    assert parse_label({"request_id": "a", "label": "fail", "x": 1}) == "unknown keys: x"


def test_the_label_file_is_read_as_it_grows(telemetry: Telemetry, tmp_path: Path) -> None:
    clock = Clock()
    sink = _labelled(telemetry, clock)
    audited = [i for i in range(100) if _audited(i)][:3]
    sink.emit([Evaluated(_record(i), _results(True, "absent")) for i in audited])
    path = tmp_path / "labels.jsonl"
    path.write_text(
        f'{{"request_id": "req-{audited[0]}", "label": "fail"}}\n'
        "not json\n"
        f'{{"request_id": "req-{audited[1]}", "label": "maybe"}}\n'
        f'{{"request_id": "req-{audited[2]}", "la'  # still being written
    )
    feed = LabelFile(str(path), sink)
    assert feed.read() == 3
    assert _count(telemetry, "audit_labels", source="file", outcome="joined") == 1
    assert _count(telemetry, "audit_labels", source="file", outcome="malformed") == 2
    with path.open("a") as fh:
        fh.write('bel": "pass"}\n')
    assert feed.read() == 1
    assert _count(telemetry, "audit_labels", source="file", outcome="joined") == 2
    assert sink.page()["pending_labels"] == 1  # the one whose label was malformed


def _load(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_config(str(path))


EVALUATORS = """
judge: {model: openai/x}
evaluators:
  - name: local_groundedness
  - name: faithfulness
"""


def test_the_audit_section_is_checked_against_the_evaluators(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        EVALUATORS + "audit: {evaluator: local_groundedness, "
        "reference: faithfulness, share: 0.02}\n",
    )
    assert config.audit.enabled and config.audit.share == 0.02
    bad = [
        ("audit: {evaluator: local_groundedness}", "audit: evaluator and reference are set"),
        (
            "audit: {evaluator: local_groundedness, reference: faithfulnes}",
            "audit.reference: 'faithfulnes' is not configured",
        ),
        (
            "audit: {evaluator: local_groundedness, reference: labels}",
            "reference: labels needs labels.file or labels.http",
        ),
        (
            "audit: {evaluator: faithfulness, reference: faithfulness}",
            "audit.reference: the detector cannot be its own reference",
        ),
        (
            "audit: {evaluator: local_groundedness, reference: faithfulness, share: 0}",
            "audit.share",
        ),
    ]
    for text, problem in bad:
        with pytest.raises(ConfigError) as caught:
            _load(tmp_path, EVALUATORS + text + "\n")
        assert problem in str(caught.value), str(caught.value)
    with pytest.raises(ConfigError) as caught:
        _load(
            tmp_path,
            EVALUATORS.replace("faithfulness\n", "faithfulness\n    sample_rate: 0.1\n")
            + "audit: {evaluator: local_groundedness, reference: faithfulness}\n",
        )
    assert "audit.reference: faithfulness has its own sample_rate" in str(caught.value)


def test_each_slice_gets_its_own_estimate(telemetry: Telemetry) -> None:
    """Per version: the canary (2.0) fails more; its slice's figures are its own records'
    (the maths on them alone), and a dimension keeps at most `MAX_SLICE_VALUES` values."""
    sink = _sink(telemetry, Clock())
    expected = {"1.0": Tally(), "2.0": Tally()}
    items = []
    for i in range(400):
        version = "2.0" if i % 4 == 0 else "1.0"
        defect = i % 3 == 0 if version == "1.0" else i % 8 == 0
        record = RagRecord(request_id=f"req-{i}", service="shop", version=version, response="a")
        tally = expected[version]
        if _audited(i):
            tally.add_audited(defect, defect)
        else:
            tally.add_unaudited(defect)
        items.append((record, _results(defect, defect if _audited(i) else "absent")))
    many = [
        RagRecord(request_id=f"route-{i}", service="shop", route=f"/r{i}", response="a")
        for i in range(MAX_SLICE_VALUES + 5)
    ]
    items += [(r, _results(False, "absent")) for r in many if _share(r, 1.0) is False]
    sink.emit([Evaluated(*item) for item in items])
    slices = sink.page()["services"]["shop"]["slices"]
    for version, tally in expected.items():
        got, want = slices["version"][version], estimate(tally, min_audited=2)
        assert (got["evaluated"], got["audited"]) == (tally.evaluated, tally.audited)
        assert want.corrected is not None
        assert got["estimate"]["upper"] == pytest.approx(want.corrected.upper)
    assert len(slices["route"]) == MAX_SLICE_VALUES


def test_a_refused_label_is_logged_with_its_reason(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """Each refusal is a log line naming the source, the outcome and the id or the problem
    (besides its count); a refused label takes nothing from the records awaiting theirs."""
    clock = Clock()
    sink = _labelled(telemetry, clock, window="1h")
    audited = [i for i in range(100) if _audited(i)][:2]
    sink.emit([Evaluated(_record(i), _results(True, "absent")) for i in audited])
    with caplog.at_level(logging.WARNING, logger="monitor.audit.sink"):
        assert sink.label("nobody", True, "http") is not None
        sink.malformed("http", 'label: must be "pass" or "fail", got 1')
        clock.now += 3600 + 3600 / BUCKETS
        assert sink.label(f"req-{audited[0]}", True, "file") is not None
    lines = [r.getMessage() for r in caplog.records]
    assert any(
        "label refused (http): unknown_id: no audited record awaits a label with "
        "request_id 'nobody'" in line
        for line in lines
    )
    assert any('label refused (http): label: must be "pass"' in line for line in lines)
    assert any(
        f"label refused (file): expired: the window of record 'req-{audited[0]}'" in line
        for line in lines
    )
    assert sink.page()["awaiting_labels"] == [f"req-{audited[1]}"]


def test_an_unreadable_labels_file_is_counted_and_logged(
    telemetry: Telemetry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = _labelled(telemetry, Clock())
    missing = tmp_path / "not-yet" / "labels.jsonl"
    feed = LabelFile(str(missing), sink)
    with caplog.at_level(logging.WARNING, logger="monitor.audit.sink"):
        assert feed.read() == 0
        assert feed.read() == 0
    assert _count(telemetry, "audit_labels", source="file", outcome="unreadable") == 2
    assert f"audit: cannot read labels from {missing}" in caplog.text
    missing.parent.mkdir()
    missing.write_text('{"request_id": "nobody", "label": "pass"}\n')
    assert feed.read() == 1  # read once it is there
    assert _count(telemetry, "audit_labels", source="file", outcome="unknown_id") == 1
