"""`/debug/records` is bounded by bytes whatever its records hold: each entry within
`ENTRY_BYTES` (the documents and turns left out are said), each kind within `KIND_BYTES`
(the entries of the last N left out are said), text cut and redacted."""

from __future__ import annotations

import json

from monitor.exporters.debug_records import ENTRY_BYTES, KIND_BYTES, TEXT_LIMIT, DebugRecords
from monitor.records import ChatMessage, ContextDoc, RagRecord

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
    assert shown["left_out"] == {"extracted": 100 - len(extracted), "no_record": 0}
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


def test_small_records_are_shown_whole() -> None:
    debug = DebugRecords(5, redact=None)
    for i in range(8):
        debug.extracted(_record(i, 3, 20), "kafka")
    shown = debug.snapshot()
    assert [e["request_id"] for e in shown["extracted"]] == ["r7", "r6", "r5", "r4", "r3"]
    assert shown["left_out"] == {"extracted": 0, "no_record": 0}
    entry = shown["extracted"][0]
    assert entry["documents_left_out"] == entry["history_left_out"] == 0
    assert [doc["doc_uri"] for doc in entry["context"]] == ["kb/0", "kb/1", "kb/2"]
    assert entry["query"] == f"question 7 from {SECRET}?"
