"""The OTLP load the ingest benches send: export requests of 512 spans (128 RAG traces of
4 spans: CHAIN root, RETRIEVER with 3 documents, LLM with system/user/assistant messages,
output-parser CHAIN; the OpenInference convention), pre-serialized, with fresh trace ids
patched into every request so the client does little work."""

from __future__ import annotations

import json
import os
import random
import time

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

SPANS_PER_TRACE = 4
BATCH = 512
QUESTIONS = [
    "What is the boiling point of water at sea level?",
    "Who designed the Eiffel Tower?",
    "How tall is Mount Everest?",
    "When did the Apollo 11 mission land on the Moon?",
]
DOCS = [
    "At sea level, water boils at 100 degrees Celsius (212 degrees Fahrenheit).",
    "The Eiffel Tower was designed by the engineering firm of Gustave Eiffel and completed in 1889.",
    "Mount Everest is 8,849 metres tall, the highest mountain above sea level.",
    "Apollo 11 landed on the Moon on 20 July 1969; Neil Armstrong was the first to step out.",
]
# Each answer restates its document in other words: an answer that is a copy of a retrieved
# document reads as a wrongly extracted trace to the monitor, which then scores nothing.
ANSWERS = [
    "Water boils at 100 degrees Celsius, or 212 degrees Fahrenheit, at sea level.",
    "Gustave Eiffel's engineering firm designed the tower, which was finished in 1889.",
    "Everest is the highest mountain above sea level, at 8,849 metres.",
    "It landed on 20 July 1969, and Neil Armstrong stepped out first.",
]

_FILLER = "The passage goes on with more of the source document's text. "
_ANSWER_FILLER = "The answer goes on to explain this in its own words. "


def _kv(key: str, value: str | int | float) -> KeyValue:
    if isinstance(value, str):
        return KeyValue(key=key, value=AnyValue(string_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(double_value=value))


def _padded(text: str, filler: str, size: int) -> str:
    """`text` followed by `filler` repeated, `size` characters in all (at least `text`)."""
    return (text + " " + filler * (1 + size // len(filler)))[: max(size, len(text))]


def build_payload(
    rng: random.Random, light: int = 0, doc_padding: int = 0
) -> tuple[bytes, list[bytes]]:
    """One 512-span export request and the trace ids in it; `light` extra non-RAG spans
    (database / HTTP client calls with 4 short attributes) per trace; `doc_padding`
    characters more in every document (longer retrieved passages, answers and prompts)."""
    docs_text = [_padded(d, _FILLER, len(d) + doc_padding) for d in DOCS]
    answers = [
        _padded(a, _ANSWER_FILLER, len(d) + doc_padding) for a, d in zip(ANSWERS, DOCS, strict=True)
    ]
    spans = []
    trace_ids = []
    t0 = time.time_ns()
    for n in range(BATCH // (SPANS_PER_TRACE + light)):
        trace_id = rng.randbytes(16)
        trace_ids.append(trace_id)
        root = rng.randbytes(8)
        q = QUESTIONS[n % len(QUESTIONS)]
        docs = [docs_text[(n + i) % len(DOCS)] for i in range(3)]
        answer = answers[n % len(DOCS)]
        system = "Answer only from the context below.\n\n" + "\n\n".join(docs)

        def span(
            name: str,
            parent: bytes,
            start: int,
            end: int,
            attrs: list[KeyValue],
            trace_id: bytes = trace_id,
            root: bytes = root,
        ) -> Span:
            return Span(
                trace_id=trace_id,
                span_id=rng.randbytes(8) if parent else root,
                parent_span_id=parent,
                name=name,
                start_time_unix_nano=t0 + start,
                end_time_unix_nano=t0 + end,
                attributes=attrs,
            )

        retr = [_kv("openinference.span.kind", "RETRIEVER"), _kv("input.value", q)]
        for i, d in enumerate(docs):
            retr += [
                _kv(f"retrieval.documents.{i}.document.id", f"kb/{i}.md"),
                _kv(f"retrieval.documents.{i}.document.content", d),
                _kv(f"retrieval.documents.{i}.document.score", 0.9 - i / 10),
            ]
        llm = [
            _kv("openinference.span.kind", "LLM"),
            _kv("llm.model_name", "gpt-4o-mini"),
            _kv("llm.input_messages.0.message.role", "system"),
            _kv("llm.input_messages.0.message.content", system),
            _kv("llm.input_messages.1.message.role", "user"),
            _kv("llm.input_messages.1.message.content", q),
            _kv("llm.output_messages.0.message.role", "assistant"),
            _kv("llm.output_messages.0.message.content", answer),
            _kv("llm.token_count.prompt", 180),
            _kv("llm.token_count.completion", 25),
        ]
        chain = [
            _kv("openinference.span.kind", "CHAIN"),
            _kv("input.value", answer),
            _kv("output.value", answer),
        ]
        for i in range(light):
            spans.append(
                span(
                    "SELECT documents",
                    root,
                    10_000 + i,
                    20_000 + i,
                    [
                        _kv("db.system", "postgresql"),
                        _kv("db.operation", "SELECT"),
                        _kv("server.address", "db.internal"),
                        _kv("server.port", 5432),
                    ],
                )
            )
        spans += [
            span("VectorStoreRetriever", root, 1_000, 5_000_000, retr),
            span("ChatOpenAI", root, 6_000_000, 900_000_000, llm),
            span("StrOutputParser", root, 900_000_001, 900_100_000, chain),
            span(
                "RetrievalQA",
                b"",
                0,
                901_000_000,
                [
                    _kv("openinference.span.kind", "CHAIN"),
                    _kv("input.value", json.dumps({"question": q})),
                    _kv("output.value", answer),
                    _kv("http.route", "/ask"),
                ],
            ),
        ]
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=[_kv("service.name", "bench-rag")]),
                scope_spans=[ScopeSpans(spans=spans)],
            )
        ]
    )
    return request.SerializeToString(), trace_ids


class Payloads:
    """Pre-serialized bodies whose trace ids are rewritten in place for every request."""

    def __init__(self, count: int = 8, seed: int = 1, light: int = 0, doc_padding: int = 0) -> None:
        rng = random.Random(seed)
        self._bodies = []
        self.spans_per_trace = SPANS_PER_TRACE + light
        for _ in range(count):
            body, ids = build_payload(rng, light, doc_padding)
            offsets = []
            for trace_id in ids:
                start = 0
                while (at := body.find(trace_id, start)) != -1:
                    offsets.append(at)
                    start = at + 16
            self._bodies.append((bytearray(body), offsets, len(ids)))
        self._next = 0

    def next(self) -> bytes:
        body, offsets, _ = self._bodies[self._next % len(self._bodies)]
        self._next += 1
        fresh = os.urandom(16 * (len(offsets) // self.spans_per_trace))
        for i, at in enumerate(offsets):
            t = i // self.spans_per_trace
            body[at : at + 16] = fresh[16 * t : 16 * t + 16]
        return bytes(body)
