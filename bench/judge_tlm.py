"""`trustworthiness_tlm` per preset against the Likert `trustworthiness` judge, on a real
small model: calls, tokens and wall time per record, and the score's AUROC on labelled data.

    python bench/judge_tlm.py DATA.jsonl [--records 12] [--cost-records 2] [--threads 1]
                              [--max-output-tokens 96] [--band 0.3,0.7] [--price 0.15,0.60]

DATA.jsonl: records in the project's native shape with `label.hallucinated` (e.g. the
RAGTruth QA dev file). A balanced random sample of `--records` is scored.

Starts llama.cpp's OpenAI-compatible server (`xllamacpp`) with SmolLM2-135M-Instruct
(`harness/llama_server.py`), one slot, and then:

1. **Cost** (the first `--cost-records` records): each evaluator (`trustworthiness` and
   `trustworthiness_tlm` at `low`, `medium`, `high`) with its own judge client, so nothing
   is served from another's cache; per record: calls (`judge_requests_total`), input and
   output tokens, wall time; and the ratio of each to the Likert judge's in this run.
2. **Quality** (all records, one shared client): `high` is run first; `medium` and `low`
   then reuse its first drawn answers and first reflection wording from the cache (drawn
   answers are independent, so a preset's score on the first k of them is a fair draw of
   that preset). Also the consistency part alone with agreement by the detector and by the
   judge (`agreement: judge`, three more calls per record at `low`), and the Likert judge.
   AUROC of each score for `label.hallucinated` (a low score should mean hallucinated),
   over the records that got a score; errors are counted.

A 135M model judges badly: the AUROCs say how this plumbing behaves with a weak model, not
what the method reaches with a capable one. Answers are capped at `--max-output-tokens`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")

from harness import bench_docs, bench_smoke  # noqa: E402
from harness.llama_server import MODEL, available, llama_server  # noqa: E402
from monitor.config import Config, EvaluatorConfig  # noqa: E402
from monitor.evaluators.base import Evaluator  # noqa: E402
from monitor.evaluators.factory import BuildContext  # noqa: E402
from monitor.evaluators.registry import build  # noqa: E402
from monitor.evaluators.tlm import TrustworthinessTlmEvaluator  # noqa: E402
from monitor.judge.client import OUTCOMES, JudgeClient  # noqa: E402
from monitor.records import RagRecord, parse_record  # noqa: E402
from monitor.results import EvalResult  # noqa: E402
from monitor.telemetry import Telemetry, create_telemetry  # noqa: E402

PRESETS = ("low", "medium", "high")


def load(rows: list[dict[str, Any]], n: int, seed: int) -> list[tuple[RagRecord, bool]]:
    bad = [r for r in rows if r["label"]["hallucinated"]]
    good = [r for r in rows if not r["label"]["hallucinated"]]
    rng = random.Random(seed)
    chosen = rng.sample(bad, n // 2) + rng.sample(good, n - n // 2)
    rng.shuffle(chosen)
    out = []
    for r in chosen:
        label = bool(r["label"]["hallucinated"])
        fields = {k: v for k, v in r.items() if k not in ("label", "model")}
        out.append((parse_record(fields), label))
    return out


def auroc(scores: list[float], hallucinated: list[bool]) -> float | None:
    """P(a faithful record scores above a hallucinated one), ties counted half."""
    pos = [s for s, h in zip(scores, hallucinated, strict=True) if not h]
    neg = [s for s, h in zip(scores, hallucinated, strict=True) if h]
    if not pos or not neg:
        return None
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


class Setup:
    def __init__(self, base: str, max_output_tokens: int) -> None:
        self.config = Config.model_validate(
            {
                "judge": {
                    "model": MODEL,
                    "api_base": base,
                    "max_concurrency": 1,  # the server has one slot
                    "retries": 0,
                    "timeout_s": 300,
                    "structured_output": "off",
                    "max_output_tokens": max_output_tokens,
                },
                "evaluators": [{"name": "trustworthiness"}, {"name": "trustworthiness_tlm"}],
            }
        )
        self.telemetry: Telemetry = create_telemetry()
        self.client = JudgeClient(self.config.judge, self.config.redaction, self.telemetry)
        self.context = BuildContext(judge=self.client, judge_model=self.config.judge.model)

    def evaluator(self, preset: str | None, **tlm: Any) -> Evaluator:
        if preset is None:
            return build(EvaluatorConfig(name="trustworthiness"), self.context)
        entry = EvaluatorConfig.model_validate(
            {"name": "trustworthiness_tlm", "tlm": {"preset": preset, **tlm}}
        )
        return build(entry, self.context)

    def calls(self) -> float:
        registry = self.telemetry.registry
        return sum(
            registry.get_sample_value(
                "rag_monitor_judge_requests_total", {"model": MODEL, "outcome": o}
            )
            or 0.0
            for o in OUTCOMES
        )


NAMES: dict[str | None, str] = {
    None: "trustworthiness (Likert)",
    **{p: f"trustworthiness_tlm {p}" for p in PRESETS},
}


def _mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):.3f}" if values else "-"


def escalated_share(rows: list[dict[str, Any]], band: tuple[float, float]) -> float:
    """The share of the file's records whose embedded-detector score (`local_groundedness`)
    falls in `band`: the records an escalated judge would see."""
    from monitor.detector import score_groundedness

    inside = 0
    for row in rows:
        record = parse_record({k: v for k, v in row.items() if k not in ("label", "model")})
        score = score_groundedness(
            record.query or "", record.context_text, record.response or ""
        ).score
        inside += band[0] <= score <= band[1]
    share = inside / len(rows)
    print(
        f"local_groundedness in [{band[0]:g}, {band[1]:g}]: {inside} of {len(rows)} records ({share:.1%})"
    )
    return share


async def cost(
    base: str,
    records: list[tuple[RagRecord, bool]],
    max_tokens: int,
    price: tuple[float, float],
    share: float,
) -> None:
    print(f"\n**Cost per record** ({len(records)} records, each evaluator with its own client):\n")
    rows: dict[str | None, tuple[float, float, float, float]] = {}
    for preset in (None, *PRESETS):
        setup = Setup(base, max_tokens)
        await setup.client.start()  # litellm's import is not a call's time
        evaluator = setup.evaluator(preset)
        tokens_in = tokens_out = wall = 0.0
        for record, _ in records:
            started = time.perf_counter()
            result = await evaluator.evaluate(record)
            wall += time.perf_counter() - started
            tokens_in += result.input_tokens
            tokens_out += result.output_tokens
        n = len(records)
        rows[preset] = (setup.calls() / n, tokens_in / n, tokens_out / n, wall / n)
    ref = rows[None]
    print(
        "| evaluator | calls | input tokens | output tokens | wall s | calls × | tokens × "
        f"| wall × | USD / 1,000 records | escalated ({share:.0%}) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for preset, (calls, tin, tout, wall) in rows.items():
        usd = 1000 * (tin * price[0] + tout * price[1]) / 1e6
        print(
            f"| {NAMES[preset]} | {calls:.1f} | {tin:.0f} | {tout:.0f} | {wall:.1f} | "
            f"{calls / ref[0]:.1f} | {(tin + tout) / (ref[1] + ref[2]):.1f} | {wall / ref[3]:.1f} "
            f"| {usd:.2f} | {usd * share:.2f} |"
        )
    print(
        f"\n(USD at {price[0]:g} / {price[1]:g} per 1M input / output tokens, these token counts)"
    )


async def quality(base: str, records: list[tuple[RagRecord, bool]], max_tokens: int) -> None:
    setup = Setup(base, max_tokens)
    evaluators: dict[str, Evaluator] = {
        "trustworthiness_tlm high": setup.evaluator("high"),
        "trustworthiness_tlm medium": setup.evaluator("medium"),
        "trustworthiness_tlm low": setup.evaluator("low"),
        "consistency only, detector agreement (low)": setup.evaluator("low"),
        "consistency only, judge agreement (low)": setup.evaluator("low", agreement="judge"),
        "trustworthiness (Likert)": setup.evaluator(None),
    }
    results: dict[str, list[EvalResult]] = {name: [] for name in evaluators}
    started = time.perf_counter()
    for i, (record, _) in enumerate(records, 1):
        for name, evaluator in evaluators.items():
            results[name].append(await evaluator.evaluate(record))
        print(
            f"  record {i}/{len(records)} done, {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    labels = [h for _, h in records]
    print(
        f"\n**AUROC on {len(records)} labelled records** ({sum(labels)} hallucinated), "
        f"SmolLM2-135M, one shared client:\n"
    )
    print("| score | scored | errors | AUROC | mean score, faithful | mean score, hallucinated |")
    print("|---|---|---|---|---|---|")
    for name, got in results.items():
        pairs = [
            (r.normalized, h) for r, h in zip(got, labels, strict=True) if r.normalized is not None
        ]
        scores = [s for s, _ in pairs]
        flags = [h for _, h in pairs]
        value = auroc(scores, flags)
        faithful = [s for s, h in pairs if not h]
        bad = [s for s, h in pairs if h]
        print(
            f"| {name} | {len(pairs)} | {len(got) - len(pairs)} | "
            f"{'-' if value is None else f'{value:.3f}'} | {_mean(faithful)} | {_mean(bad)} |"
        )
    errors = sorted({(r.error or "")[:90] for got in results.values() for r in got if r.error})
    if errors:
        print("\nErrors (the first 90 characters):\n")
    for error in errors[:8]:
        print(f"- {error}")
    print(f"\nquality wall time {time.perf_counter() - started:.0f} s, {setup.calls():.0f} calls")


async def agreement_methods(
    base: str, rows: list[dict[str, Any]], judged_pairs: int, max_tokens: int
) -> None:
    """How well each agreement measure tells two answers that agree from two that do not,
    on real answers: RAGTruth has several models' answers to one question; a pair of two
    faithful answers is taken as agreeing, a pair of one faithful and one hallucinated
    answer as disagreeing (a proxy: faithful answers may still differ in detail)."""
    from itertools import combinations

    from monitor.evaluators.f1 import token_f1
    from monitor.judge.consistency import detector_agreement

    by_question: dict[str, list[tuple[RagRecord, bool]]] = {}
    for row in rows:
        record = parse_record({k: v for k, v in row.items() if k not in ("label", "model")})
        by_question.setdefault(record.query or "", []).append(
            (record, bool(row["label"]["hallucinated"]))
        )
    pairs: list[tuple[str, str, str, bool]] = []
    for question, answers in by_question.items():
        for (a, bad_a), (b, bad_b) in combinations(answers, 2):
            if bad_a and bad_b:
                continue
            pairs.append((question, a.response or "", b.response or "", not (bad_a or bad_b)))
    random.Random(0).shuffle(pairs)
    agree = [same for *_, same in pairs]
    started = time.process_time()
    detector = [detector_agreement(q, a, b).score for q, a, b, _ in pairs]
    cpu_ms = 1000 * (time.process_time() - started) / len(pairs)
    overlap = [token_f1(a, b) for _, a, b, _ in pairs]
    # AUROC with "agreeing" as the positive class: `auroc` takes hallucinated=True as negative.
    print(f"\n**Agreement measures on {len(pairs)} answer pairs** ({sum(agree)} agreeing):\n")
    print("| measure | pairs | AUROC | cost per pair |")
    print("|---|---|---|---|")
    disagree = [not x for x in agree]
    print(
        f"| detector both ways (default) | {len(pairs)} | {auroc(detector, disagree):.3f} | 0 calls, {cpu_ms:.0f} ms CPU |"
    )
    print(f"| token F1 | {len(pairs)} | {auroc(overlap, disagree):.3f} | 0 calls |")
    if judged_pairs:
        setup = Setup(base, max_tokens)
        evaluator = setup.evaluator("low", agreement="judge")
        assert isinstance(evaluator, TrustworthinessTlmEvaluator)
        subset = pairs[:judged_pairs]
        verdicts = [await evaluator.judge_agreement(q, a, b) for q, a, b, _ in subset]
        scored = [
            (v.value, same)
            for v, (*_, same) in zip(verdicts, subset, strict=True)
            if v.error is None
        ]
        tokens = sum(v.input_tokens + v.output_tokens for v in verdicts) / len(subset)
        value = auroc([float(bool(x)) for x, _ in scored], [not s for _, s in scored])
        sub_detector = auroc(detector[:judged_pairs], disagree[:judged_pairs])
        print(
            f"| judge YES/NO (SmolLM2-135M) | {len(scored)} of {len(subset)} read | "
            f"{'-' if value is None else f'{value:.3f}'} | 1 call, {tokens:.0f} tokens |"
        )
        print(
            f"| detector on the same {len(subset)} pairs | {len(subset)} | "
            f"{'-' if sub_detector is None else f'{sub_detector:.3f}'} | |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data", type=Path)
    parser.add_argument("--records", type=int, default=12)
    parser.add_argument("--cost-records", type=int, default=2)
    parser.add_argument("--band", default="0.3,0.7", help="escalation band of local_groundedness")
    parser.add_argument(
        "--price", default="0.15,0.60", help="USD per 1M input,output tokens for the cost column"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-output-tokens", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--judged-pairs", type=int, default=30)
    bench_docs.add_flag(parser)
    # Smoke: one call per judged pair, answers cut at 4 tokens (the server's prompt and
    # decoding time are what a smoke run costs; a cut answer is a path of its own).
    args = bench_smoke.parse_args(
        parser, records=1, cost_records=1, max_output_tokens=4, judged_pairs=1
    )
    missing = available()
    if missing:
        raise SystemExit(missing)
    rows = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines() if line]
    records = load(rows, args.records, args.seed)
    band = tuple(float(x) for x in args.band.split(","))
    price = tuple(float(x) for x in args.price.split(","))
    share = escalated_share(rows, (band[0], band[1]))
    log = Path(tempfile.mkdtemp()) / "llama.log"
    with (
        bench_docs.captured() as report,
        llama_server(log, threads=args.threads, ctx=4096, parallel=1, timeout=300) as base,
    ):
        print(
            f"Model {MODEL} (llama.cpp, {args.threads} thread), answers ≤ "
            f"{args.max_output_tokens} tokens; {share:.0%} of the file's records have a "
            f"`local_groundedness` score in [{band[0]:g}, {band[1]:g}] (the escalated column)."
        )
        if args.cost_records:
            asyncio.run(
                cost(
                    base,
                    records[: args.cost_records],
                    args.max_output_tokens,
                    (price[0], price[1]),
                    share,
                )
            )
        if args.records:
            asyncio.run(quality(base, records, args.max_output_tokens))
        asyncio.run(agreement_methods(base, rows, args.judged_pairs, args.max_output_tokens))
    if args.write_docs:
        bench_docs.write_block("docs/quality.md", "judge-tlm", report.getvalue())


if __name__ == "__main__":
    main()
