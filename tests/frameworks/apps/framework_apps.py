"""What the framework apps (`tests/frameworks/apps/<framework>_app.py`) share: a small knowledge base,
questions answered by it, a hashing embedding (so the frameworks' own retrievers really
rank), the scripted model's answer rule, and the OTLP/HTTP tracer provider.

Each app is run as `python -m tests.frameworks.apps.<framework>_app INSTRUMENTATION VARIANT ENDPOINT`,
in its own process (instrumentations patch the framework globally), and prints one JSON
line per question: the trace id and what the framework handed back to the app (question,
response, sources in order), so the test can compare the extracted records with it."""

from __future__ import annotations

import json
import math
import re
import sys
import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

KB: dict[str, str] = {
    "kb/water.md": "At sea level, pure water boils at 100 degrees Celsius.",
    "kb/eiffel.md": "The Eiffel Tower stands in Paris and was completed in 1889 for the World Fair.",
    "kb/everest.md": "Mount Everest, 8849 metres tall, is the highest mountain above sea level.",
    "kb/python.md": "Python was created by Guido van Rossum and first released in 1991.",
    "kb/moon.md": "The Moon orbits the Earth once every 27 days.",
    "kb/amazon.md": "The Amazon river carries more water to the sea than any other river on Earth.",
    "kb/honey.md": "Honey never spoils: its low moisture and high acidity stop microbes growing.",
    "kb/wall.md": "The Great Wall of China was built over many centuries against invasions.",
}
ANSWERS: dict[str, str] = {
    "kb/water.md": "Water boils at 100 degrees Celsius at sea level.",
    "kb/eiffel.md": "The Eiffel Tower is in Paris; it was completed in 1889.",
    "kb/everest.md": "Mount Everest is the highest mountain, 8849 metres tall.",
    "kb/python.md": "Guido van Rossum created Python and released it in 1991.",
    "kb/moon.md": "The Moon orbits the Earth every 27 days.",
    "kb/amazon.md": "The Amazon carries the most water of any river.",
    "kb/honey.md": "Honey does not spoil because it is dry and acidic.",
    "kb/wall.md": "It was built over centuries to keep out invasions.",
}
NO_ANSWER = "I do not know."
# (question, the document that answers it)
QUESTIONS: tuple[tuple[str, str], ...] = (
    ("At what temperature does water boil at sea level?", "kb/water.md"),
    ("When was the Eiffel Tower completed?", "kb/eiffel.md"),
    ("What is the highest mountain above sea level?", "kb/everest.md"),
    ("Who created Python?", "kb/python.md"),
    ("How often does the Moon orbit the Earth?", "kb/moon.md"),
    ("Why does honey never spoil?", "kb/honey.md"),
)
# The slow model of `llama_index_app`'s `slow-call` variant: each call takes longer than
# `trace_assembly.idle_timeout_s`'s default, for the first questions only.
SLOW_CALL_S = 15.0
SLOW_QUESTIONS = 2
# Conversations of two turns: (first question, follow-up, the follow-up made standalone,
# the document that answers both).
CONVERSATIONS: tuple[tuple[str, str, str, str], ...] = (
    (
        "Where is the Eiffel Tower?",
        "When was it completed?",
        "When was the Eiffel Tower completed?",
        "kb/eiffel.md",
    ),
    (
        "Which is the highest mountain?",
        "How tall is it?",
        "How tall is Mount Everest?",
        "kb/everest.md",
    ),
    (
        "Who created Python?",
        "When was it first released?",
        "When was Python first released?",
        "kb/python.md",
    ),
)
STANDALONE = {follow_up: standalone for _, follow_up, standalone, _ in CONVERSATIONS}
EMBED_DIM = 256
_STOP = frozenset(
    "a an and any at by does for how in is it of on the to was what when where which who why".split()
)


def _tokens(text: str) -> list[str]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words if w not in _STOP]


def embed(text: str) -> list[float]:
    """A bag-of-words vector hashed into `EMBED_DIM` buckets (crc32: the same in every
    process), L2-normalised: texts sharing words are close, so retrieval really ranks."""
    vector = [0.0] * EMBED_DIM
    for token in _tokens(text):
        vector[zlib.crc32(token.encode()) % EMBED_DIM] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def search(query: str, k: int = 2) -> list[str]:
    """The ids of the `k` knowledge-base documents closest to `query` (the agent apps'
    retrieval tool ranks with this)."""
    q = embed(query)
    return sorted(KB, key=lambda uri: -sum(a * b for a, b in zip(q, embed(KB[uri]), strict=True)))[
        :k
    ]


def scripted_answer(prompt: str) -> str:
    """What the fake model says to a prompt: asked to rewrite a follow-up into a standalone
    question, the standalone question; otherwise the answer of the knowledge-base document
    that appears first in the prompt (the top-ranked context), or `NO_ANSWER`."""
    if "standalone" in prompt.lower():
        for follow_up, standalone in STANDALONE.items():
            if follow_up in prompt:
                return standalone
    found = [(prompt.find(text), uri) for uri, text in KB.items() if text in prompt]
    return ANSWERS[min(found)[1]] if found else NO_ANSWER


# The agent apps' scripted model plants one wrong fact: the Eiffel Tower's year.
PLANTED: dict[str, str] = {
    "kb/eiffel.md": "The Eiffel Tower is in Paris; it was completed in 1925.",
}


def planted_answer(prompt: str) -> str:
    """`scripted_answer`, except that the answer from a `PLANTED` document states a wrong
    fact (a faithful model's answer for every other document)."""
    answer = scripted_answer(prompt)
    for uri, wrong in PLANTED.items():
        if answer == ANSWERS[uri]:
            return wrong
    return answer


# The undeclared stacks' scripted model plants three wrong facts (the Eiffel Tower's year,
# Python's year, the Moon's period): three answers fail, three pass.
PLANTED_THREE: dict[str, str] = {
    **PLANTED,
    "kb/python.md": "Guido van Rossum created Python and released it in 2003.",
    "kb/moon.md": "The Moon orbits the Earth every 40 days.",
}


def three_planted_answer(prompt: str) -> str:
    """`scripted_answer`, with each `PLANTED_THREE` document's answer stating a wrong fact."""
    answer = scripted_answer(prompt)
    for uri, wrong in PLANTED_THREE.items():
        if answer == ANSWERS[uri]:
            return wrong
    return answer


# The instruction template of the undeclared stacks' apps: the documents are numbered
# blocks between an instruction and the question, as RAG apps commonly write them.
INSTRUCTIONS = (
    "You are a helpful assistant. Answer the question using only the documents below; "
    "if they do not contain the answer, say that you do not know."
)


def numbered_prompt(documents: Sequence[str]) -> str:
    """The system message of the undeclared stacks' apps: the instruction, then each
    document as a numbered block."""
    blocks = "\n\n".join(f"[{n}] {text}" for n, text in enumerate(documents, 1))
    return f"{INSTRUCTIONS}\n\nDocuments:\n\n{blocks}"


def answer_for(question: str) -> str | None:
    """The document id that answers a question or a conversation turn."""
    for q, uri in QUESTIONS:
        if q == question:
            return uri
    for first, follow_up, _, uri in CONVERSATIONS:
        if question in (first, follow_up):
            return uri
    return None


class RootSpans(SpanProcessor):
    """Remembers the trace id of every root span that ended, for apps whose framework span
    is the root (no server span around it), and how many spans of each trace ended."""

    def __init__(self) -> None:
        self.trace_ids: list[str] = []
        self.ended: dict[str, int] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is None:
            return
        trace_id = f"{span.context.trace_id:032x}"
        self.ended[trace_id] = self.ended.get(trace_id, 0) + 1
        if span.parent is None:
            self.trace_ids.append(trace_id)


def tracer_provider(
    service: str, endpoint: str, exporter: SpanExporter | None = None
) -> tuple[TracerProvider, RootSpans]:
    """A provider exporting through the SDK's batch processor, by default with its
    OTLP/HTTP exporter to `endpoint`."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    roots = RootSpans()
    provider.add_span_processor(roots)
    exporter = exporter or OTLPSpanExporter(endpoint=endpoint)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider, roots


# How long a held exporter waits for `go` at most: a test that failed never sets it.
HOLD_S = 120


class HeldSpans(OTLPSpanExporter):
    """The SDK's OTLP/HTTP span exporter, its sends held until `go` is set (a slow
    network): the app's spans reach the monitor after its log records."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(endpoint=endpoint)
        self.go = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.go.wait(HOLD_S)
        return super().export(spans)


class HeldLogs(OTLPLogExporter):
    """The SDK's OTLP/HTTP log exporter, its sends held until `go` is set: the app's log
    records reach the monitor after its spans."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(endpoint=endpoint)
        self.go = threading.Event()

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self.go.wait(HOLD_S)
        return super().export(batch)


def hold_until_told(held: str) -> None:
    """Tell the test what the app holds back now (`{"held": ...}`: the rest was exported
    and acknowledged), and wait for its line on stdin that lets it go."""
    print(json.dumps({"held": held}), flush=True)
    sys.stdin.readline()


def finish(provider: TracerProvider, roots: RootSpans) -> None:
    """Flush every span, then tell the test how many traces the app sent (`sent`)."""
    provider.shutdown()
    sent(roots)


def sent(roots: RootSpans) -> None:
    """Tell the test how many traces the app sent in all (index builds and resets
    included), so it can check each one was either a record or counted: its last line."""
    print(json.dumps({"traces": len(roots.trace_ids)}), flush=True)


def report(trace_id: str, question: str, response: str, sources: Sequence[str]) -> None:
    """One line for the test: what the framework returned to the app for one question."""
    print(
        json.dumps(
            {
                "trace_id": trace_id,
                "question": question,
                "response": response,
                "sources": list(sources),
            }
        ),
        flush=True,
    )


def answer_from(client: Any, question: str, documents: Sequence[str]) -> str:
    """The RAG apps' model call: the retrieved documents in the system message, the question
    as the user's, through an OpenAI client (`tests/frameworks/apps/openai_server.py`'s scripted model)."""
    context = "\n".join(documents)
    completion = client.chat.completions.create(
        model="scripted",
        messages=[
            {"role": "system", "content": f"Answer from these documents:\n{context}"},
            {"role": "user", "content": question},
        ],
    )
    return str(completion.choices[0].message.content or "")


def ask_under_app_spans(
    provider: TracerProvider, ask: Callable[[str], tuple[str, Sequence[str]]]
) -> None:
    """Ask each question under an app span (`POST /ask`) and report what came back:
    `ask(question)` is the response and the documents the model was given."""
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}) as span:
            trace_id = f"{span.get_span_context().trace_id:032x}"
            response, sources = ask(question)
        report(trace_id, question, response, sources)


def ask_each_question(provider: TracerProvider, ask: Callable[[str], str]) -> None:
    """For the agent apps whose tool ranks with `search`: ask each question under an app
    span (`POST /ask`) and report what came back, with the documents the tool returned."""
    ask_under_app_spans(provider, lambda q: (ask(q), [KB[uri] for uri in search(q)]))
