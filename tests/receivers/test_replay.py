"""Seeing what was extracted, and scoring stored traces.

- `rag-monitor replay` reads OTLP/JSON files as the OpenTelemetry Collector's `file`
  exporter writes them (one `ExportTraceServiceRequest` per line, hex ids, optionally
  gzip) and yields the same results lines as the same spans sent to `rag-monitor run`
  over OTLP/HTTP;
- `exporters.results_include_text` adds what was extracted, redacted, to each line;
- `/debug/records` (off by default) shows recent extractions and traces with no record.

The spans come from the real OpenTelemetry SDK (`harness/otlp.py` emitters); the file is
written as the Collector's JSON marshaler writes a request.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk.trace import ReadableSpan

from harness.otlp import CONVENTIONS, WATER, Case, capture, collector_json, otlp_bytes
from harness.reliability import results_lines
from harness.servers import rag_monitor
from harness.wait import wait_until

EMAIL = "jane.doe@example.com"
SECRET_CASE = Case(
    query=f"Where do I send my invoice? I am {EMAIL}",
    docs=(("kb/billing.md", "Invoices go to the billing team in Dublin.", 0.9),),
    answer="Send invoices to the billing team in Dublin.",
)


def _traces() -> list[tuple[str, list[ReadableSpan]]]:
    """Traces of several conventions; one more with an e-mail address in its question,
    and one that is not a RAG request."""
    out = [capture(CONVENTIONS[name], WATER) for name in ("openinference", "genai", "openllmetry")]
    out.append(capture(CONVENTIONS["openinference"], SECRET_CASE))
    out.append(capture(lambda tracer, case, between: _not_rag(tracer), WATER))
    return out


def _not_rag(tracer: Any) -> str:
    with tracer.start_as_current_span("GET /health") as span:
        return format(span.get_span_context().trace_id, "032x")


def _config(tmp: Path, name: str, debug_records: int = 0) -> Path:
    """Listeners on port 0: `rag_monitor` reads the ports they bound from the log."""
    config = {
        "receivers": {
            "otlp": {
                "grpc": {"enabled": False},
                "http": {"endpoint": "127.0.0.1:0"},
            }
        },
        "exporters": {
            "prometheus": {
                "endpoint": "127.0.0.1:0",
                "debug_records": debug_records,
            },
            "results_file": str(tmp / f"{name}.jsonl"),
            "results_include_text": True,
            "include_explanations": True,
        },
        "redaction": {"enabled": True},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _lines(path: Path, *, writing: bool = False) -> dict[str, dict[str, Any]]:
    """The results lines by trace id; while a monitor is `writing`, the line it is in the
    middle of writing is left out."""
    return {
        line["trace_id"]: line
        for line in results_lines(path, writing=writing)
        if line.get("trace_id")
    }


def _post(port: int, body: bytes) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces",
        data=body,
        headers={"Content-Type": "application/x-protobuf"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(response.status)


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_replaying_a_collector_file_gives_the_records_live_traffic_gives(
    tmp_path: Path, cli: list[str]
) -> None:
    """One live run, and the same spans replayed from a plain and from a gzipped file."""
    traces = _traces()
    rag_ids = {trace_id for trace_id, _ in traces[:-1]}

    # Live: the spans over OTLP/HTTP, the retrieval span of each trace in its own request.
    config = _config(tmp_path, "live", debug_records=20)
    with rag_monitor(tmp_path, config) as ports:
        assert ports.http is not None
        for _, spans in traces:
            half = len(spans) // 2
            for part in (spans[:half], spans[half:]):
                assert _post(ports.http, otlp_bytes(part)) == 200
        live_path = tmp_path / "live.jsonl"
        wait_until(
            lambda: set(_lines(live_path, writing=True)) >= rag_ids,
            60,
            "every live record",
        )
        # The non-RAG trace gives no line to wait for: wait for the debug page to name it.
        debug = wait_until(
            lambda: (
                page
                if (page := _get_json(f"http://127.0.0.1:{ports.metrics}/debug/records"))[
                    "no_record"
                ]
                else None
            ),
            60,
            "the trace with no record on /debug/records",
        )
        assert debug is not None
    live = _lines(live_path)

    # Stored: the same spans as the Collector's file exporter wrote them, split likewise.
    text = "".join(
        collector_json(part) + "\n"
        for _, spans in traces
        for part in (spans[: len(spans) // 2], spans[len(spans) // 2 :])
    )
    replay_config = _config(tmp_path, "replay")
    written = ""
    for compressed in (False, True):
        dump = tmp_path / ("traces.otlp.jsonl.gz" if compressed else "traces.otlp.jsonl")
        dump.write_bytes(gzip.compress(text.encode()) if compressed else text.encode())
        out = tmp_path / f"replayed-{dump.name}"
        result = subprocess.run(
            [*cli, "replay", str(dump), "--config", str(replay_config), "--output", str(out)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert result.returncode == 0, result.stderr
        evaluated = f"{len(rag_ids)} records evaluated from {2 * len(traces)} OTLP requests"
        assert evaluated in result.stdout, (compressed, result.stdout)
        replayed = _lines(out)

        assert set(live) == set(replayed) == rag_ids, compressed
        for trace_id in rag_ids:
            # Who sent a record is the one thing a replay cannot give as live did: live
            # names the client that posted it, a replay the file.
            live_line, replayed_line = dict(live[trace_id]), dict(replayed[trace_id])
            assert live_line.pop("sender") and "sender" in replayed_line
            del replayed_line["sender"]
            assert replayed_line == live_line, (trace_id, compressed)
        written += out.read_text()
    water = live[traces[0][0]]["extracted"]
    assert water["query"] == WATER.query and water["response"] == WATER.answer
    assert [d["content"] for d in water["context"]] == WATER.contents
    assert [d["doc_uri"] for d in water["context"]] == [doc_id for doc_id, _, _ in WATER.docs]
    # Redaction applies to what is written out.
    secret = live[traces[3][0]]["extracted"]["query"]
    assert EMAIL not in secret and "[REDACTED" in secret
    assert EMAIL not in live_path.read_text() + written

    # The debug page: the extractions (redacted) and the trace that gave no record, why.
    assert {e["trace_id"] for e in debug["extracted"]} == rag_ids
    assert EMAIL not in json.dumps(debug)
    (none,) = debug["no_record"]
    assert none["trace_id"] == traces[-1][0] and none["reason"] == "not_rag"


def test_nothing_is_exposed_with_the_defaults(tmp_path: Path, cli: list[str]) -> None:
    config = tmp_path / "c.yaml"
    results = tmp_path / "results.jsonl"
    config.write_text(
        yaml.safe_dump(
            {
                "receivers": {
                    "otlp": {
                        "grpc": {"enabled": False},
                        "http": {"endpoint": "127.0.0.1:0"},
                    }
                },
                "exporters": {
                    "prometheus": {"endpoint": "127.0.0.1:0"},
                    "results_file": str(results),
                },
            }
        )
    )
    trace_id, spans = capture(CONVENTIONS["openinference"], SECRET_CASE)
    with rag_monitor(tmp_path, config) as ports:
        assert ports.http is not None
        assert _post(ports.http, otlp_bytes(spans)) == 200
        wait_until(lambda: trace_id in _lines(results, writing=True), 60, "the results line")
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{ports.metrics}/debug/records", timeout=5)
        assert missing.value.code == 404
        missing.value.close()
    line = _lines(results)[trace_id]
    assert "extracted" not in line
    assert SECRET_CASE.query not in results.read_text() and EMAIL not in results.read_text()


def test_bad_lines_of_an_otlp_file_are_named_and_counted(tmp_path: Path, cli: list[str]) -> None:
    _, spans = capture(CONVENTIONS["genai"], WATER)
    dump = tmp_path / "traces.otlp.jsonl"
    dump.write_text(
        collector_json(spans)
        + "\n"
        + '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "not-hex"}]}]}]}\n'
        + "not json at all\n"
    )
    result = subprocess.run(
        [*cli, "replay", str(dump), "--strict"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert "line 2: resourceSpans[0].scopeSpans[0].spans[0].traceId" in result.stderr
    assert "line 3:" in result.stderr
    assert "1 records evaluated from 1 OTLP requests, 2 malformed lines skipped" in result.stdout
