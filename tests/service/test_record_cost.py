"""Bounded by what a record becomes, whatever one request holds: label values bounded in
length, documents per record, `/debug/records` in bytes, and label slots that follow
traffic while one-shot values are sprayed. Each case is a running `rag-monitor run` fed
real OTLP/HTTP requests (`bench/hostile_records_rss.py` measures the memory of the same
loads)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from prometheus_client.parser import text_string_to_metric_families

from harness.reliability import MonitorProcess, post
from monitor.records.limits import SizeLimits

MB = 1_000_000
LABEL_CHARS = SizeLimits().label_chars
MAX_DOCUMENTS = SizeLimits().max_documents
_WORDS = ("refund", "policy", "thirty", "days", "receipt", "store", "credit", "exchange")


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _resource_spans(service: str, version: str | None, attributes: dict[str, str]) -> ResourceSpans:
    """One resource of one root span (a trace of its own) carrying `attributes`."""
    resource = [_kv("service.name", service)]
    if version is not None:
        resource.append(_kv("service.version", version))
    span = Span(
        trace_id=os.urandom(16),
        span_id=os.urandom(8),
        name="handle",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        attributes=[_kv(key, value) for key, value in attributes.items()],
    )
    return ResourceSpans(
        resource=Resource(attributes=resource), scope_spans=[ScopeSpans(spans=[span])]
    )


def _rag(documents: list[str], route: str = "/ask") -> dict[str, str]:
    return {
        "rag.query": "How long do I have to return an item?",
        "rag.context": json.dumps(documents),
        "rag.response": "Refunds are accepted within thirty days with a receipt.",
        "http.route": route,
    }


def _body(*resources: ResourceSpans) -> bytes:
    data: bytes = ExportTraceServiceRequest(resource_spans=resources).SerializeToString()
    return data


def _label_values(text: str) -> dict[str, set[str]]:
    values: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for key, value in sample.labels.items():
                values.setdefault(key, set()).add(value)
    return values


def _value(text: str, name: str, **labels: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def test_four_megabyte_label_values_become_short_distinct_counted_ones(tmp_path: Path) -> None:
    """One 12 MB request whose `service.name`, `service.version` and `http.route` are 4 MB
    each: its record carries them cut to `record_limits.label_chars` (a prefix and a
    hash), every series too, so a scrape stays small; each cut is counted. A trace that
    gives no record, with a 4 MB service name of its own, is cut where it is looked up."""
    monitor = MonitorProcess(tmp_path, {"pipeline": {"processes": 0}}).start()
    try:
        hostile = _resource_spans(
            "s" * 4 * MB,
            "v" * 4 * MB,
            _rag(["Returns are accepted for thirty days."], "/" * 4 * MB),
        )
        assert post(monitor.http_port, _body(hostile)).status == 200
        not_rag = _resource_spans("s" * (4 * MB - 1) + "t", None, {"http.method": "GET"})
        assert post(monitor.http_port, _body(not_rag)).status == 200
        monitor.wait_for(
            lambda: (
                len(monitor.results_lines()) == 1
                and monitor.value("rag_monitor_dropped_total", reason="not_rag") == 1
            ),
            60,
            "the record and the trace that gave none",
        )
        scrape = monitor.metrics_text()
    finally:
        assert monitor.stop() == 0, monitor.log()[-3000:]
    assert len(scrape.encode()) < 1 * MB
    values = _label_values(scrape)
    assert (
        max(len(v) for key in ("service", "version", "route") for v in values[key]) == LABEL_CHARS
    )
    (line,) = monitor.results_lines()
    for key in ("service", "route"):
        assert len(line[key]) == LABEL_CHARS and line[key] in values[key]
    assert line["service"].startswith("s" * 100) and "…" in line["service"]
    cut = {
        label: _value(scrape, "rag_monitor_label_values_cut_total", label=label)
        for label in ("service", "version", "route")
    }
    assert cut["version"] >= 1 and cut["route"] >= 1
    assert cut["service"] >= 2  # the record's, and the lookup of the other trace's


# Issue 51's load: sixty 1 MB requests, each one trace of 100,000 documents.
DOCUMENT_TRACES = 60


@pytest.mark.e2e
def test_a_hundred_thousand_documents_per_trace_cost_a_bounded_record(tmp_path: Path) -> None:
    """Sixty traces of 100,000 one-word documents (1 MB requests), `/debug/records` on:
    each record keeps `record_limits.max_documents` of them and is counted as cut, every
    trace is evaluated, and the page stays under 10 MB, saying how many documents and
    entries it leaves out. (The records are cut where they are extracted, before anything
    reads them, `/debug/records` or not; what this costs in memory, with and without the
    page, is `bench/hostile_records_rss.py`'s to say: RSS depends on the machine.)"""
    exporters: dict[str, Any] = {
        "results_include_text": True,
        "prometheus": {"debug_records": 100},
    }
    monitor = MonitorProcess(tmp_path, {"pipeline": {"processes": 0}, "exporters": exporters})
    monitor.start()
    try:
        for i in range(DOCUMENT_TRACES):
            words = [_WORDS[(i + n) % len(_WORDS)] for n in range(100_000)]
            body = _body(_resource_spans("shop", "1.0", _rag(words)))
            assert len(body) > 0.9 * MB
            assert post(monitor.http_port, body).status == 200
        monitor.wait_for(
            lambda: len(monitor.results_lines()) == DOCUMENT_TRACES, 120, "every record"
        )
        page = monitor.get("/debug/records")
        cut = monitor.value("rag_monitor_records_truncated_total", part="documents")
        records = monitor.value("rag_monitor_records_total")
    finally:
        assert monitor.stop() == 0, monitor.log()[-3000:]
    assert cut == records == DOCUMENT_TRACES
    for line in monitor.results_lines():
        assert len(line["extracted"]["context"]) == MAX_DOCUMENTS
    assert len(page.encode()) < 10 * MB
    shown = json.loads(page)
    assert len(shown["extracted"]) + shown["left_out"]["extracted"] == DOCUMENT_TRACES
    assert shown["extracted"] and shown["left_out"]["no_record"] == 0
    for entry in shown["extracted"]:
        assert len(entry["context"]) + entry["documents_left_out"] == MAX_DOCUMENTS


class _Spray:
    """One-shot service names, 1,000 to a request, posted from a thread at most
    `per_second` a second, without end until `stop`: whatever is checked before `stop` is
    checked with the spray going on."""

    def __init__(self, port: int, per_second: float) -> None:
        self._port = port
        self._interval = 1000 / per_second
        self.sent = 0
        self.stopped = threading.Event()
        self.failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self.stopped.wait(self._interval):
                names = range(self.sent, self.sent + 1000)
                body = _body(*(_resource_spans(f"invented-{n}", None, {}) for n in names))
                if post(self._port, body).status == 200:  # else pushed back: again
                    self.sent += 1000
        except BaseException as exc:  # told by `going`, not lost in the thread
            self.failed = exc

    def going(self) -> bool:
        """Still posting: not stopped, and no post failed."""
        return self._thread.is_alive() and not self.stopped.is_set()

    def stop(self) -> None:
        self.stopped.set()
        self._thread.join(30)


def _shop(port: int) -> None:
    body = _body(_resource_spans("shop", "1.0", _rag(["Returns are accepted for 30 days."])))
    assert post(port, body).status == 200


@pytest.mark.e2e
def test_a_real_service_gets_its_own_series_while_one_shot_names_are_sprayed(
    tmp_path: Path,
) -> None:
    """One-shot service names sprayed without pause (not evaluated, each counted in
    `traces_unsampled_total` by service): once 20,000 of them are counted (400 for each
    slot) and they hold every slot, a real service sending 10 records a second gets its
    own series within 60 s, the spray still going, and the service label keeps at most
    `max_services` values and `other`. The wiring of the running monitor; the race against
    a spray of 100,000 names and more, at every rate up to the bound, runs on an injected
    clock in tests/exporters/test_label_squatting.py."""
    config: dict[str, Any] = {
        "pipeline": {"processes": 0, "max_services": 50},
        "sampling": {"rate": 0.0, "overrides": [{"service": "shop", "rate": 1.0}]},
        "evaluators": [{"name": "local_safety"}],
    }
    monitor = MonitorProcess(tmp_path, config).start()
    spray = _Spray(monitor.http_port, per_second=5000)
    stop_shop = threading.Event()
    try:
        monitor.wait_for(
            lambda: monitor.value("rag_monitor_traces_unsampled_total") >= 20_000,
            300,
            "20,000 one-shot names counted",
        )
        before = _label_values(monitor.metrics_text())["service"]
        assert len(before) == 51 and "other" in before, before  # every slot taken
        assert all(v.startswith("invented-") for v in before - {"other"}), before

        def shop() -> None:
            while not stop_shop.wait(0.1):
                _shop(monitor.http_port)

        threading.Thread(target=shop, daemon=True).start()
        monitor.wait_for(
            lambda: monitor.value("rag_monitor_evaluations_total", service="shop") > 0,
            60,
            "the real service's own series",
        )
        services = _label_values(monitor.metrics_text())["service"]
        # The spray never paused: it posts again after the check.
        checked_at = spray.sent
        monitor.wait_for(
            lambda: spray.sent > checked_at or not spray.going(), 60, "the spray's next request"
        )
        assert spray.going(), spray.failed
    finally:
        stop_shop.set()
        spray.stop()
        assert monitor.stop() == 0, monitor.log()[-3000:]
    assert "shop" in services and "other" in services
    assert len(services) <= 51, len(services)
