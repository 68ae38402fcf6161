"""Honest traces beside hostile prompts on a running sidecar: are the honest ones written
at the rate they come, and is anything accepted lost at SIGTERM?

    python bench/hostile_prompt_run.py [--seconds 240] [--rate 2] [--hostile-every 20]
                                       [--hostile-bytes 12000]

A `rag-monitor run` on its defaults (local evaluators, a worker process per CPU, every
trace sampled, a results file) takes, over OTLP/HTTP as the OpenTelemetry SDK encodes
them, honest RAG traces at `--rate` per second (older GenAI attributes: a retrieval span
and the chat's prompt and completion) and, every `--hostile-every` seconds, one trace
whose only context is a user prompt of `--hostile-bytes` shaped to make a prompt
splitter super-linear (`harness/hostile_prompts.py`, the shapes in turn). After
`--seconds` it is sent SIGTERM at once, with traces still in flight.

Printed: per 30-second window, honest traces sent and honest records written in it;
honest records written within `--late-s` of their sending; the honest and hostile traces
accepted and what the results file holds of them at exit (evaluated, written unevaluated
with its reason, or missing). The script exits with status 1 when an accepted trace is
missing from the file, or when fewer than 95 % of the honest traces sent `--late-s` or more
before the stop were written within `--late-s` of their sending.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ingest import start_monitor
from harness import bench_smoke
from harness.hostile_prompts import SHAPES
from harness.otlp import WATER, asked, emit_genai_prompt_attrs, finished_spans, otlp_bytes
from harness.ports import free_port

WINDOW_S = 30.0


@dataclass
class Sent:
    kind: str  # "honest" or the hostile shape's name
    at: float  # monotonic seconds since the start


@dataclass
class Run:
    sent: dict[str, Sent] = field(default_factory=dict)  # trace id → what was sent
    refused: int = 0  # answered other than 200
    written_at: dict[str, float] = field(default_factory=dict)  # trace id → first seen


def _honest(n: int) -> tuple[str, bytes]:
    case = type(WATER)(
        query=asked(WATER.query, n), docs=WATER.docs, answer=WATER.answer, route=WATER.route
    )
    ids: list[str] = []
    spans = finished_spans(
        "honest-rag", lambda tracer: ids.append(emit_genai_prompt_attrs(tracer, case, lambda: None))
    )
    return ids[0], otlp_bytes(spans)


def _hostile(shape: str, size: int) -> tuple[str, bytes]:
    """A chat span alone: its prompt is all the context there is, so it is split."""
    prompt = [{"role": "user", "content": SHAPES[shape](size)}]
    ids: list[str] = []

    def emit(tracer: object) -> None:
        from opentelemetry.trace import SpanKind, Tracer

        assert isinstance(tracer, Tracer)
        with tracer.start_as_current_span(
            "POST /ask", kind=SpanKind.SERVER, attributes={"http.route": "/ask"}
        ) as root:
            with tracer.start_as_current_span(
                "chat gpt-4o-mini",
                attributes={
                    "gen_ai.system": "openai",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.prompt": json.dumps(prompt),
                    "gen_ai.completion": json.dumps([{"role": "assistant", "content": "ok"}]),
                },
            ):
                pass
            ids.append(format(root.get_span_context().trace_id, "032x"))

    spans = finished_spans("hostile-rag", emit)
    return ids[0], otlp_bytes(spans)


def _read_new(path: Path, offset: int, run: Run, now: float) -> int:
    """Reads the results file's whole lines past `offset`; notes when each trace id came."""
    if not path.exists():
        return offset
    with path.open("rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        with contextlib.suppress(ValueError):
            trace_id = json.loads(line).get("trace_id")
            if isinstance(trace_id, str):
                run.written_at.setdefault(trace_id, now)
    return offset + end


async def _send(args: argparse.Namespace, port: int, results: Path) -> Run:
    import aiohttp

    run = Run()
    url = f"http://127.0.0.1:{port}/v1/traces"
    shapes = list(SHAPES)
    started = time.monotonic()
    offset = 0
    honest_n = hostile_n = 0
    headers = {"Content-Type": "application/x-protobuf"}
    async with aiohttp.ClientSession(headers=headers) as session:

        async def post(kind: str, trace_id: str, body: bytes) -> None:
            async with session.post(url, data=body) as response:
                await response.read()
                if response.status == 200:
                    run.sent[trace_id] = Sent(kind, time.monotonic() - started)
                else:
                    run.refused += 1

        while (elapsed := time.monotonic() - started) < args.seconds:
            if honest_n < elapsed * args.rate:
                honest_n += 1
                await post("honest", *_honest(honest_n))
            elif hostile_n * args.hostile_every <= elapsed:
                shape = shapes[hostile_n % len(shapes)]
                hostile_n += 1
                await post(shape, *_hostile(shape, args.hostile_bytes))
            else:
                offset = _read_new(results, offset, run, time.monotonic() - started)
                await asyncio.sleep(0.05)
    return run


def _final(results: Path) -> dict[str, dict[str, object]]:
    """Trace id → its record, as the file holds it after the monitor exited."""
    records: dict[str, dict[str, object]] = {}
    if results.exists():
        for line in results.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                records[str(record.get("trace_id"))] = record
    return records


def _unevaluated(record: dict[str, object]) -> str | None:
    reason = record.get("not_evaluated")
    return None if reason is None else str(reason)


def report(args: argparse.Namespace, run: Run, records: dict[str, dict[str, object]]) -> int:
    honest = {t: s for t, s in run.sent.items() if s.kind == "honest"}
    hostile = {t: s for t, s in run.sent.items() if s.kind != "honest"}
    windows = int(args.seconds // WINDOW_S) + 1
    sent_in = [0] * windows
    written_in = [0] * windows
    for trace_id, sent in honest.items():
        sent_in[min(int(sent.at // WINDOW_S), windows - 1)] += 1
        if trace_id in run.written_at:
            written_in[min(int(run.written_at[trace_id] // WINDOW_S), windows - 1)] += 1
    print("| seconds | honest sent | honest written |")
    print("|---|---|---|")
    for i in range(windows):
        print(f"| {i * WINDOW_S:.0f}–{(i + 1) * WINDOW_S:.0f} | {sent_in[i]} | {written_in[i]} |")
    # Honest traces sent at least `late_s` before the stop: each had its chance to be
    # written in time while the monitor ran.
    due = [t for t, sent in honest.items() if sent.at <= args.seconds - args.late_s]
    in_time = [
        t for t in due if t in run.written_at and run.written_at[t] - honest[t].at <= args.late_s
    ]
    seen = [t for t in run.written_at if t in honest]
    print()
    print("| traces | accepted | evaluated | written unevaluated | missing |")
    print("|---|---|---|---|---|")
    missing_total = 0
    for name, group in (("honest", honest), ("hostile", hostile)):
        unevaluated: dict[str, int] = {}
        evaluated = missing = 0
        for trace_id in group:
            record = records.get(trace_id)
            if record is None:
                missing += 1
            elif (reason := _unevaluated(record)) is not None:
                unevaluated[reason] = unevaluated.get(reason, 0) + 1
            else:
                evaluated += 1
        missing_total += missing
        said = ", ".join(f"{n} {reason}" for reason, n in sorted(unevaluated.items())) or "0"
        print(f"| {name} | {len(group)} | {evaluated} | {said} | {missing} |")
    share = len(in_time) / len(due) if due else 1.0
    print(
        f"\nhonest traces sent {args.late_s:g} s or more before the stop: {len(due)}; "
        f"written within {args.late_s:g} s of sending: {len(in_time)} ({share:.0%}); "
        f"honest records written before the stop: {len(seen)} of {len(honest)}; "
        f"refused requests: {run.refused}"
    )
    failed = []
    if missing_total:
        failed.append(f"{missing_total} accepted traces missing from the results file")
    if share < 0.95:
        failed.append(f"only {share:.0%} of honest records written within {args.late_s:g} s")
    for line in failed:
        print(f"FAILED: {line}")
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=240.0)
    parser.add_argument("--rate", type=float, default=2.0, help="honest traces per second")
    parser.add_argument("--hostile-every", type=float, default=20.0)
    parser.add_argument("--hostile-bytes", type=int, default=12_000)
    parser.add_argument(
        "--late-s",
        type=float,
        default=30.0,
        help="an honest record written later than this after its sending is late "
        "(the monitor waits out the trace's idle timeout, 10 s, before assembling it)",
    )
    args = bench_smoke.parse_args(parser, seconds=6.0, hostile_every=2.0)
    with tempfile.TemporaryDirectory(prefix="rag-monitor-hostile-") as work:
        results = Path(work) / "results.jsonl"
        http_port, metrics_port = free_port(), free_port()
        config = Path(work) / "config.yaml"
        config.write_text(
            "receivers:\n  otlp:\n"
            f"    grpc: {{endpoint: '127.0.0.1:{free_port()}'}}\n"
            f"    http: {{endpoint: '127.0.0.1:{http_port}'}}\n"
            "sampling: {rate: 1.0}\n"
            "exporters:\n"
            f"  prometheus: {{endpoint: '127.0.0.1:{metrics_port}'}}\n"
            f"  results_file: {results}\n"
        )
        log = Path(work) / "monitor.log"
        proc = start_monitor(config, metrics_port, pin=False, log=log)
        try:
            run = asyncio.run(_send(args, http_port, results))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=120)
            except Exception:
                proc.kill()
                proc.wait()
        print(f"{os.cpu_count()} CPUs; the monitor exited with status {proc.returncode}\n")
        status = report(args, run, _final(results))
        errors = [line for line in log.read_text(errors="replace").splitlines() if "ERROR" in line]
        if errors:
            print(f"\n{len(errors)} ERROR lines in the monitor's log; the first: {errors[0][:300]}")
    sys.exit(status)


if __name__ == "__main__":
    main()
