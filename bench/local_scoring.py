"""CPU per record of each local evaluator, by the size of the record's texts: the one table of
what local scoring costs (`docs/performance.md`, "CPU per record of the local evaluators").

    python bench/local_scoring.py [--records 256] [--rounds 5] [--data-dir DATA] [--write-docs]

Record sets, each scored by the four evaluators in turn on one thread, as a worker scores a
batch:

- the ingest load's records: those the trace stage extracts from `harness/otlp_load.py`'s
  requests (the load of `bench/sidecar_cost.py`: a question, three retrieved documents,
  the answer);
- the same with a numbered clause appended to each text, so that no two records share one
  (a per-text cache then gains nothing across records);
- a 500-word context in two documents and a 60-word answer: the records of `bench/all.py`,
  `bench/worker_pool.py` and the speed line of `bench/detector_quality.py`;
- RAGTruth QA dev and HaluEval QA dev, real records, when `--data-dir` holds
  `ragtruth_qa_dev.jsonl` and `halueval_qa_dev.jsonl`.

Each row gives the median words of a record's context (all its documents) and answer, and
the process CPU time per record of each evaluator and of all four: the mean over the set,
the best of `--rounds` rounds (the machine is shared: the best round is the least disturbed
one), each round started with the detector's caches of texts emptied, so that records meet
their texts as new ones (within a set, records that share a text share the cache, as in
production). The first stage of `local_groundedness` only, as shipped (the second stage
is off by default).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.detector_quality import _synthetic  # noqa: E402
from harness import bench_docs, bench_smoke  # noqa: E402
from harness.otlp_load import build_payload  # noqa: E402
from monitor.config import EvaluatorConfig  # noqa: E402
from monitor.evaluators.base import CpuScorer  # noqa: E402
from monitor.evaluators.factory import BuildContext  # noqa: E402
from monitor.evaluators.local import FACTORIES  # noqa: E402
from monitor.extraction._extraction_rule import extract_records  # noqa: E402
from monitor.records import ContextDoc, RagRecord, parse_record  # noqa: E402
from monitor.spans import Span, decode_protobuf  # noqa: E402

NAMES = ("local_groundedness", "local_relevance", "local_retrieval", "local_safety")
DATA_FILES = (
    ("RAGTruth QA dev", "ragtruth_qa_dev.jsonl"),
    ("HaluEval QA dev", "halueval_qa_dev.jsonl"),
)


def load_records(count: int, distinct: bool, doc_padding: int = 112) -> list[RagRecord]:
    rng = random.Random(1)
    records: list[RagRecord] = []
    while len(records) < count:
        body, _ = build_payload(rng, doc_padding=doc_padding)
        traces: dict[str, list[Span]] = defaultdict(list)
        for span in decode_protobuf(body).spans:
            traces[span.trace_id].append(span)
        for spans in traces.values():
            records += extract_records(spans)
    records = records[:count]
    if distinct:
        records = [_distinct(n, r) for n, r in enumerate(records)]
    return records


def _distinct(n: int, record: RagRecord) -> RagRecord:
    docs = tuple(
        d.model_copy(update={"content": f"{d.content} Entry {3 * n + i}."})
        for i, d in enumerate(record.retrieved_context)
    )
    return record.model_copy(
        update={
            "query": f"{(record.query or '').rstrip('?')} in case {n}?",
            "retrieved_context": docs,
            "response": f"{record.response} It was noted in report {n}.",
        }
    )


def synthetic_records(count: int) -> list[RagRecord]:
    """A 500-word context in two documents and a 60-word answer, as `bench/all.py` builds
    them."""
    rng = random.Random(7)
    records = []
    for i in range(count):
        words = _synthetic(rng, 500).split()
        halves = (" ".join(words[:250]), " ".join(words[250:]))
        records.append(
            RagRecord(
                request_id=f"bench-{i}",
                query="what does the report say?",
                retrieved_context=tuple(ContextDoc(content=h) for h in halves),
                response=_synthetic(rng, 60),
            )
        )
    return records


def file_records(path: Path) -> list[RagRecord]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [parse_record({k: v for k, v in row.items() if k != "label"}) for row in rows]


def words(record: RagRecord) -> tuple[int, int]:
    """Words of the context (all documents) and of the answer."""
    context = sum(len(d.content.split()) for d in record.retrieved_context)
    return context, len((record.response or "").split())


def scorers() -> list[Callable[[RagRecord], object]]:
    """The four local evaluators' scoring functions, in `NAMES`' order."""
    evaluators = [FACTORIES[n](EvaluatorConfig(name=n), BuildContext()) for n in NAMES]
    return [e.score for e in evaluators if isinstance(e, CpuScorer)]


def clear_text_caches() -> None:
    """Empty the detector's caches of texts, sentences and words (not its models, cached
    once), so that a round meets its records' texts as new ones: without this, every round
    after the first reads its sentences from the caches the first one filled."""
    for name, module in list(sys.modules.items()):
        if name.startswith("monitor.detector"):
            for value in vars(module).values():
                if isinstance(value, type):
                    continue  # a cache's class, not a cache
                info = getattr(value, "cache_info", None)
                if info is not None and info().maxsize != 1:
                    value.cache_clear()


def cpu_ms(
    records: list[RagRecord], scorers: Sequence[Callable[[RagRecord], object]], rounds: int
) -> dict[str, float]:
    """CPU ms per record of each evaluator, the best of `rounds` rounds over `records`,
    each round with the text caches empty."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        clear_text_caches()
        spent = dict.fromkeys(NAMES, 0.0)
        for record in records:
            for name, score in zip(NAMES, scorers, strict=True):
                started = time.process_time()
                score(record)
                spent[name] += time.process_time() - started
        if not best or sum(spent.values()) < sum(best.values()):
            best = spent
    return {name: seconds / len(records) * 1000 for name, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=256, help="records of each built set")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--data-dir", type=Path, help="folder with the labelled dev files")
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, records=16, rounds=1)
    sets = [
        ("the ingest load's records", load_records(args.records, distinct=False)),
        ("the same, no two sharing a text", load_records(args.records, distinct=True)),
        ("500-word context, 60-word answer", synthetic_records(args.records)),
    ]
    for name, file in DATA_FILES if args.data_dir else ():
        sets.append((name, file_records(args.data_dir / file)))
    four = scorers()
    cpu_ms(sets[0][1][:16], four, 1)  # warm: word vectors read, caches of words filled
    rows = []
    for name, records in sets:
        sizes = [words(r) for r in records]
        context = statistics.median(c for c, _ in sizes)
        answer = statistics.median(a for _, a in sizes)
        per_record = cpu_ms(records, four, args.rounds)
        rows.append(
            [
                name,
                len(records),
                f"{context:.0f}",
                f"{answer:.0f}",
                *(f"{per_record[n]:.2f}" for n in NAMES),
                f"**{sum(per_record.values()):.2f}**",
            ]
        )
    header = [
        "records",
        "n",
        "context words (median)",
        "answer words (median)",
        *(f"`{n}`" for n in NAMES),
        "all four",
    ]
    table = bench_docs.table(header, rows)
    body = f"CPU ms per record, one thread, the best of {args.rounds} rounds:\n\n{table}"
    print(body)
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "local-scoring", body)


if __name__ == "__main__":
    main()
