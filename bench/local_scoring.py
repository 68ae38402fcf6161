"""CPU per record of the four local evaluators, on the records of the ingest benches' load.

    python bench/local_scoring.py [--records 256] [--rounds 5] [--distinct]

The records are those the trace stage extracts from `bench/_otlp_load.py`'s requests (the
load of `bench/sidecar_cost.py`: a question, three retrieved documents, the answer).
`--distinct` appends a numbered clause to each record's question, documents and answer,
so that no two records share a text (a per-text cache then gains nothing across records).
Each record goes through the four evaluators in turn, as a worker scores a batch; the
process CPU time per record is printed for each evaluator and in all, the best of
`--rounds` (the machine is shared: the best round is the least disturbed one).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import _docs  # noqa: E402
from bench._otlp_load import build_payload  # noqa: E402
from monitor.config import EvaluatorConfig  # noqa: E402
from monitor.evaluators.base import CpuScorer  # noqa: E402
from monitor.evaluators.factory import BuildContext  # noqa: E402
from monitor.evaluators.local import FACTORIES  # noqa: E402
from monitor.extraction._extraction_rule import extract_records  # noqa: E402
from monitor.records import RagRecord  # noqa: E402
from monitor.spans import Span, decode_protobuf  # noqa: E402

NAMES = ("local_groundedness", "local_relevance", "local_retrieval", "local_safety")


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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--distinct", action="store_true")
    _docs.add_flag(parser)
    args = parser.parse_args()
    records = load_records(args.records, args.distinct)
    evaluators = [FACTORIES[n](EvaluatorConfig(name=n), BuildContext()) for n in NAMES]
    scorers = [e.score for e in evaluators if isinstance(e, CpuScorer)]
    for record in records[:16]:  # warm: word vectors read, caches of words filled
        for score in scorers:
            score(record)
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        spent = dict.fromkeys(NAMES, 0.0)
        for record in records:
            for name, score in zip(NAMES, scorers, strict=True):
                started = time.process_time()
                score(record)
                spent[name] += time.process_time() - started
        if not best or sum(spent.values()) < sum(best.values()):
            best = spent
    per_record = {name: seconds / len(records) * 1000 for name, seconds in best.items()}
    rows = [[f"`{name}`", f"{ms:.3f}"] for name, ms in per_record.items()]
    rows.append(["all four", f"**{sum(per_record.values()):.3f}**"])
    texts = "no two records share a text" if args.distinct else "the load's own texts"
    table = _docs.table(
        [f"{len(records)} records, {texts}", f"CPU ms per record, best of {args.rounds} rounds"],
        rows,
    )
    print(table)
    if args.write_docs:
        block = "local-scoring-distinct" if args.distinct else "local-scoring"
        _docs.write_block("docs/performance.md", block, table)


if __name__ == "__main__":
    main()
