"""`/debug/records` is bounded by bytes whatever its records hold: each entry within
`ENTRY_BYTES` (the documents and turns left out are said), each kind within `KIND_BYTES`
(the entries of the last N left out are said), text cut and redacted; and it shows record
text only where the operator asked: on a loopback address or behind credentials."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import bcrypt
import pytest
import yaml

from harness.reliability import MonitorProcess, Trace, export_request, post, trace_ids
from monitor.__main__ import main
from monitor.config import ConfigError
from monitor.exporters.debug_records import (
    ENTRY_BYTES,
    KIND_BYTES,
    PATH,
    TEXT_LIMIT,
    TRACE_BYTES,
    TRACES_PATH,
    DebugRecords,
)
from monitor.exporters.metrics_port import HealthServer, WebSecurity
from monitor.records import ChatMessage, ContextDoc, RagRecord
from monitor.spans import Span, SpanEvent, decode_json
from monitor.telemetry import create_telemetry

SECRET = "jane.doe@example.com"


def _record(i: int, documents: int, chars: int) -> RagRecord:
    return RagRecord(
        request_id=f"r{i}",
        trace_id=f"{i + 1:032x}",
        service="shop",
        query=f"question {i} from {SECRET}?",
        history=tuple(ChatMessage(role="user", content="h" * chars) for _ in range(3)),
        retrieved_context=tuple(
            ContextDoc(content=f"{n} " + "d" * chars, doc_uri=f"kb/{n}") for n in range(documents)
        ),
        response="answer",
    )


def test_the_page_stays_within_its_bound_and_says_what_it_leaves_out() -> None:
    """A hundred records of a thousand 2,000-character documents: 200 MB of text. Each
    entry shows what fits in `ENTRY_BYTES`, the page the newest entries that fit in
    `KIND_BYTES`, and both say how many they leave out."""
    debug = DebugRecords(100, redact=lambda text: text.replace(SECRET, "[REDACTED:email]"))
    for i in range(100):
        debug.extracted(_record(i, 1000, TEXT_LIMIT), "otlp_http")
        debug.no_record(f"{i:032x}", "s" * 4_000_000, "otlp_http", "not_rag", 3)
    page = debug.page()
    assert len(page) <= 2 * KIND_BYTES + 1024
    shown = json.loads(page)
    extracted = shown["extracted"]
    assert 0 < len(extracted) < 100
    assert shown["left_out"] == {"extracted": 100 - len(extracted), "no_record": 0, "traces": 0}
    assert extracted[0]["request_id"] == "r99"  # newest first
    for entry in extracted:
        assert len(json.dumps(entry, ensure_ascii=False).encode()) <= ENTRY_BYTES
        assert len(entry["context"]) + entry["documents_left_out"] == 1000
        assert entry["documents_left_out"] > 0
        assert len(entry["history"]) + entry["history_left_out"] == 3
        assert all(len(doc["content"]) <= TEXT_LIMIT for doc in entry["context"])
        assert SECRET not in entry["query"] and "[REDACTED:email]" in entry["query"]
    assert len(shown["no_record"]) == 100
    assert all(len(entry["service"]) == TEXT_LIMIT for entry in shown["no_record"])


def _spans(trace: int, n: int, chars: int) -> list[Span]:
    resource = {"service.name": "shop", "deployment.environment": "prod"}
    return [
        Span(
            trace_id=f"{trace + 1:032x}",
            span_id=f"{i + 1:016x}",
            parent_span_id="" if i == 0 else f"{1:016x}",
            name=f"step {i}",
            start_unix_nano=1_000 + i,
            end_unix_nano=2_000 + i,
            attributes={
                "app.input": f"question {i} from {SECRET}",
                "app.docs": [{"text": "d" * chars, "n": i, "score": 0.5, "ok": True}],
            },
            events=[SpanEvent("note", 1_500, {"app.note": SECRET})],
            error=i == 1,
            service="shop",
            resource=resource,
        )
        for i in range(n)
    ]


def test_the_kept_spans_stay_within_their_bound_and_say_what_they_leave_out() -> None:
    """A hundred traces of fifty spans of 20 kB each: 100 MB. Each trace keeps the spans
    that fit in `TRACE_BYTES`, the spans left out counted; all of them together, the
    newest that fit in `KIND_BYTES`; strings redacted; what is kept reads back whole."""
    debug = DebugRecords(100, redact=lambda text: text.replace(SECRET, "[REDACTED:email]"))
    for i in range(100):
        debug.kept_spans(f"{i + 1:032x}", _spans(i, 50, 20_000))
    shown = debug.snapshot()
    traces = shown["traces"]
    assert 0 < len(traces) < 100
    assert shown["left_out"]["traces"] == 100 - len(traces)
    assert traces[0]["trace_id"] == f"{100:032x}"  # newest first
    held = len(json.dumps(traces).encode())
    for entry in traces:
        assert entry["spans"] + entry["spans_left_out"] == 50
        assert 0 < entry["spans"] and 0 < entry["spans_left_out"]
        body = debug.trace_spans(entry["trace_id"])
        assert body is not None and len(body) <= TRACE_BYTES
        held += len(body)
        assert SECRET.encode() not in body
        decoded = decode_json(body)
        assert decoded.rejected == 0 and len(decoded.spans) == entry["spans"]
        first = decoded.spans[0]
        assert first.attributes["app.input"] == "question 0 from [REDACTED:email]"
        assert first.attributes["app.docs"] == [
            {"text": "d" * 20_000, "n": 0, "score": 0.5, "ok": True}
        ]
        assert first.resource["deployment.environment"] == "prod"
        assert first.events[0].attributes == {"app.note": "[REDACTED:email]"}
        assert [s.error for s in decoded.spans[:2]] == [False, True]
    assert held <= KIND_BYTES
    assert debug.trace_spans(f"{1:032x}") is None  # pushed out for the bytes


def test_small_traces_are_kept_whole() -> None:
    debug = DebugRecords(3, redact=None)
    for i in range(5):
        debug.kept_spans(f"{i + 1:032x}", _spans(i, 4, 10))
    shown = debug.snapshot()
    assert [t["trace_id"] for t in shown["traces"]] == [f"{i:032x}" for i in (5, 4, 3)]
    assert all(t["spans_left_out"] == 0 for t in shown["traces"])
    assert shown["left_out"]["traces"] == 0
    body = debug.trace_spans(f"{5:032x}".upper())
    assert body is not None
    spans = decode_json(body).spans
    assert [(s.span_id, s.parent_span_id, s.name) for s in spans] == [
        (s.span_id, s.parent_span_id, s.name) for s in _spans(4, 4, 10)
    ]
    assert SECRET in spans[0].attributes["app.input"]  # no redaction asked


def test_small_records_are_shown_whole() -> None:
    debug = DebugRecords(5, redact=None)
    for i in range(8):
        debug.extracted(_record(i, 3, 20), "kafka")
    shown = debug.snapshot()
    assert [e["request_id"] for e in shown["extracted"]] == ["r7", "r6", "r5", "r4", "r3"]
    assert shown["left_out"] == {"extracted": 0, "no_record": 0, "traces": 0}
    entry = shown["extracted"][0]
    assert entry["documents_left_out"] == entry["history_left_out"] == 0
    assert [doc["doc_uri"] for doc in entry["context"]] == ["kb/0", "kb/1", "kb/2"]
    assert entry["query"] == f"question 7 from {SECRET}?"


def test_each_entry_says_where_its_context_came_from() -> None:
    debug = DebugRecords(5, redact=None)
    found = _record(1, 2, 20).model_copy(
        update={
            "metadata": {
                "context_source": "structure",
                "context_evidence": "2 of 3 texts in output.value of span 'retrieve' appear in "
                "the model call's prompt",
            }
        }
    )
    debug.extracted(found, "otlp_http")
    debug.extracted(_record(2, 1, 20), "kafka")  # sent as a record, with its context
    debug.extracted(_record(3, 0, 20), "kafka")
    shown = {e["request_id"]: e for e in debug.snapshot()["extracted"]}
    assert shown["r1"]["context_source"] == "structure"
    assert shown["r1"]["context_evidence"].startswith("2 of 3 texts in output.value")
    assert (shown["r2"]["context_source"], shown["r2"]["context_evidence"]) == ("record", None)
    assert shown["r3"]["context_source"] == "none"


def test_each_entry_says_which_embedded_evaluators_cannot_read_its_language() -> None:
    debug = DebugRecords(5, redact=None)
    thai = _record(1, 1, 20).model_copy(update={"response": "ราคาเจ็ดยูโรต่อก้อน"})
    chinese = _record(2, 1, 20).model_copy(update={"response": "黑麦面包每个七欧元。"})
    debug.extracted(thai, "kafka")
    debug.extracted(chinese, "kafka")
    debug.extracted(_record(3, 1, 20), "kafka")
    shown = {e["request_id"]: e["language"] for e in debug.snapshot()["extracted"]}
    assert shown["r1"]["script"] == "thai"
    assert "local_groundedness" in shown["r1"]["not_scored_by"]
    assert shown["r1"]["reason"].startswith("Thai: local_groundedness, local_relevance")
    assert shown["r2"] == {
        "script": "han",
        "not_scored_by": ["local_safety"],
        "reason": "Chinese: local_safety was not measured on it and gives no verdict (a judge "
        "evaluator can score it)",
    }
    assert shown["r3"] == {"script": "latin", "not_scored_by": [], "reason": None}


# -- who may read it -----------------------------------------------------------------------


def _config(tmp_path: Path, endpoint: str, web: Path | None = None) -> Path:
    prometheus = {"endpoint": endpoint, "debug_records": 10}
    if web is not None:
        prometheus["web_config_file"] = str(web)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"exporters": {"prometheus": prometheus}}))
    return path


def _web(tmp_path: Path, users: dict[str, str]) -> Path:
    path = tmp_path / "web.yml"
    hashed = {
        user: bcrypt.hashpw(pw.encode(), bcrypt.gensalt(4)).decode() for user, pw in users.items()
    }
    path.write_text(yaml.safe_dump({"basic_auth_users": hashed}))
    return path


def test_the_page_on_a_public_address_without_credentials_is_refused_with_the_reason(
    tmp_path: Path, cli: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`debug_records` on 0.0.0.0 with no web config, or with one that asks for no
    credentials: `check-config` and `run` refuse it, naming the key, why, and the fixes;
    `run` exits before it listens."""
    for web in (None, _web(tmp_path, {})):
        config = _config(tmp_path, "0.0.0.0:9464", web)
        assert main(["check-config", str(config)]) == 1
        shown = capsys.readouterr()
        assert shown.out == ""
        assert shown.err.startswith("exporters.prometheus.debug_records: /debug/records")
        assert "reachable from other hosts" in shown.err
        assert "127.0.0.1" in shown.err and "basic_auth_users" in shown.err
        run = subprocess.run(
            [*cli, "run", "--config", str(config)], capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 1
        assert "config error: exporters.prometheus.debug_records: /debug/records" in run.stderr
        assert "metrics on" not in run.stderr


def test_the_page_on_loopback_or_behind_credentials_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    accepted = [
        _config(tmp_path, "127.0.0.1:9464"),
        _config(tmp_path, "[::1]:9464"),
        _config(tmp_path, "localhost:9464"),
        _config(tmp_path, "0.0.0.0:9464", _web(tmp_path, {"prometheus": "pw"})),
    ]
    for config in accepted:
        assert main(["check-config", str(config)]) == 0, capsys.readouterr().err


async def test_the_server_refuses_to_serve_text_to_anyone(tmp_path: Path) -> None:
    """The metrics server itself refuses, before it listens, a route showing record text
    on a public address without credentials; and a web config reloaded without
    credentials is not taken while such a route is served."""
    server = HealthServer(
        create_telemetry(), "0.0.0.0:0", _ready, web_config_file=str(_web(tmp_path, {}))
    )
    server.add_route(PATH, DebugRecords(5, None).handle, text=True)
    with pytest.raises(ConfigError) as refused:
        await server.start()
    assert refused.value.problems[0].startswith("exporters.prometheus.debug_records: ")
    assert server.bound_port is None

    telemetry = create_telemetry()
    path = _web(tmp_path, {"prometheus": "pw"})
    security = WebSecurity(str(path), telemetry)
    security.keep_asking = PATH
    path.write_text("basic_auth_users: {}\n")
    os.utime(path, ns=(1, 1))  # a new stamp whatever the clock's resolution
    assert list(security.config.basic_auth_users) == ["prometheus"]  # the old one stays
    reloads = telemetry.registry.get_sample_value(
        "rag_monitor_web_config_reloads_total", {"outcome": "error"}
    )
    assert reloads == 1


def test_the_page_a_running_monitor_serves_is_redacted(tmp_path: Path) -> None:
    """`rag-monitor run` with `redaction.enabled` and `debug_records`, the page served on
    loopback: an e-mail address in a trace's question, documents and answer is shown
    redacted, never as it came."""
    monitor = MonitorProcess(
        tmp_path,
        {
            "redaction": {"enabled": True},
            "exporters": {"prometheus": {"debug_records": 10}},
            "pipeline": {"processes": 0},
            # Released as the root ends: each trace is sent whole in one request.
            "trace_assembly": {"late_spans_wait_s": 0},
        },
    ).start()
    try:
        (trace_id,) = trace_ids(61, 1)
        trace = Trace(
            trace_id,
            query=f"Where is the refund for {SECRET}?",
            context=(f"Refund 1182 was sent to {SECRET} on Monday.",),
            response=f"It was sent to {SECRET} on Monday.",
        )
        assert post(monitor.http_port, export_request([trace])).status == 200
        monitor.wait_for(lambda: len(monitor.results_lines()) == 1, 60, "the record evaluated")
        page = monitor.get(PATH)
        # A trace without its retrieval span gives a record without documents: its spans
        # are kept, redacted too.
        (without_documents,) = trace_ids(62, 1)
        incomplete = Trace(without_documents, query=f"Is {SECRET} mine?")
        assert post(monitor.http_port, export_request([incomplete], "root")).status == 200
        kept_id = without_documents.hex()

        def kept_ids() -> list[str]:
            return [t["trace_id"] for t in json.loads(monitor.get(PATH))["traces"]]

        monitor.wait_for(lambda: kept_id in kept_ids(), 60, "the trace's spans kept")
        kept = monitor.get(TRACES_PATH + kept_id)
    finally:
        assert monitor.stop() == 0, monitor.log()[-3000:]
    assert SECRET not in kept and "Is [REDACTED:email] mine?" in kept
    assert [s.name for s in decode_json(kept.encode()).spans] == ["handle_question"]
    (entry,) = json.loads(page)["extracted"]
    assert entry["trace_id"] == trace_id.hex()
    assert SECRET not in page
    shown = [entry["query"], entry["response"], *(d["content"] for d in entry["context"])]
    assert all("[REDACTED:email]" in text for text in shown), shown


def _ready() -> tuple[bool, str]:
    return True, "ready"
