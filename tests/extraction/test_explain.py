"""`rag-monitor explain` and the warnings that name why a service's traces give no record or
an incomplete one.

The trace explained is an invented SDK's ("acme": attribute names no shipped convention
reads), written with the real OpenTelemetry SDK and saved as the Collector's file exporter
writes it. End to end: explain (the CLI, as a subprocess) → its proposed entry → a config
file → `load_config` → extraction of the same spans → the right query, answer and
documents."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import logging
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from harness.otlp import collector_json, finished_spans, otlp_bytes
from harness.reliability import MonitorProcess
from monitor.cli.explain import explain, explain_from_debug
from monitor.config import load_config
from monitor.exporters.debug_records import PATH, TRACES_PATH, DebugRecords
from monitor.exporters.metrics_port import HealthServer
from monitor.extraction import (
    EXPLAIN,
    TraceRecords,
    conventions_from_config,
    extract_records,
    extract_within,
)
from monitor.processors.trace._assembler import FinishedTrace
from monitor.processors.trace._outcomes import Outcomes
from monitor.records.limits import SizeLimits
from monitor.spans import Span, decode_json, decode_protobuf
from monitor.telemetry import Telemetry, create_telemetry

QUESTION = "When was the Fjord Library founded?"
DOCS = (
    ("kb/fjord.md", "The Fjord Library was founded in 1911 by the harbour guild."),
    ("kb/hours.md", "The Fjord Library opens at nine every weekday."),
)
ANSWER = "The Fjord Library was founded in 1911."
INSTRUCTIONS = "Answer only from the documents below. Say so when they do not tell."


def _prompt() -> list[dict[str, str]]:
    documents = "\n\n".join(text for _, text in DOCS)
    return [
        {"role": "system", "content": f"{INSTRUCTIONS}\n\n{documents}"},
        {"role": "user", "content": QUESTION},
    ]


def _acme(tracer: Tracer) -> None:
    """The invented SDK: its own kind attribute (`acme.step`) and its own names for the
    question, the documents, the prompt and the reply (a JSON object around the text)."""
    with tracer.start_as_current_span(
        "acme.pipeline", attributes={"acme.step": "pipeline", "acme.input": QUESTION}
    ) as pipeline:
        hits = [
            {"id": uri, "text": text, "score": 0.9 - n / 10} for n, (uri, text) in enumerate(DOCS)
        ]
        with tracer.start_as_current_span(
            "acme.fetch",
            attributes={
                "acme.step": "fetch",
                "acme.input": QUESTION,
                "acme.hits": json.dumps(hits),
            },
        ):
            pass
        with tracer.start_as_current_span(
            "acme.llm",
            attributes={
                "acme.step": "llm",
                "acme.llm.prompt": json.dumps(_prompt()),
                "acme.llm.output": json.dumps({"replies": [ANSWER], "finish": "stop"}),
            },
        ):
            pass
        pipeline.set_attribute("acme.output", ANSWER)


def _spans(spans: list[ReadableSpan]) -> list[Span]:
    return decode_protobuf(otlp_bytes(spans)).spans


def _proposal(stdout: str) -> list[dict[str, Any]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("proposed entry"))
    end = next(i for i, line in enumerate(lines) if line.startswith("with it, records:"))
    entries = yaml.safe_load("\n".join(lines[start + 1 : end]))
    assert isinstance(entries, list)
    return entries


@pytest.mark.e2e  # two runs of the command line
def test_explain_proposes_an_entry_that_makes_the_right_record(
    tmp_path: Path, cli: list[str]
) -> None:
    sdk_spans = finished_spans("acme-rag", _acme)
    spans = _spans(sdk_spans)
    assert extract_records(spans) == []  # no shipped entry reads this SDK
    trace_file = tmp_path / "traces.json"
    trace_file.write_text(collector_json(sdk_spans) + "\n")

    done = subprocess.run(
        [*cli, "explain", str(trace_file)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "span 'acme.fetch'" in out and "nothing: no convention declares it" in out
    assert "records: 0" in out
    assert "no record: no span declares a role any convention reads" in out
    entries = _proposal(out)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump({"extraction": {"conventions": entries}}))

    config = load_config(config_file)
    conventions = conventions_from_config(config.extraction.conventions)
    (record,) = extract_records(decode_json(trace_file.read_bytes()).spans, conventions=conventions)
    assert record.query == QUESTION
    assert record.response == ANSWER
    assert [d.content for d in record.retrieved_context or ()] == [t for _, t in DOCS]
    assert [d.doc_uri for d in record.retrieved_context or ()] == [u for u, _ in DOCS]
    assert not record.missing()
    # explain with that config: the record is whole, and nothing more is proposed.
    again = subprocess.run(
        [*cli, "explain", str(trace_file), "--config", str(config_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert "records: 1" in again.stdout and "proposed entry" not in again.stdout
    assert "declared by convention acme-retrieval" in again.stdout


def test_explain_names_each_unreadable_line_and_fails_on_a_file_with_no_trace(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"resourceSpans": 3}\nnot json\n')
    out, err = io.StringIO(), io.StringIO()
    assert explain(bad, None, (), out, err) == 1
    assert "line 1:" in err.getvalue() and "line 2: body is not JSON" in err.getvalue()
    assert "no OTLP/JSON trace in it" in err.getvalue()
    good = tmp_path / "good.json.gz"
    with gzip.open(good, "wt") as lines:
        lines.write(collector_json(finished_spans("acme-rag", _acme)) + "\n")
    err = io.StringIO()
    assert explain(good, "0" * 32, (), io.StringIO(), err) == 1
    assert f"no span of trace {'0' * 32}" in err.getvalue()
    out = io.StringIO()
    assert explain(good, None, (), out, io.StringIO()) == 0  # gzip read too
    assert "proposed entry" in out.getvalue()


# Traces shaped like the causes met on real apps: each must be named in its warning.
def _genai_message(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _untraced_retriever(tracer: Tracer) -> None:
    """A GenAI chat span with its messages and answer, and no retrieval anywhere."""
    with tracer.start_as_current_span(
        "chat gpt-4o-mini",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": _genai_message("user", QUESTION),
            "gen_ai.output.messages": _genai_message("assistant", ANSWER),
        },
    ):
        pass


def _ids_only(tracer: Tracer) -> None:
    """A GenAI retrieval span with ids and scores only, and a prompt without the documents."""
    hits = [{"id": uri, "score": 0.5} for uri, _ in DOCS]
    with tracer.start_as_current_span("POST /ask"):
        with tracer.start_as_current_span(
            "retrieval kb",
            attributes={
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.retrieval.documents": json.dumps(hits),
            },
        ):
            pass
        _untraced_retriever(tracer)


def _no_content(tracer: Tracer) -> None:
    """A GenAI chat span traced with content capture off."""
    with tracer.start_as_current_span(
        "chat gpt-4o-mini",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 12,
        },
    ):
        pass


def _replies(tracer: Tracer) -> None:
    """A Haystack-like generator span, declared a model call by the user's convention,
    whose answer is in `{"replies": [...]}`."""
    with tracer.start_as_current_span(
        "haystack.component.run",
        attributes={
            "haystack.component.type": "OpenAIChatGenerator",
            "haystack.component.input": json.dumps({"messages": _prompt()}),
            "haystack.component.output": json.dumps(
                {"replies": [{"role": "assistant", "content": [{"text": ANSWER}]}]}
            ),
        },
    ):
        pass


def _after_root(tracer: Tracer) -> None:
    """A request whose retrieval ended after its root: the model call never came."""
    import time

    root = tracer.start_span("POST /ask", attributes={"openinference.span.kind": "CHAIN"})
    root_end = time.time_ns()
    from opentelemetry.trace import set_span_in_context

    child = tracer.start_span(
        "retrieve",
        context=set_span_in_context(root),
        attributes={
            "openinference.span.kind": "RETRIEVER",
            "input.value": QUESTION,
            "retrieval.documents.0.document.content": DOCS[0][1],
        },
    )
    root.end(end_time=root_end)
    child.end(end_time=root_end + 5_000_000)


HAYSTACK_BY_DOCS = {
    "name": "haystack-docs",
    "kind": {
        "attribute": "haystack.component.type",
        "values": {"OpenAIChatGenerator": "model"},
    },
    "input": [{"attribute": "haystack.component.input", "encoding": "messages"}],
    "output": [{"attribute": "haystack.component.output", "encoding": "messages"}],
}


@pytest.mark.parametrize(
    ("emit", "user", "said"),
    [
        pytest.param(
            _acme, None, "no span declares a role any convention reads", id="no_convention"
        ),
        pytest.param(_untraced_retriever, None, "no retrieval found", id="no_retrieval"),
        pytest.param(_no_content, None, "content capture", id="content_not_captured"),
        pytest.param(
            _ids_only,
            None,
            "a retrieval span was found but its documents carry no text (ids and scores only",
            id="retrieval_without_text",
        ),
        pytest.param(
            _replies,
            HAYSTACK_BY_DOCS,
            "the answer is in a field of a JSON output that no convention reads "
            "(haystack.component.output holds it under 'replies': declare field: replies)",
            id="unparsed_field",
        ),
        pytest.param(
            _after_root, None, "spans arrived after the trace's root ended", id="spans_after_root"
        ),
    ],
)
def test_each_warning_of_a_missing_record_or_part_names_its_cause_and_explain(
    telemetry: Telemetry,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    emit: Any,
    user: dict[str, Any] | None,
    said: str,
) -> None:
    conventions: tuple[Any, ...] = ()
    if user is not None:
        config_file = tmp_path / "config.yaml"
        config_file.write_text(yaml.safe_dump({"extraction": {"conventions": [user]}}))
        config = load_config(config_file)
        conventions = conventions_from_config(config.extraction.conventions)
    spans = _spans(finished_spans("shop-rag", emit))
    outcome = extract_within(spans, "http.route", SizeLimits(), conventions)
    assert not isinstance(outcome, Exception)
    outcomes = Outcomes(telemetry, None, SizeLimits())
    trace = FinishedTrace(spans[0].trace_id, spans, "root_ended", "otlp_http")
    with caplog.at_level(logging.WARNING, logger="monitor.processors.trace"):
        outcomes.extracted(trace, "shop-rag", outcome)
    lines = [r.getMessage() for r in caplog.records if "'shop-rag'" in r.getMessage()]
    assert any(said in line and EXPLAIN in line for line in lines), lines


def test_the_warning_of_spans_dropped_after_their_trace_points_to_explain(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    outcomes = Outcomes(telemetry, None, SizeLimits())
    with caplog.at_level(logging.WARNING, logger="monitor.processors.trace"):
        outcomes.late_spans({"root_ended": "its root had ended"}, "shop-rag", "root_ended", 2)
    (line,) = [r.getMessage() for r in caplog.records if "'shop-rag'" in r.getMessage()]
    assert "2 spans came after their trace was released" in line and EXPLAIN in line


def test_a_diagnosis_that_fails_costs_the_trace_nothing_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import monitor.extraction._extract as extract

    def broken(*args: Any) -> list[Any]:
        raise ValueError("no root")

    monkeypatch.setattr(extract, "causes", broken)
    spans = _spans(finished_spans("shop-rag", _untraced_retriever))
    outcome = extract_within(spans, "http.route", SizeLimits())
    assert isinstance(outcome, TraceRecords) and len(outcome.records) == 1
    (cause,) = outcome.causes
    assert cause.key == "diagnosis_failed" and "ValueError: no root" in cause.text()


@pytest.mark.e2e  # a monitor and four runs of the command line
def test_explain_from_debug_reads_a_running_monitors_trace_as_the_file_would(
    tmp_path: Path, cli: list[str]
) -> None:
    """A real monitor with `/debug/records` on; the real SDK exporter sends it a trace that
    gives a record without documents. `explain --from-debug` against its metrics port says
    what `explain` says of the same trace written as the Collector's file exporter writes
    it; an unknown trace, and a port no monitor answers on, give one line and exit 1."""
    monitor = MonitorProcess(
        tmp_path,
        {
            "exporters": {"prometheus": {"debug_records": 10}},
            "sampling": {"rate": 1.0},
            "pipeline": {"processes": 0},
            # Released as the root ends: the SDK exports each span as it ends, the root last.
            "trace_assembly": {"late_spans_wait_s": 0},
        },
    ).start()
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop-rag"}))
    endpoint = f"http://127.0.0.1:{monitor.http_port}/v1/traces"
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    url = f"http://127.0.0.1:{monitor.metrics_port}"

    def explain_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, "explain", *args], capture_output=True, text=True, check=False)

    def in_process(source: str | Path, trace: str | None = None) -> tuple[int, str, str]:
        """The command's own function, in this process: one interpreter start for the
        command (`served`) is enough to prove the entry point."""
        out, err = io.StringIO(), io.StringIO()
        if isinstance(source, Path):
            code = explain(source, trace, (), out, err)
        else:
            code = explain_from_debug(source, trace, (), out, err)
        return code, out.getvalue(), err.getvalue()

    try:
        _untraced_retriever(provider.get_tracer("tests"))
        provider.shutdown()
        sdk_spans = list(memory.get_finished_spans())
        trace_id = format(sdk_spans[0].context.trace_id, "032x")
        monitor.wait_for(lambda: trace_id in monitor.get(PATH), what="the trace's spans kept")
        served = explain_cli("--from-debug", url, "--trace-id", trace_id)
        every = in_process(url + PATH)
        unknown = in_process(url, "0" * 32)
        not_kept = json.loads(monitor.get(TRACES_PATH + "0" * 32))
    finally:
        assert monitor.stop() == 0, monitor.log()[-3000:]
    gone = in_process(url)

    trace_file = tmp_path / "trace.json"
    trace_file.write_text(collector_json(sdk_spans) + "\n")
    from_file = in_process(trace_file)
    assert from_file[0] == 0, from_file[2]
    assert served.returncode == 0, served.stderr
    assert served.stdout == from_file[1] == every[1]
    assert served.stderr == ""
    out = served.stdout
    assert "span 'chat gpt-4o-mini'" in out and ": model (" in out
    assert "records: 1" in out and "the record has no context: no retrieval found" in out
    for (code, stdout, stderr), said in (
        (unknown, f"keeps no spans of trace {'0' * 32}"),
        (gone, "cannot be read"),
    ):
        assert code == 1 and stdout == ""
        assert len(stderr.splitlines()) == 1 and said in stderr, stderr
    assert "is not among the traces" in not_kept["error"]


async def test_explain_from_debug_says_in_one_line_why_a_port_gives_nothing_to_explain() -> None:
    """A metrics port with `/debug/records` off, one whose page keeps no trace yet, and
    one whose trace body is not OTLP/JSON: each is one line on stderr and exit 1."""
    kept = f"{7:032x}"

    async def page(request: web.Request) -> web.Response:
        traces = [{"trace_id": kept, "spans": 1, "spans_left_out": 0}]
        return web.json_response({"extracted": [], "no_record": [], "traces": traces})

    async def garbage(request: web.Request) -> web.Response:
        return web.Response(body=b'{"resourceSpans": [', content_type="application/json")

    async def run(
        routes: list[tuple[str, Any]], trace_id: str | None = None
    ) -> tuple[int, str, str]:
        server = HealthServer(create_telemetry(), "127.0.0.1:0", lambda: (True, "ready"))
        for path, handler in routes:
            server.add_route(path, handler, text=True)
        await server.start()
        out, err = io.StringIO(), io.StringIO()
        try:
            url = f"http://127.0.0.1:{server.bound_port}"
            code = await asyncio.to_thread(explain_from_debug, url, trace_id, (), out, err)
        finally:
            await server.shutdown(1.0)
        return code, out.getvalue(), err.getvalue()

    empty = DebugRecords(5, None)
    cases = [
        ([], None, "/debug/records (is debug_records on?): HTTP 404 Not Found"),
        ([(PATH, empty.handle)], None, "keeps no trace's spans yet"),
        ([(PATH, empty.handle)], kept, f"keeps no spans of trace {kept}"),
        (
            [(PATH, page), (TRACES_PATH + "{trace_id}", garbage)],
            None,
            f"{TRACES_PATH}{kept}: line 1: body is not JSON",
        ),
    ]
    for routes, trace_id, said in cases:
        code, out, err = await run(routes, trace_id)
        assert code == 1 and out == "", said
        assert len(err.splitlines()) == 1 and said in err, (said, err)
