"""Judge pipeline throughput against a fixed-latency judge, and judge calls saved by escalation.

    python bench/judge_pipeline.py [--runs 1.0:8,0.5:8,2.0:16,0.5:16] [--records 240]
                                   --data LABELLED.jsonl
                                   [--bands 0.3:0.7,0.4:0.6,0.2:0.8]

Part 1, once per `--runs` pair L:C, starts a stub OpenAI-compatible judge in a separate
process (so its CPU does not compete with the monitor's event loop) that answers every
request after exactly L seconds. Records with distinct responses (no cache hits) go
through the real `EvaluationStage` (workers = C) with one `groundedness` judge evaluator
whose client has `judge.max_concurrency = C`, i.e. the full path: sampling, budget,
template rendering, litellm over HTTP, parsing, metrics. The ideal throughput is C/L;
the target is at least 90% of it. The monitor spends a few ms of CPU per call on the event
loop (litellm most of it); calls that finish together (a fixed-latency judge keeps them in
step) queue for that CPU, so the reachable share is roughly L / (L + C * cpu_per_call).
The table gives the CPU per call measured in the run (the process's CPU time over the
calls) and that estimate beside the share; on a loaded machine the wait for a CPU stretches
each call's CPU in wall time, and the share falls below the estimate.

Part 2 scores `--data` with `local_groundedness` and reports, for each escalation band
[lo, hi], the fraction of records whose local score falls inside it (those are the only
ones an escalated judge sees), the judge calls saved, and how well the local verdict
alone does on the records outside the band (accuracy at the 0.5 threshold against
`label.hallucinated`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import bench_docs, bench_smoke  # noqa: E402

STUB_FLAG = "--serve-stub"
# The project's target for judge throughput as a share of C/L (docs/performance.md).
TARGET_SHARE = 0.9


def _serve_stub(latency: float) -> None:
    """The stub on a port the kernel picks as it binds, named on stdout's first line
    (`listening PORT`): a port picked beforehand could be taken before the bind."""
    from aiohttp import web

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(latency)
        return web.json_response(
            {
                "id": "stub",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": body.get("model", "stub"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Supported.\nScore: 4"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 300, "completion_tokens": 8, "total_tokens": 308},
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)

    async def serve() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        print(f"listening {runner.addresses[0][1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


@contextlib.contextmanager
def running_stub(latency: float) -> Iterator[int]:
    """The stub judge API in a process of its own; yields its port."""
    stub = subprocess.Popen(
        [sys.executable, __file__, STUB_FLAG, str(latency)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert stub.stdout is not None
        first = stub.stdout.readline().split()
        if first[:1] != ["listening"]:
            raise RuntimeError(f"the stub judge did not start ({stub.wait(10)})")
        yield int(first[1])
    finally:
        stub.terminate()
        stub.wait(10)


async def _wait_port(port: int, deadline_s: float = 30) -> None:
    end = time.monotonic() + deadline_s
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await writer.wait_closed()
            return
        except OSError:
            if time.monotonic() > end:
                raise
            await asyncio.sleep(0.1)


async def throughput(port: int, latency: float, concurrency: int, records: int) -> dict[str, float]:
    from monitor.component import Evaluated, SampledRecord
    from monitor.config import Config, EvaluatorConfig
    from monitor.evaluators.factory import BuildContext
    from monitor.evaluators.judges import create_judge_client
    from monitor.evaluators.registry import build
    from monitor.processors.budget import BudgetGate
    from monitor.processors.evaluation import EvaluationStage
    from monitor.records import ContextDoc, RagRecord
    from monitor.telemetry import create_telemetry

    await _wait_port(port)
    os.environ["RAG_MONITOR_BENCH_JUDGE_KEY"] = "bench-key"
    config = Config.model_validate(
        {
            "judge": {
                "model": "openai/bench-judge",
                "api_base": f"http://127.0.0.1:{port}/v1",
                "api_key_env": "RAG_MONITOR_BENCH_JUDGE_KEY",
                "max_concurrency": concurrency,
                "timeout_s": latency * 10 + 5,
            },
            "evaluators": [{"name": "groundedness"}],
        }
    )
    telemetry = create_telemetry()
    client = create_judge_client(config, telemetry)
    assert client is not None
    await client.start()  # litellm import, off the clock
    context = BuildContext(judge=client, judge_model=config.judge.model)
    evaluator = build(EvaluatorConfig(name="groundedness"), context)

    finished = asyncio.Event()
    target = concurrency

    class Count:
        done = 0
        errors = 0

        async def start(self) -> None:
            return None

        def emit(self, batch: Sequence[Evaluated]) -> None:
            for evaluated in batch:
                Count.done += 1
                Count.errors += sum(1 for r in evaluated.results.values() if r.error is not None)
            if Count.done >= target:
                finished.set()

        async def shutdown(self, deadline_s: float) -> None:
            return None

    stage = EvaluationStage(
        [(evaluator, config.evaluators[0])],
        BudgetGate(config.budget),
        [Count()],
        telemetry,
        queue_size=records,
        workers=concurrency,
    )
    docs = (ContextDoc(content="The bridge over the river opened in 1931 after four years."),)
    batch = [
        RagRecord(
            request_id=f"b{i}",
            query="When did the bridge open?",
            retrieved_context=docs,
            response=f"The bridge opened in 1931 (answer {i}).",
        )
        for i in range(records)
    ]
    await stage.start()
    # Warm-up: one round of calls so connection set-up is not measured.
    warm = [
        batch[0].model_copy(update={"request_id": f"w{i}", "response": f"warm {i}"})
        for i in range(concurrency)
    ]
    judged = frozenset({"groundedness"})
    for record in warm:
        await stage.put_many([SampledRecord(record, "bench", judged)])
    await finished.wait()
    Count.done = Count.errors = 0
    target = records
    finished.clear()
    started = time.perf_counter()
    cpu_started = time.process_time()
    for record in batch:
        await stage.put_many([SampledRecord(record, "bench", judged)])
    await finished.wait()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    await stage.shutdown(10)
    ideal = concurrency / latency
    return {
        "records": records,
        "latency_s": latency,
        "concurrency": concurrency,
        "elapsed_s": round(elapsed, 3),
        "throughput_per_s": round(records / elapsed, 2),
        "ideal_per_s": round(ideal, 2),
        "fraction_of_ideal": round(records / elapsed / ideal, 4),
        "errors": Count.errors,
        "monitor_cpu_ms_per_call": round(cpu / records * 1000, 2),
    }


async def escalation(
    rows: list[dict[str, Any]], bands: list[tuple[float, float]]
) -> dict[str, object]:
    from monitor.config import EvaluatorConfig
    from monitor.evaluators.factory import BuildContext
    from monitor.evaluators.registry import build
    from monitor.records import parse_record

    evaluator = build(EvaluatorConfig(name="local_groundedness"), BuildContext())
    scored: list[tuple[float, bool]] = []
    for row in rows:
        label = bool(row.pop("label")["hallucinated"])
        result = await evaluator.evaluate(parse_record(row))
        assert result.normalized is not None
        scored.append((result.normalized, label))
    # What scoring costs per record is bench/local_scoring.py's table, not timed here.
    report: dict[str, object] = {
        "records": len(scored),
        "hallucinated": sum(1 for _, h in scored if h),
    }
    rows_out: list[dict[str, object]] = []
    report["bands"] = rows_out
    for lo, hi in bands:
        inside = [(s, h) for s, h in scored if lo <= s <= hi]
        outside = [(s, h) for s, h in scored if not lo <= s <= hi]
        correct = sum(1 for s, h in outside if (s < 0.5) == h)
        rows_out.append(
            {
                "band": [lo, hi],
                "escalated_fraction": round(len(inside) / len(scored), 4),
                "judge_calls_saved_fraction": round(1 - len(inside) / len(scored), 4),
                "hallucinated_inside_band": sum(1 for _, h in inside if h),
                "hallucinated_outside_band": sum(1 for _, h in outside if h),
                "local_accuracy_outside_band": round(correct / len(outside), 4)
                if outside
                else None,
            }
        )
    return report


def _band(text: str) -> tuple[float, float]:
    """`0.3:0.7` -> (0.3, 0.7)."""
    low, high = text.split(":")
    return float(low), float(high)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == STUB_FLAG:
        _serve_stub(float(sys.argv[2]))
        return
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs",
        default="1.0:8,0.5:8,2.0:16,0.5:16",
        help="comma-separated LATENCY_S:CONCURRENCY pairs, one throughput run each",
    )
    parser.add_argument("--records", type=int, default=240)
    parser.add_argument(
        "--data", type=Path, required=True, help="labelled records (label.hallucinated)"
    )
    parser.add_argument("--bands", default="0.3:0.7,0.4:0.6,0.2:0.8")
    parser.add_argument("--skip-escalation", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, runs="0.1:4", records=16)
    rows = []
    for run in [] if args.skip_throughput else args.runs.split(","):
        latency, concurrency = float(run.split(":")[0]), int(run.split(":")[1])
        with running_stub(latency) as port:
            result = asyncio.run(throughput(port, latency, concurrency, args.records))
        print(json.dumps({"throughput": result}, indent=2))
        share = result["fraction_of_ideal"]
        cpu_s = result["monitor_cpu_ms_per_call"] / 1000
        rows.append(
            [
                f"{latency:g}",
                concurrency,
                f"{result['throughput_per_s']:.2f}",
                f"{result['ideal_per_s']:.2f}",
                f"**{share:.1%}**",
                f"{cpu_s * 1000:.1f}",
                f"{latency / (latency + concurrency * cpu_s):.1%}",
                "met" if share >= TARGET_SHARE else "not met",
            ]
        )
    if rows:
        header = [
            "L, s",
            "C",
            "records/s",
            "C/L",
            "share of C/L",
            "monitor CPU ms per call",
            "L / (L + C × CPU)",
            f"target ≥ {TARGET_SHARE:.0%}",
        ]
        table = bench_docs.table(header, rows)
        print(table)
        if args.write_docs:
            bench_docs.write_block("docs/performance.md", "judge-throughput", table)
    if not args.skip_escalation and args.data.exists():
        bands = [_band(b) for b in args.bands.split(",")]
        text = args.data.read_text(encoding="utf-8")
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
        report = asyncio.run(escalation(data, bands))
        print(json.dumps({"escalation": report}, indent=2))
        body = _escalation_table(report)
        print(body)
        if args.write_docs:
            bench_docs.write_block("docs/quality.md", "judge-escalation", body)


def _escalation_table(report: dict[str, Any]) -> str:
    rows = [
        [
            f"[{band['band'][0]:g}, {band['band'][1]:g}]",
            f"**{band['escalated_fraction']:.0%}**",
            band["hallucinated_inside_band"],
            band["hallucinated_outside_band"],
            "-"
            if band["local_accuracy_outside_band"] is None
            else f"{band['local_accuracy_outside_band']:.3f}",
        ]
        for band in report["bands"]
    ]
    header = [
        "band",
        "records escalated to the judge",
        "hallucinated inside",
        "hallucinated outside",
        "detector's accuracy outside (threshold 0.5)",
    ]
    return (
        f"{report['records']} records, {report['hallucinated']} hallucinated.\n\n"
        + bench_docs.table(header, rows)
    )


if __name__ == "__main__":
    main()
