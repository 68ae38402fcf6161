"""Records that share a trace in the audit sink: audited together (one sampling hash), so
the estimate's variance is per trace. Each open trace's sums are kept while its bucket is in
the window — across interleaved traces, labels that come later and in any order, and a
restart — bounded in memory (a drop counted), and a version-1 state file (no per-trace
sums) is read as one record per trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.audit import saved
from monitor.audit import sink as sink_module
from monitor.audit.sink import BUCKETS
from monitor.component import Evaluated
from monitor.evidence.ppi import Tally, Trace, estimate
from monitor.processors.sampler import sampling_position
from monitor.records import RagRecord
from monitor.records.where import DIMENSIONS
from monitor.telemetry import Telemetry, create_telemetry
from tests.audit.test_audit_restart import _sink
from tests.audit.test_audit_sink import DETECTOR, SHARE, Clock, _count, _gauge, _results

SHOP = {"service": "shop", "evaluator": DETECTOR}
TURNS = 8  # records per trace


def _record(trace: int, turn: int) -> RagRecord:
    return RagRecord(
        request_id=f"req-{trace}-{turn}",
        trace_id=f"{trace:032x}",
        service="shop",
        query="q",
        response="a",
    )


def _audited(trace: int) -> bool:
    return sampling_position(f"{trace:032x}") < SHARE


def _verdicts(trace: int, turn: int) -> tuple[bool, bool]:
    """(detector, reference) defects: the reference's is the trace's (a conversation about
    one bad document), the detector's flips on a quarter of the turns."""
    bad = trace % 3 == 0
    return (bad if turn % 4 else not bad), bad


def _expected(traces: range) -> Tally:
    """The window's tally with each trace's records counted together, in trace order."""
    tally = Tally()
    for trace in traces:
        sums = Trace()
        for turn in range(TURNS):
            detector, reference = _verdicts(trace, turn)
            if _audited(trace):
                sums = tally.add_audited(detector, reference, sums)
            else:
                sums = tally.add_unaudited(detector, sums)
    return tally


def _interleaved(traces: range) -> list[tuple[int, int]]:
    """Every trace's first turn, then every trace's second, ...: traces open together."""
    return [(trace, turn) for turn in range(TURNS) for trace in traces]


def test_interleaved_traces_each_count_as_one_trace(telemetry: Telemetry, tmp_path: Path) -> None:
    clock = Clock()
    sink = _sink(telemetry, clock, tmp_path / "state")
    traces = range(200)
    for trace, turn in _interleaved(traces):
        detector, reference = _verdicts(trace, turn)
        reference_result = reference if _audited(trace) else "absent"
        sink.emit([Evaluated(_record(trace, turn), _results(detector, reference_result))])
    expected = _expected(traces)
    assert expected.audited_trace_count == sum(map(_audited, traces)) > 30
    want = estimate(expected, min_audited=2)
    assert want.corrected is not None
    for bound in ("estimate", "lower", "upper"):
        got = _gauge(telemetry, "defect_rate_estimate", **SHOP, bound=bound)
        assert got == pytest.approx(getattr(want.corrected, bound))
    # Counted as if each record were its own trace, the interval would be narrower.
    alone = Tally()
    for trace, turn in _interleaved(traces):
        detector, reference = _verdicts(trace, turn)
        if _audited(trace):
            alone.add_audited(detector, reference)
        else:
            alone.add_unaudited(detector)
    narrow = estimate(alone, min_audited=2).corrected
    assert narrow is not None and narrow.width < want.corrected.width * 0.6


@pytest.mark.asyncio
async def test_labels_join_their_trace_in_any_order_across_a_restart(tmp_path: Path) -> None:
    path, clock = tmp_path / "alerts.state.audit", Clock()
    traces = range(120)
    before = _sink(create_telemetry(), clock, path, "labels")
    await before.start()
    for trace, turn in _interleaved(traces):
        before.emit(
            [Evaluated(_record(trace, turn), _results(_verdicts(trace, turn)[0], "absent"))]
        )
    awaiting = before.page()["awaiting_labels"]
    assert len(awaiting) == TURNS * sum(map(_audited, traces))
    # Half the labels, the newest first; a restart; the rest.
    half = len(awaiting) // 2
    for request_id in reversed(awaiting[half:]):
        _, trace, turn = request_id.split("-")
        assert before.label(request_id, _verdicts(int(trace), int(turn))[1], "http") is None
    await before.shutdown(5)
    clock.now += 60
    t = create_telemetry()
    after = _sink(t, clock, path, "labels")
    await after.start()
    try:
        for request_id in awaiting[:half]:
            _, trace, turn = request_id.split("-")
            assert after.label(request_id, _verdicts(int(trace), int(turn))[1], "http") is None
        want = estimate(_expected(traces), min_audited=2).corrected
        assert want is not None
        got = _gauge(t, "defect_rate_estimate", **SHOP, bound="upper")
        assert got == pytest.approx(want.upper)
    finally:
        await after.shutdown(5)


def test_open_traces_are_bounded_and_a_drop_is_counted(
    telemetry: Telemetry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sink_module, "OPEN_TRACES", 3)
    sink = _sink(telemetry, Clock(), tmp_path / "state")
    unaudited = [trace for trace in range(40) if not _audited(trace)][:5]
    for trace in unaudited:
        sink.emit([Evaluated(_record(trace, 0), _results(False, "absent"))])
    assert _count(telemetry, "audit_traces_dropped", service="shop") == 2
    assert len(sink._traces) == 3
    # The first trace's sums are gone: its next record counts as another trace.
    sink.emit([Evaluated(_record(unaudited[0], 1), _results(False, "absent"))])
    sink.emit([Evaluated(_record(unaudited[4], 1), _results(False, "absent"))])
    (bucket,) = sink._windows["shop"].values()
    assert bucket.total.unaudited == 7
    assert bucket.total.unaudited_traces.joined == 1  # the fifth trace's second record


def test_a_trace_counts_in_its_first_bucket_and_leaves_the_window_whole(
    telemetry: Telemetry, tmp_path: Path
) -> None:
    clock = Clock()
    sink = _sink(telemetry, clock, tmp_path / "state")
    trace = next(t for t in range(40) if not _audited(t))
    sink.emit([Evaluated(_record(trace, 0), _results(True, "absent"))])
    clock.now += 3 * 3600 / BUCKETS  # three buckets later: the same trace
    sink.emit([Evaluated(_record(trace, 1), _results(False, "absent"))])
    (bucket,) = sink._windows["shop"].values()
    assert (bucket.total.unaudited, bucket.total.unaudited_traces.joined) == (2, 1)
    clock.now += 3600
    sink.refresh()
    assert sink._windows == {} and len(sink._traces) == 0


@pytest.mark.asyncio
async def test_a_version_1_state_file_is_read_as_one_record_per_trace(tmp_path: Path) -> None:
    """Version 1: six counts a tally, an awaiting record without its trace."""
    path, clock = tmp_path / "alerts.state.audit", Clock()
    bucket = int(clock() // (3600 / BUCKETS))
    window = {str(bucket): {"total": [1000, 300, 40, 10, 10, 20], "slices": []}}
    body = {
        "evaluator": DETECTOR,
        "reference": "labels",
        "windows": {"shop": window},
        "pending": [["req-7", "shop", bucket, True, [""] * len(DIMENSIONS)]],
    }
    stored = {"format": saved.FORMAT, "version": 1, "saved_at": clock(), saved.KEY: body}
    path.write_text(json.dumps(stored))
    t = create_telemetry()
    sink = _sink(t, clock, path, "labels")
    await sink.start()
    try:
        assert _count(t, "audit_state_loads", outcome="loaded") == 1
        assert sink.label("req-7", True, "http") is None
        want = Tally(1000, 300, 40, 10, 10, 21)
        assert sink._windows["shop"][bucket].total == want
        got = _gauge(t, "defect_rate_estimate", **SHOP, bound="upper")
        assert got == pytest.approx(estimate(want, min_audited=2).corrected.upper)  # type: ignore[union-attr]
    finally:
        await sink.shutdown(5)


def _two_services(monkeypatch: pytest.MonkeyPatch, flood: bool) -> tuple[dict[str, object], float]:
    """`shop`: 40 conversations of `TURNS` records, each one trace, all open together;
    with `flood`, `noisy` opens 150 new traces between two turns of `shop` (past the open
    traces' bound of 100). The figures `GET /audit` gives `shop`, and its traces dropped."""
    from monitor.audit.sink import AuditSink
    from monitor.config._audit import Audit
    from tests.audit.test_audit_sink import JUDGE, _share

    monkeypatch.setattr(sink_module, "OPEN_TRACES", 100)
    section = Audit(evaluator=DETECTOR, reference=JUDGE, share=SHARE, min_audited=15)
    t = create_telemetry()
    sink = AuditSink(section, t, lambda r: _share(r, 1.0), clock=Clock())
    noisy = 10_000
    for turn in range(TURNS):
        for trace in range(40):
            detector, reference = _verdicts(trace, turn)
            record = _record(trace, turn)
            sink.emit(
                [Evaluated(record, _results(detector, reference if _audited(trace) else "absent"))]
            )
        for _ in range(150 if flood else 0):
            flooding = _record(noisy, 0).model_copy(update={"service": "noisy"})
            sink.emit(
                [Evaluated(flooding, _results(False, False if _audited(noisy) else "absent"))]
            )
            noisy += 1
    if flood:
        assert _count(t, "audit_traces_dropped", service="noisy") > 0
    figures: dict[str, object] = sink.page()["services"]["shop"]
    return figures, _count(t, "audit_traces_dropped", service="shop")


def test_another_service_s_flood_never_makes_an_interval_ready(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A service whose audited conversations are too few for an interval alone stays
    without one, with the same figures, while another floods the open traces: the flood
    drops its own sums, not the quiet service's (which would count each later record of a
    dropped trace as another trace, and so make more audited traces than there are)."""
    alone, _ = _two_services(monkeypatch, flood=False)
    assert alone["estimate"] is None
    flooded, dropped = _two_services(monkeypatch, flood=True)
    assert flooded == alone
    assert dropped == 0
